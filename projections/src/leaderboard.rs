//! Agent ratings (ELO from 1500, K = 32) kept from completed debates, for
//! `GET /api/leaderboard` and the `weighted` consensus mode.
//!
//! A completed debate is a round-robin among its agents. Each agent scores
//! how well its vote matched the outcome: with consensus reached, agree 1,
//! agree_with_modifications 0.5, disagree 0; without, the reverse; an agent
//! that failed scores 0. Every pair plays one game decided by those scores
//! (higher wins, equal draws), and each agent's change is its summed
//! `K·(S − E)` divided by the number of opponents, so one debate moves a
//! rating by at most K.
//!
//! Agents are rated under their lower-case names ([`canonical`]), so
//! `Claude` and `claude` share one rating whatever spelling a debate used.

use std::collections::BTreeMap;

use agon_aggregates::debate::{ConsensusResult, ConsensusStatus, DebateEvent, VoteChoice};
use serde::{Deserialize, Serialize};

use crate::debates::DEBATE_AGGREGATE;
use crate::{DecodeError, EventRecord, Projection};

/// Every agent's starting rating.
pub const START_RATING: f64 = 1500.0;
/// The ELO K-factor.
pub const K_FACTOR: f64 = 32.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rating {
    pub elo: f64,
    pub debates: u64,
    pub wins: u64,
    pub losses: u64,
    pub draws: u64,
    /// Debates in which the agent failed.
    pub failures: u64,
}

