//! What happened to a debate, one event per fact.

use chrono::{DateTime, Utc};
use cqrs_es::DomainEvent;
use serde::{Deserialize, Serialize};

use super::consensus::{ConsensusMode, ConsensusResult, VoteChoice};

/// How a debate runs: its phases, rounds and how consensus is decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Protocol {
    /// Phase names in order, e.g. opening, critique, revision, vote.
    pub phases: Vec<String>,
    pub rounds: u32,
    pub consensus: ConsensusMode,
    /// The agreeing share (0 to 1) that counts as consensus.
    pub threshold: f64,
    /// The agent whose vote decides in `judge` mode (the first agent when unset).
    pub judge: Option<String>,
}

/// Who answered an agent call and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub provider: String,
    pub model: String,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub latency_ms: u64,
    /// The answer came from the OpenRouter fallback.
    pub fallback: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DebateEvent {
    DebateCreated {
        debate_id: String,
        topic: String,
        context: Option<String>,
        agents: Vec<String>,
        protocol: Protocol,
        created_by: Option<String>,
        org_id: Option<String>,
        at: DateTime<Utc>,
    },
    DebateStarted {
        at: DateTime<Utc>,
    },
    /// One agent's contribution to one phase of one round.
    MessageRecorded {
        round: u32,
        phase: String,
        agent: String,
        content: String,
        /// The agents the message answers (a critique's targets).
        targets: Vec<String>,
        usage: Usage,
        at: DateTime<Utc>,
    },
    /// An agent could not answer; it takes no further part in the debate.
    AgentFailed {
        round: u32,
        phase: String,
        agent: String,
        /// A short machine-readable kind: timeout, rate_limited, http_status, ...
        code: String,
        error: String,
        at: DateTime<Utc>,
    },
    SynthesisDrafted {
        agent: String,
        summary: String,
        key_points: Vec<String>,
        usage: Usage,
        at: DateTime<Utc>,
    },
    VoteCast {
        agent: String,
        choice: VoteChoice,
        confidence: f64,
        reasons: Vec<String>,
        modifications: Vec<String>,
        usage: Usage,
        at: DateTime<Utc>,
    },
    ConsensusComputed {
        result: ConsensusResult,
        at: DateTime<Utc>,
    },
    DebateCompleted {
        at: DateTime<Utc>,
    },
    DebateFailed {
        reason: String,
        at: DateTime<Utc>,
    },
    CheckpointCreated {
        checkpoint_id: String,
        round: u32,
        phase: String,
        messages: u32,
        at: DateTime<Utc>,
    },
    DebatePaused {
        checkpoint_id: String,
        at: DateTime<Utc>,
    },
    DebateResumed {
        at: DateTime<Utc>,
    },
    /// The owner put the completed debate in the public gallery.
    DebatePublished {
        at: DateTime<Utc>,
    },
    /// The owner took the debate out of the public gallery.
    DebateUnpublished {
        at: DateTime<Utc>,
    },
}

impl DomainEvent for DebateEvent {
    fn event_type(&self) -> String {
        match self {
            DebateEvent::DebateCreated { .. } => "DebateCreated",
            DebateEvent::DebateStarted { .. } => "DebateStarted",
            DebateEvent::MessageRecorded { .. } => "MessageRecorded",
            DebateEvent::AgentFailed { .. } => "AgentFailed",
            DebateEvent::SynthesisDrafted { .. } => "SynthesisDrafted",
            DebateEvent::VoteCast { .. } => "VoteCast",
            DebateEvent::ConsensusComputed { .. } => "ConsensusComputed",
            DebateEvent::DebateCompleted { .. } => "DebateCompleted",
            DebateEvent::DebateFailed { .. } => "DebateFailed",
            DebateEvent::CheckpointCreated { .. } => "CheckpointCreated",
            DebateEvent::DebatePaused { .. } => "DebatePaused",
            DebateEvent::DebateResumed { .. } => "DebateResumed",
            DebateEvent::DebatePublished { .. } => "DebatePublished",
            DebateEvent::DebateUnpublished { .. } => "DebateUnpublished",
        }
        .to_owned()
    }

    /// The version the upcasters bring stored events of this type to.
    fn event_version(&self) -> String {
        crate::wire::current_version(
            <crate::debate::Debate as cqrs_es::Aggregate>::TYPE,
            &self.event_type(),
        )
    }
}
