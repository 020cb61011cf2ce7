//! How debates look over HTTP: the list item, the detail with every round
//! and message, and the consensus body of §2.1. The field names the
//! upstream SDK's typed models read (`rounds` as a list of rounds,
//! `max_rounds`, `final_answer`, `reached`) sit beside the spec's own.

use std::collections::BTreeMap;

use agon_aggregates::debate::{
    Ballot, ConsensusResult, ConsensusStatus, Debate, DebateStatus, MajorityBaseline, Message,
    VoteChoice, VotingSummary,
};
use agon_projections::debate_list::{ListItem, consensus_name};
use chrono::{DateTime, Utc};
use serde::Serialize;
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
    /// The rounds the debate runs (the `rounds` or `max_rounds` it was created with).
    pub max_rounds: u32,
    /// Rounds every active agent has finished; `max_rounds` once completed.
    pub rounds_completed: u32,
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
    /// The list item the `debates` projection stores in its `debate_list` table, field for field.
    fn from(debate: &Debate) -> Self {
        let item = ListItem::of(debate);
        Self {
            id: item.id,
            debate_id: item.debate_id,
            topic: item.topic,
            status: item.status,
            agents: item.agents,
            max_rounds: item.max_rounds,
            rounds_completed: item.rounds_completed,
            current_round: item.current_round,
            current_phase: item.current_phase,
            message_count: item.message_count,
            consensus_status: item.consensus_status,
            confidence: item.confidence,
            created_at: item.created_at,
            started_at: item.started_at,
            completed_at: item.completed_at,
            error: item.error,
        }
    }
}

/// One agent contribution.
#[derive(Debug, Clone, Serialize, ToSchema)]
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

/// The messages of one round, in the order recorded.
#[derive(Debug, Serialize, ToSchema)]
pub struct RoundView {
    /// From 1.
    pub round_number: u32,
    /// Each exactly as `GET /api/debates/{id}/messages` gives it.
    pub messages: Vec<MessageView>,
}

impl RoundView {
    /// The rounds that hold a message, in round order.
    fn all(messages: &[MessageView]) -> Vec<Self> {
        let mut rounds: BTreeMap<u32, Vec<MessageView>> = BTreeMap::new();
        for message in messages {
            rounds
                .entry(message.round)
                .or_default()
                .push(message.clone());
        }
        rounds
            .into_iter()
            .map(|(round_number, messages)| Self {
                round_number,
                messages,
            })
            .collect()
    }
}

