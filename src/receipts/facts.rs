//! What a receipt says about its debate, folded from the debate's events
//! alone, so that a verifier holding the same events derives the same bytes.

use std::collections::BTreeMap;

use agon_aggregates::debate::{Debate, DebateEvent, DebateStatus, Usage};
use serde::Serialize;

use crate::views::debates::ConsensusBody;

/// Our part of a receipt: the debate as its events state it.
#[derive(Debug, Serialize)]
pub struct Facts {
    pub debate_id: String,
    pub topic: String,
    /// `completed` or `failed`.
    pub status: String,
    pub created_by: Option<String>,
    pub participants: Vec<Participant>,
    /// The consensus with every vote and the majority-vote baseline; `None`
    /// when the debate failed before one was computed.
    pub consensus: Option<ConsensusBody>,
    /// The weight each vote carried.
    pub weights: BTreeMap<String, f64>,
    pub synthesis: Option<SynthesisFact>,
    pub failures: Vec<FailureFact>,
    pub failure_reason: Option<String>,
    pub timings: Timings,
    pub costs: Costs,
}

/// An agent of the debate and who answered for it.
#[derive(Debug, Clone, Serialize)]
pub struct Participant {
    pub agent: String,
    /// The provider of its first answer; `None` when it never answered.
    pub provider: Option<String>,
    /// The model of its first answer; `None` when it never answered.
    pub model: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SynthesisFact {
    pub agent: String,
    pub summary: String,
    pub key_points: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FailureFact {
    pub agent: String,
    pub round: u32,
    pub phase: String,
    pub code: String,
    pub error: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Timings {
    pub created_at: Option<String>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// From start (or creation) to the end, in milliseconds.
    pub duration_ms: Option<i64>,
}

/// What the agent calls cost, summed over every recorded answer.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Costs {
    pub calls: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub agent_latency_ms: u64,
    pub fallback_calls: u64,
    pub per_agent: BTreeMap<String, AgentCost>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct AgentCost {
    pub calls: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
}

impl Costs {
    fn add(&mut self, agent: &str, usage: &Usage) {
        self.calls += 1;
        self.tokens_in += usage.tokens_in;
        self.tokens_out += usage.tokens_out;
        self.agent_latency_ms += usage.latency_ms;
        self.fallback_calls += u64::from(usage.fallback);
        let mine = self.per_agent.entry(agent.to_owned()).or_default();
        mine.calls += 1;
        mine.tokens_in += usage.tokens_in;
        mine.tokens_out += usage.tokens_out;
    }
}

/// The facts of a finished debate from its events in order; `None` when the
/// events do not end it (a receipt is issued only for a finished debate).
pub fn fold(events: &[DebateEvent]) -> Option<Facts> {
    let mut debate = Debate::default();
    let mut costs = Costs::default();
    let mut first_usage: BTreeMap<String, Usage> = BTreeMap::new();
    for event in events {
        let answered = match event {
            DebateEvent::MessageRecorded { agent, usage, .. }
            | DebateEvent::SynthesisDrafted { agent, usage, .. }
            | DebateEvent::VoteCast { agent, usage, .. } => Some((agent, usage)),
            _ => None,
        };
        if let Some((agent, usage)) = answered {
            costs.add(agent, usage);
            first_usage
                .entry(agent.clone())
                .or_insert_with(|| usage.clone());
        }
        debate.apply_event(event.clone());
    }
    if !debate.status.is_finished() {
        return None;
    }
    let stamp = |at: Option<chrono::DateTime<chrono::Utc>>| {
        at.map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
    };
    let begun = debate.started_at.or(debate.created_at);
    let duration_ms = begun
        .zip(debate.finished_at)
        .map(|(from, to)| (to - from).num_milliseconds());
    Some(Facts {
        participants: debate
            .agents
            .iter()
            .map(|agent| Participant {
                agent: agent.clone(),
                provider: first_usage.get(agent).map(|u| u.provider.clone()),
                model: first_usage.get(agent).map(|u| u.model.clone()),
            })
            .collect(),
        consensus: ConsensusBody::completed(
            &debate.id,
            DebateStatus::Completed,
            debate.consensus.as_ref(),
        ),
        weights: debate
            .consensus
            .as_ref()
            .map(|c| c.weights.clone())
            .unwrap_or_default(),
        synthesis: debate.synthesis.as_ref().map(|s| SynthesisFact {
            agent: s.agent.clone(),
            summary: s.summary.clone(),
            key_points: s.key_points.clone(),
        }),
        failures: debate
            .failures
            .iter()
            .map(|f| FailureFact {
                agent: f.agent.clone(),
                round: f.round,
                phase: f.phase.clone(),
                code: f.code.clone(),
                error: f.error.clone(),
            })
            .collect(),
        failure_reason: debate.failure_reason.clone(),
        timings: Timings {
            created_at: stamp(debate.created_at),
            started_at: stamp(debate.started_at),
            finished_at: stamp(debate.finished_at),
            duration_ms,
        },
        costs,
        status: debate.status.as_str().to_owned(),
        created_by: debate.created_by,
        topic: debate.topic,
        debate_id: debate.id,
    })
}
