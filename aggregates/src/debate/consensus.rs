//! Turning votes into a consensus: pure arithmetic, written down in the
//! README ("Consensus") so that anyone can recompute a result from its votes.
//!
//! Each vote has a choice, a confidence `q` (clamped to [0, 1]) and a weight
//! `w` (1, or ELO / 1500 in `weighted` mode). The agreeing share is
//! `Σ w·[choice ≠ disagree] / Σ w`; confidence is `Σ w·q·s / Σ w` with
//! `s` = 1 for agree, 0.75 for agree_with_modifications, 0 for disagree.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How a vote sides with the drafted consensus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VoteChoice {
    Agree,
    AgreeWithModifications,
    Disagree,
}

impl VoteChoice {
    pub fn agrees(self) -> bool {
        !matches!(self, VoteChoice::Disagree)
    }

    /// How much of the draft the vote backs, for the confidence.
    fn support(self) -> f64 {
        match self {
            VoteChoice::Agree => 1.0,
            VoteChoice::AgreeWithModifications => 0.75,
            VoteChoice::Disagree => 0.0,
        }
    }
}

/// How the votes decide (the v2 `consensus` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsensusMode {
    /// Agreeing share ≥ the threshold.
    #[default]
    Majority,
    /// Agreeing share ≥ max(threshold, 2/3).
    Supermajority,
    /// Every vote agrees (with or without modifications).
    Unanimous,
    /// The judge's vote decides; without a judge's vote, as `majority`.
    Judge,
    /// As `majority`, each vote weighted by the agent's ELO / 1500.
    Weighted,
}

impl ConsensusMode {
    /// Every mode, in the order documents list them.
    pub const ALL: [ConsensusMode; 5] = [
        Self::Majority,
        Self::Supermajority,
        Self::Unanimous,
        Self::Judge,
        Self::Weighted,
    ];

    /// The mode's name as stored and documented.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Majority => "majority",
            Self::Supermajority => "supermajority",
            Self::Unanimous => "unanimous",
            Self::Judge => "judge",
            Self::Weighted => "weighted",
        }
    }

    /// The mode named by `text`, in any case (and `unanimity`).
    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "majority" => Some(Self::Majority),
            "supermajority" => Some(Self::Supermajority),
            "unanimous" | "unanimity" => Some(Self::Unanimous),
            "judge" => Some(Self::Judge),
            "weighted" => Some(Self::Weighted),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsensusStatus {
    ConsensusReached,
    NoConsensus,
}

/// One agent's vote as counted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ballot {
    pub agent: String,
    pub choice: VoteChoice,
    pub confidence: f64,
    pub reasons: Vec<String>,
    pub modifications: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VotingSummary {
    pub agree: u32,
    pub agree_with_modifications: u32,
    pub disagree: u32,
}

/// What a plain one-agent-one-vote majority would have said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MajorityBaseline {
    pub status: ConsensusStatus,
    /// The most common choice (a tie goes to the more cautious choice).
    pub choice: VoteChoice,
    pub agreeing_share: f64,
}

/// The consensus of a completed debate and everything it was computed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsensusResult {
    pub status: ConsensusStatus,
    pub summary: String,
    pub confidence: f64,
    pub key_points: Vec<String>,
    pub disagreements: Vec<String>,
    pub voting_summary: VotingSummary,
    pub mode: ConsensusMode,
    /// The threshold the mode applied (1 for unanimous; none for a judge's decision).
    pub threshold: Option<f64>,
    pub agreeing_share: f64,
    /// The agent whose vote decided, in judge mode.
    pub judge: Option<String>,
    pub votes: Vec<Ballot>,
    /// The weight each vote carried.
    pub weights: BTreeMap<String, f64>,
    pub baseline: MajorityBaseline,
    /// Agents that failed during the debate; they did not vote.
    pub failed_agents: Vec<String>,
}

/// Everything a consensus is computed from.
#[derive(Debug, Clone, Copy)]
pub struct Tally<'a> {
    pub votes: &'a [Ballot],
    pub mode: ConsensusMode,
    pub threshold: f64,
    pub judge: Option<&'a str>,
    /// ELO per agent (missing agents count 1500); used by `weighted` only.
    pub ratings: &'a BTreeMap<String, f64>,
    pub summary: &'a str,
    pub key_points: &'a [String],
    pub failed_agents: &'a [String],
}

/// The ELO every agent starts from, and the unit weight of `weighted` mode.
pub const BASE_RATING: f64 = 1500.0;