/// A debate with everything recorded about it.
#[derive(Debug, Serialize, ToSchema)]
pub struct DebateDetail {
    #[serde(flatten)]
    pub summary: DebateSummary,
    /// The consensus summary; null until there is a consensus.
    pub final_answer: Option<String>,
    /// Every round that holds a message, with its messages (the same ones
    /// as `messages`, grouped).
    pub rounds: Vec<RoundView>,
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
        let messages: Vec<MessageView> = debate
            .messages
            .iter()
            .enumerate()
            .map(|(i, m)| MessageView::of(i, m))
            .collect();
        let consensus = ConsensusBody::of(debate);
        Self {
            summary: DebateSummary::from(debate),
            final_answer: consensus.as_ref().map(|c| c.final_answer.clone()),
            rounds: RoundView::all(&messages),
            context: debate.context.clone(),
            protocol,
            messages,
            failures: serde_json::to_value(&debate.failures).unwrap_or(Value::Null),
            synthesis: debate.synthesis.as_ref().map(|s| {
                serde_json::json!({"agent": s.agent, "summary": s.summary, "key_points": s.key_points})
            }),
            consensus,
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
    /// Whether `status` is `consensus_reached`.
    pub reached: bool,
    /// As `consensus.confidence`.
    pub confidence: f64,
    /// As `consensus.summary`.
    pub final_answer: String,
    /// Agents that voted agree or agree_with_modifications, in vote order.
    pub supporting_agents: Vec<String>,
    /// Agents that voted disagree, in vote order.
    pub dissenting_agents: Vec<String>,
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
        let voters = |agrees: bool| -> Vec<String> {
            result
                .votes
                .iter()
                .filter(|ballot| VoteChoice::agrees(ballot.choice) == agrees)
                .map(|ballot| ballot.agent.clone())
                .collect()
        };
        Some(Self {
            debate_id: id.to_owned(),
            status: consensus_name(result.status).to_owned(),
            reached: result.status == ConsensusStatus::ConsensusReached,
            confidence: result.confidence,
            final_answer: result.summary.clone(),
            supporting_agents: voters(true),
            dissenting_agents: voters(false),
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

#[cfg(test)]
mod tests {
    use agon_aggregates::debate::{ConsensusMode, DebateEvent, Protocol, Usage};
    use chrono::Utc;

    use super::*;

    const AGENTS: [&str; 2] = ["demo-a", "demo-b"];

    /// A started debate of `rounds` rounds (phases opening, critique) between
    /// [`AGENTS`].
    fn started(rounds: u32) -> Debate {
        let mut debate = Debate::default();
        debate.apply_event(DebateEvent::DebateCreated {
            debate_id: "d".to_owned(),
            topic: "t".to_owned(),
            context: None,
            agents: AGENTS.map(str::to_owned).to_vec(),
            protocol: Protocol {
                phases: vec!["opening".to_owned(), "critique".to_owned()],
                rounds,
                consensus: ConsensusMode::Majority,
                threshold: 0.6,
                judge: None,
            },
            created_by: None,
            org_id: None,
            at: Utc::now(),
        });
        debate.apply_event(DebateEvent::DebateStarted { at: Utc::now() });
        debate
    }

    fn say(debate: &mut Debate, round: u32, phase: &str, agent: &str) {
        debate.apply_event(DebateEvent::MessageRecorded {
            round,
            phase: phase.to_owned(),
            agent: agent.to_owned(),
            content: format!("{agent} in {round} {phase}"),
            targets: Vec::new(),
            usage: Usage {
                provider: "demo".to_owned(),
                model: "demo".to_owned(),
                tokens_in: 1,
                tokens_out: 1,
                latency_ms: 0,
                fallback: false,
            },
            at: Utc::now(),
        });
    }

    fn rounds_completed(debate: &Debate) -> u32 {
        DebateSummary::from(debate).rounds_completed
    }

    #[test]
    fn the_summary_serializes_as_the_stored_list_item() {
        let mut debate = started(2);
        say(&mut debate, 1, "opening", "demo-a");
        assert_eq!(
            serde_json::to_value(DebateSummary::from(&debate)).ok(),
            serde_json::to_value(ListItem::of(&debate)).ok()
        );
    }

    #[test]
    fn a_round_is_completed_once_every_active_agent_took_each_turn() {
        let mut debate = started(3);
        assert_eq!(rounds_completed(&debate), 0);
        for phase in ["opening", "critique"] {
            say(&mut debate, 1, phase, "demo-a");
        }
        say(&mut debate, 1, "opening", "demo-b");
        assert_eq!(rounds_completed(&debate), 0, "demo-b owes its critique");
        say(&mut debate, 1, "critique", "demo-b");
        assert_eq!(rounds_completed(&debate), 1);
        say(&mut debate, 2, "critique", "demo-a");
        debate.apply_event(DebateEvent::AgentFailed {
            round: 2,
            phase: "critique".to_owned(),
            agent: "demo-b".to_owned(),
            code: "timeout".to_owned(),
            error: "no answer".to_owned(),
            at: Utc::now(),
        });
        assert_eq!(rounds_completed(&debate), 2, "a failed agent owes nothing");
        let summary = DebateSummary::from(&debate);
        assert_eq!((summary.max_rounds, summary.rounds_completed), (3, 2));
    }

    #[test]
    fn rounds_group_the_messages_in_round_order() {
        let mut debate = started(2);
        for (round, phase, agent) in [
            (1, "opening", "demo-b"),
            (1, "opening", "demo-a"),
            (1, "critique", "demo-a"),
            (2, "critique", "demo-b"),
        ] {
            say(&mut debate, round, phase, agent);
        }
        let detail = DebateDetail::from(&debate);
        let shape: Vec<(u32, Vec<usize>)> = detail
            .rounds
            .iter()
            .map(|r| (r.round_number, r.messages.iter().map(|m| m.index).collect()))
            .collect();
        assert_eq!(shape, [(1, vec![0, 1, 2]), (2, vec![3])]);
        assert_eq!(detail.final_answer, None);
    }
}