impl Default for Rating {
    fn default() -> Self {
        Self {
            elo: START_RATING,
            debates: 0,
            wins: 0,
            losses: 0,
            draws: 0,
            failures: 0,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LeaderboardView {
    pub agents: BTreeMap<String, Rating>,
}

impl LeaderboardView {
    /// Agents by rating, best first (ties by name).
    pub fn ranked(&self) -> Vec<(&String, &Rating)> {
        let mut ranked: Vec<_> = self.agents.iter().collect();
        ranked.sort_by(|a, b| b.1.elo.total_cmp(&a.1.elo).then_with(|| a.0.cmp(b.0)));
        ranked
    }

    /// Each agent's rating (the start rating for unknown agents), keyed by
    /// the names as given.
    pub fn ratings(&self, agents: &[String]) -> BTreeMap<String, f64> {
        agents
            .iter()
            .map(|a| {
                (
                    a.clone(),
                    self.agents
                        .get(&canonical(a))
                        .map_or(START_RATING, |r| r.elo),
                )
            })
            .collect()
    }
}

/// The name an agent is rated under: trimmed and lower case.
pub fn canonical(agent: &str) -> String {
    agent.trim().to_lowercase()
}

pub struct Leaderboard;

impl Projection for Leaderboard {
    const NAME: &'static str = "leaderboard";
    type View = LeaderboardView;

    fn relevant(event: &EventRecord) -> bool {
        event.aggregate_type == DEBATE_AGGREGATE && event.event_type == "ConsensusComputed"
    }

    fn apply(view: &mut LeaderboardView, event: &EventRecord) -> Result<(), DecodeError> {
        if !Self::relevant(event) {
            return Ok(());
        }
        if let DebateEvent::ConsensusComputed { result, .. } = event.decode()? {
            rate(view, &result);
        }
        Ok(())
    }
}

fn score(result: &ConsensusResult, choice: VoteChoice) -> f64 {
    let reached = result.status == ConsensusStatus::ConsensusReached;
    match (choice, reached) {
        (VoteChoice::AgreeWithModifications, _) => 0.5,
        (VoteChoice::Agree, true) | (VoteChoice::Disagree, false) => 1.0,
        _ => 0.0,
    }
}

fn rate(view: &mut LeaderboardView, result: &ConsensusResult) {
    let mut players: Vec<(String, f64)> = result
        .votes
        .iter()
        .map(|v| (canonical(&v.agent), score(result, v.choice)))
        .collect();
    let failed: Vec<String> = result.failed_agents.iter().map(|a| canonical(a)).collect();
    for failed in &failed {
        if !players.iter().any(|(a, _)| a == failed) {
            players.push((failed.clone(), 0.0));
        }
    }
    let before: Vec<f64> = players
        .iter()
        .map(|(a, _)| view.agents.get(a).map_or(START_RATING, |r| r.elo))
        .collect();
    let opponents = players.len().saturating_sub(1).max(1) as f64;
    for (i, (agent, mine)) in players.iter().enumerate() {
        let rating = view.agents.entry(agent.clone()).or_default();
        rating.debates += 1;
        if failed.contains(agent) {
            rating.failures += 1;
        }
        let mut change = 0.0;
        for (j, (_, theirs)) in players.iter().enumerate() {
            if i == j {
                continue;
            }
            let expected = 1.0 / (1.0 + 10f64.powf((before[j] - before[i]) / 400.0));
            let actual = if mine > theirs {
                rating.wins += 1;
                1.0
            } else if mine < theirs {
                rating.losses += 1;
                0.0
            } else {
                rating.draws += 1;
                0.5
            };
            change += K_FACTOR * (actual - expected);
        }
        rating.elo = before[i] + change / opponents;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use agon_aggregates::debate::consensus::{Tally, decide};
    use agon_aggregates::debate::{Ballot, ConsensusMode};
    use serde_json::json;

    use super::*;
    use crate::Cursor;

    fn ballot(agent: &str, choice: VoteChoice) -> Ballot {
        Ballot {
            agent: agent.to_owned(),
            choice,
            confidence: 0.8,
            reasons: vec!["because".to_owned()],
            modifications: Vec::new(),
        }
    }

    fn computed(votes: &[Ballot], failed: &[String]) -> EventRecord {
        let result = decide(Tally {
            votes,
            mode: ConsensusMode::Majority,
            threshold: 0.6,
            judge: None,
            ratings: &BTreeMap::new(),
            summary: "s",
            key_points: &[],
            failed_agents: failed,
        });
        let event = DebateEvent::ConsensusComputed {
            result,
            at: chrono::DateTime::UNIX_EPOCH,
        };
        EventRecord {
            cursor: Cursor::START,
            event_id: "e".to_owned(),
            aggregate_type: DEBATE_AGGREGATE.to_owned(),
            aggregate_id: "d".to_owned(),
            sequence: 9,
            event_type: "ConsensusComputed".to_owned(),
            event_version: "1".to_owned(),
            payload: serde_json::to_value(&event).unwrap_or(json!({})),
            metadata: json!({}),
            hash: String::new(),
        }
    }

    #[test]
    fn agreeing_with_a_reached_consensus_wins_and_ratings_keep_their_sum() {
        let mut view = LeaderboardView::default();
        let votes = [
            ballot("a", VoteChoice::Agree),
            ballot("b", VoteChoice::AgreeWithModifications),
            ballot("c", VoteChoice::Disagree),
        ];
        Leaderboard::apply(&mut view, &computed(&votes, &[])).unwrap_or_else(|e| panic!("{e}"));
        let elo = |name: &str| view.agents[name].elo;
        assert!(elo("a") > elo("b") && elo("b") > elo("c"));
        assert!((elo("a") + elo("b") + elo("c") - 3.0 * START_RATING).abs() < 1e-9);
        assert!(elo("a") - START_RATING <= K_FACTOR);
        assert_eq!(view.agents["a"].wins, 2);
        assert_eq!(view.agents["c"].losses, 2);
        assert_eq!(view.ranked()[0].0, "a");
    }

    #[test]
    fn a_failed_agent_loses_and_other_events_change_nothing() {
        let mut view = LeaderboardView::default();
        let votes = [
            ballot("a", VoteChoice::Agree),
            ballot("b", VoteChoice::Agree),
        ];
        Leaderboard::apply(&mut view, &computed(&votes, &["z".to_owned()]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(view.agents["z"].failures, 1);
        assert!(view.agents["z"].elo < START_RATING);
        let before = view.clone();
        let mut other = computed(&votes, &[]);
        other.event_type = "DebateCompleted".to_owned();
        Leaderboard::apply(&mut view, &other).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(view, before);
        assert_eq!(
            view.ratings(&["a".to_owned(), "new".to_owned()])["new"],
            START_RATING
        );
    }

    #[test]
    fn names_that_differ_only_in_case_share_one_rating() {
        let mut view = LeaderboardView::default();
        let first = [
            ballot("Claude", VoteChoice::Agree),
            ballot("gpt", VoteChoice::Disagree),
        ];
        Leaderboard::apply(&mut view, &computed(&first, &[])).unwrap_or_else(|e| panic!("{e}"));
        let second = [
            ballot("claude", VoteChoice::Agree),
            ballot("GPT", VoteChoice::Disagree),
        ];
        Leaderboard::apply(&mut view, &computed(&second, &["CLAUDE ".to_owned()]))
            .unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&String> = view.agents.keys().collect();
        assert_eq!(names, ["claude", "gpt"]);
        assert_eq!(view.agents["claude"].debates, 2);
        assert_eq!(view.agents["claude"].failures, 1);
        let ratings = view.ratings(&["Claude".to_owned()]);
        assert_eq!(ratings["Claude"], view.agents["claude"].elo);
    }
}