/// Computes the consensus; total for any input (NaN or out-of-range numbers are clamped).
pub fn decide(tally: Tally<'_>) -> ConsensusResult {
    let votes: Vec<Ballot> = tally
        .votes
        .iter()
        .map(|ballot| Ballot {
            confidence: unit(ballot.confidence),
            ..ballot.clone()
        })
        .collect();
    let weights: BTreeMap<String, f64> = votes
        .iter()
        .map(|b| {
            (
                b.agent.clone(),
                weight(tally.mode, tally.ratings.get(&b.agent)),
            )
        })
        .collect();
    let weight_of = |b: &Ballot| weights.get(&b.agent).copied().unwrap_or(1.0);
    let total: f64 = votes.iter().map(weight_of).sum();
    let share = |f: &dyn Fn(&Ballot) -> f64| {
        if total > 0.0 {
            unit(votes.iter().map(|b| weight_of(b) * f(b)).sum::<f64>() / total)
        } else {
            0.0
        }
    };
    let agreeing_share = share(&|b| f64::from(u8::from(b.choice.agrees())));
    let confidence = share(&|b| b.confidence * b.choice.support());
    let threshold = unit(tally.threshold);
    let judge_vote = tally
        .judge
        .and_then(|judge| votes.iter().find(|b| b.agent == judge));
    let (reached, applied_threshold, judge) = match (tally.mode, judge_vote) {
        (ConsensusMode::Judge, Some(vote)) => {
            (vote.choice.agrees(), None, Some(vote.agent.clone()))
        }
        (ConsensusMode::Supermajority, _) => {
            let t = threshold.max(2.0 / 3.0);
            (meets(agreeing_share, t), Some(t), None)
        }
        (ConsensusMode::Unanimous, _) => (meets(agreeing_share, 1.0), Some(1.0), None),
        _ => (meets(agreeing_share, threshold), Some(threshold), None),
    };
    let reached = reached && !votes.is_empty();
    ConsensusResult {
        status: status(reached),
        summary: tally.summary.to_owned(),
        confidence,
        key_points: tally.key_points.to_vec(),
        disagreements: disagreements(&votes),
        voting_summary: count(&votes),
        mode: tally.mode,
        threshold: applied_threshold,
        agreeing_share,
        judge,
        baseline: baseline(&votes),
        votes,
        weights,
        failed_agents: tally.failed_agents.to_vec(),
    }
}

/// Clamps to [0, 1]; NaN counts as 0.
pub(crate) fn unit(x: f64) -> f64 {
    if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
}

fn meets(share: f64, threshold: f64) -> bool {
    share + 1e-9 >= threshold
}

fn status(reached: bool) -> ConsensusStatus {
    if reached {
        ConsensusStatus::ConsensusReached
    } else {
        ConsensusStatus::NoConsensus
    }
}

fn weight(mode: ConsensusMode, rating: Option<&f64>) -> f64 {
    match (mode, rating) {
        (ConsensusMode::Weighted, Some(&elo)) if elo.is_finite() => elo.max(1.0) / BASE_RATING,
        _ => 1.0,
    }
}

fn count(votes: &[Ballot]) -> VotingSummary {
    let mut summary = VotingSummary::default();
    for vote in votes {
        *match vote.choice {
            VoteChoice::Agree => &mut summary.agree,
            VoteChoice::AgreeWithModifications => &mut summary.agree_with_modifications,
            VoteChoice::Disagree => &mut summary.disagree,
        } += 1;
    }
    summary
}

/// Disagreements are the dissenters' reasons and the modifications asked for,
/// each attributed to its agent.
fn disagreements(votes: &[Ballot]) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for vote in votes {
        let items: &[String] = match vote.choice {
            VoteChoice::Disagree => &vote.reasons,
            VoteChoice::AgreeWithModifications => &vote.modifications,
            VoteChoice::Agree => continue,
        };
        if items.is_empty() && vote.choice == VoteChoice::Disagree {
            found.push(format!("{} disagrees with the summary", vote.agent));
        }
        for item in items {
            let line = format!("{}: {}", vote.agent, item.trim());
            if !found.contains(&line) {
                found.push(line);
            }
        }
    }
    found
}

fn baseline(votes: &[Ballot]) -> MajorityBaseline {
    let counts = count(votes);
    let agreeing = counts.agree + counts.agree_with_modifications;
    let n = votes.len() as f64;
    // Ties go to the more cautious choice: disagree, then modifications.
    let choice = [
        (counts.disagree, VoteChoice::Disagree),
        (
            counts.agree_with_modifications,
            VoteChoice::AgreeWithModifications,
        ),
        (counts.agree, VoteChoice::Agree),
    ]
    .into_iter()
    .fold((0, VoteChoice::Disagree), |best, next| {
        if next.0 > best.0 { next } else { best }
    })
    .1;
    MajorityBaseline {
        status: status(f64::from(agreeing) * 2.0 > n && !votes.is_empty()),
        choice,
        agreeing_share: if votes.is_empty() {
            0.0
        } else {
            f64::from(agreeing) / n
        },
    }
}
