//! How debates look over HTTP: the list item, the detail with every round
//! and message, and the consensus body of §2.1.

use agon_aggregates::debate::{
    Ballot, ConsensusResult, Debate, DebateStatus, MajorityBaseline, Message, VotingSummary,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// A debate in a listing.
#[derive(Debug, Serialize, ToSchema)]
pub struct DebateSummary {
    pub id: String,
    /// The same value as `id`.
    pub debate_id: String,
    pub topic: String,
    /// pending, running, paused, completed or failed.
    pub status: String,
    pub agents: Vec<String>,
    pub rounds: u32,
    /// The round and phase under way (none before the start and after the end).
    pub current_round: Option<u32>,
    pub current_phase: Option<String>,
    pub message_count: usize,
    /// `consensus_reached` or `no_consensus` once completed.
    pub consensus_status: Option<String>,
    pub confidence: Option<f64>,
    pub created_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    /// Why the debate failed.
    pub error: Option<String>,
}

impl From<&Debate> for DebateSummary {
    fn from(debate: &Debate) -> Self {
        let stage = match debate.status {
            DebateStatus::Running | DebateStatus::Paused => debate.current_stage(),
            _ => None,
        };
        let (current_round, current_phase) = match stage {
            Some(agon_aggregates::debate::Stage::Turns { round, phase }) => {
                (Some(round), Some(phase))
            }
            Some(agon_aggregates::debate::Stage::Synthesis) => {
                (Some(debate.last_round()), Some("synthesis".to_owned()))
            }
            Some(agon_aggregates::debate::Stage::Vote) => {
                (Some(debate.last_round()), Some("vote".to_owned()))
            }
            None => (None, None),
        };
        let consensus = debate.consensus.as_ref();
        Self {
            id: debate.id.clone(),
            debate_id: debate.id.clone(),
            topic: debate.topic.clone(),
            status: debate.status.as_str().to_owned(),
            agents: debate.agents.clone(),
            rounds: debate.last_round(),
            current_round,
            current_phase,
            message_count: debate.messages.len(),
            consensus_status: consensus.map(|c| status_name(c).to_owned()),
            confidence: consensus.map(|c| c.confidence),
            created_at: debate.created_at,
            started_at: debate.started_at,
            completed_at: debate.finished_at,
            error: debate.failure_reason.clone(),
        }
    }
}

fn status_name(result: &ConsensusResult) -> &'static str {
    match result.status {
        agon_aggregates::debate::ConsensusStatus::ConsensusReached => "consensus_reached",
        agon_aggregates::debate::ConsensusStatus::NoConsensus => "no_consensus",
    }
}

/// One agent contribution.
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageView {
    /// Position in the debate, from 0.
    pub index: usize,
    pub round: u32,
    pub phase: String,
    pub agent: String,
    pub content: String,
    /// The agents a critique answers.
    pub targets: Vec<String>,
    pub provider: String,
    pub model: String,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub latency_ms: u64,
    /// Answered by the OpenRouter fallback.
    pub fallback: bool,
    pub created_at: DateTime<Utc>,
}

impl MessageView {
    pub fn of(index: usize, message: &Message) -> Self {
        Self {
            index,
            round: message.round,
            phase: message.phase.clone(),
            agent: message.agent.clone(),
            content: message.content.clone(),
            targets: message.targets.clone(),
            provider: message.usage.provider.clone(),
            model: message.usage.model.clone(),
            tokens_in: message.usage.tokens_in,
            tokens_out: message.usage.tokens_out,
            latency_ms: message.usage.latency_ms,
            fallback: message.usage.fallback,
            created_at: message.at,
        }
    }
}

/// A debate with everything recorded about it.
#[derive(Debug, Serialize, ToSchema)]
pub struct DebateDetail {
    #[serde(flatten)]
    pub summary: DebateSummary,
    pub context: Option<String>,
    /// phases, rounds, consensus mode, consensus_threshold, judge.
    #[schema(value_type = Object)]
    pub protocol: Value,
    /// Every contribution in the order recorded; each names its round and phase.
    pub messages: Vec<MessageView>,
    /// Agents that failed: round, phase, agent, code, error.
    #[schema(value_type = Vec<Object>)]
    pub failures: Value,
    /// The drafted consensus: agent, summary, key_points.
    #[schema(value_type = Option<Object>)]
    pub synthesis: Option<Value>,
    /// The consensus body (as GET .../consensus) once completed.
    pub consensus: Option<ConsensusBody>,
    pub tokens_in: u64,
    pub tokens_out: u64,
}

impl From<&Debate> for DebateDetail {
    fn from(debate: &Debate) -> Self {
        let usages = debate
            .messages
            .iter()
            .map(|m| &m.usage)
            .chain(debate.synthesis.as_ref().map(|s| &s.usage));
        let (tokens_in, tokens_out) =
            usages.fold((0, 0), |(i, o), u| (i + u.tokens_in, o + u.tokens_out));
        let protocol = debate.protocol.as_ref().map_or(Value::Null, |p| {
            serde_json::json!({
                "phases": p.phases,
                "rounds": p.rounds,
                "consensus": p.consensus,
                "consensus_threshold": p.threshold,
                "judge": p.judge,
            })
        });
        Self {
            summary: DebateSummary::from(debate),
            context: debate.context.clone(),
            protocol,
            messages: debate
                .messages
                .iter()
                .enumerate()
                .map(|(i, m)| MessageView::of(i, m))
                .collect(),
            failures: serde_json::to_value(&debate.failures).unwrap_or(Value::Null),
            synthesis: debate.synthesis.as_ref().map(|s| {
                serde_json::json!({"agent": s.agent, "summary": s.summary, "key_points": s.key_points})
            }),
            consensus: ConsensusBody::of(debate),
            tokens_in,
            tokens_out,
        }
    }
}

/// The consensus text of §2.1.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConsensusText {
    pub summary: String,
    /// From 0 to 1, computed from the votes (README, "Consensus").
    pub confidence: f64,
    pub key_points: Vec<String>,
    pub disagreements: Vec<String>,
}

/// `GET /api/debates/{id}/consensus` of a completed debate: the §2.1 fields
/// plus what they were computed from.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConsensusBody {
    pub debate_id: String,
    /// `consensus_reached` or `no_consensus`.
    pub status: String,
    pub consensus: ConsensusText,
    #[schema(value_type = Object)]
    pub voting_summary: VotingSummary,
    /// majority, supermajority, unanimous, judge or weighted.
    pub mode: String,
    /// The agreeing share the mode required (none when a judge decided).
    pub threshold: Option<f64>,
    /// The (weighted) share of votes that agree, with or without modifications.
    pub agreeing_share: f64,
    pub judge: Option<String>,
    /// Each agent's vote.
    #[schema(value_type = Vec<Object>)]
    pub votes: Vec<Ballot>,
    /// What a plain one-agent-one-vote majority says.
    #[schema(value_type = Object)]
    pub baseline: MajorityBaseline,
    /// Agents that failed during the debate and did not vote.
    pub failed_agents: Vec<String>,
}

/// What the consensus endpoint reads of a debate document (the messages
/// are skipped, not built: clients poll this).
#[derive(Debug, Deserialize)]
pub struct DebateOutcome {
    pub id: String,
    pub status: DebateStatus,
    pub consensus: Option<ConsensusResult>,
    pub failure_reason: Option<String>,
    pub created_by: Option<String>,
    pub org_id: Option<String>,
}

impl ConsensusBody {
    /// The body of a completed debate; `None` before.
    pub fn of(debate: &Debate) -> Option<Self> {
        Self::completed(&debate.id, debate.status, debate.consensus.as_ref())
    }

    pub fn completed(
        id: &str,
        status: DebateStatus,
        result: Option<&ConsensusResult>,
    ) -> Option<Self> {
        let result = result?;
        if status != DebateStatus::Completed {
            return None;
        }
        Some(Self {
            debate_id: id.to_owned(),
            status: status_name(result).to_owned(),
            consensus: ConsensusText {
                summary: result.summary.clone(),
                confidence: result.confidence,
                key_points: result.key_points.clone(),
                disagreements: result.disagreements.clone(),
            },
            voting_summary: result.voting_summary,
            mode: serde_json::to_value(result.mode)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            threshold: result.threshold,
            agreeing_share: result.agreeing_share,
            judge: result.judge.clone(),
            votes: result.votes.clone(),
            baseline: result.baseline.clone(),
            failed_agents: result.failed_agents.clone(),
        })
    }
}
