//! Why a debate refused a command: each broken rule by name.

use thiserror::Error;

use crate::rejection::{Rejection, RejectionKind};

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DebateError {
    #[error("debate already exists")]
    AlreadyExists,
    #[error("debate not found")]
    NotFound,
    #[error("invalid debate: topic is empty")]
    EmptyTopic,
    #[error("invalid debate: topic is longer than {max} characters")]
    TopicTooLong { max: usize },
    #[error("invalid debate: a debate needs between {min} and {max} agents, and its judge")]
    SeatCount {
        min: usize,
        max: usize,
        seats: usize,
    },
    #[error("invalid debate: agent names must not be empty")]
    EmptyAgentName,
    #[error("invalid debate: agent {name} is listed twice")]
    DuplicateAgent { name: String, earlier: String },
    #[error("invalid debate: rounds must be between 1 and {max}")]
    RoundsOutOfRange { max: u32 },
    #[error("invalid debate: consensus_threshold must be between 0 and 1")]
    ThresholdOutOfRange,
    #[error("invalid debate: a protocol names 1 to {max} phases")]
    PhaseCount { max: usize },
    #[error("invalid debate: phase names must not be empty")]
    EmptyPhase,
    #[error("invalid debate: {name:?} is not a phase name")]
    MalformedPhase { name: String, max: usize },
    #[error("invalid debate: phase {name} is listed twice")]
    DuplicatePhase { name: String },
    #[error("invalid debate: judge {name} is not one of the agents")]
    JudgeNotSeated { name: String },
    #[error("debate is {status}; cannot {action}")]
    WrongStatus {
        status: &'static str,
        action: &'static str,
    },
    #[error("{0} is not expected now (already recorded, out of order, or not a debating agent)")]
    Unexpected(String),
    #[error("votes are still missing")]
    VotesMissing,
}

impl DebateError {
    /// The request field a rule of a new debate is about.
    pub fn field(&self) -> Option<&'static str> {
        use DebateError as E;
        Some(match self {
            E::EmptyTopic | E::TopicTooLong { .. } => "topic",
            E::SeatCount { .. } | E::EmptyAgentName | E::DuplicateAgent { .. } => "agents",
            E::RoundsOutOfRange { .. } => "rounds",
            E::ThresholdOutOfRange => "protocol.consensus_threshold",
            E::PhaseCount { .. }
            | E::EmptyPhase
            | E::MalformedPhase { .. }
            | E::DuplicatePhase { .. } => "protocol.phases",
            E::JudgeNotSeated { .. } => "judge",
            _ => return None,
        })
    }

    /// What a caller reads after the field name: why the value broke the rule.
    pub fn reason(&self) -> String {
        use DebateError as E;
        match self {
            E::EmptyTopic => "must not be empty".to_owned(),
            E::TopicTooLong { max } => format!("must be at most {max} characters"),
            E::SeatCount { min, max, seats } => {
                format!("a debate seats {min} to {max} agents, not {seats}")
            }
            E::EmptyAgentName => "agent names must not be empty".to_owned(),
            E::DuplicateAgent { name, earlier } => {
                format!("agent {name} is listed twice (as {earlier}; names ignore case)")
            }
            E::RoundsOutOfRange { max } => format!("must be between 1 and {max}"),
            E::ThresholdOutOfRange => "must be between 0 and 1".to_owned(),
            E::PhaseCount { max } => format!("must name 1 to {max} phases"),
            E::EmptyPhase => "phase names must not be empty".to_owned(),
            E::MalformedPhase { name, max } => format!(
                "{name:?} is not a phase name (lower-case letters, digits, - and _, up to {max})"
            ),
            E::DuplicatePhase { name } => format!("phase {name} is listed twice"),
            E::JudgeNotSeated { name } => format!("judge {name} is not one of the agents"),
            other => other.to_string(),
        }
    }
}

impl Rejection for DebateError {
    fn kind(&self) -> RejectionKind {
        use DebateError as E;
        match self {
            E::NotFound => RejectionKind::NotFound,
            E::AlreadyExists | E::WrongStatus { .. } | E::Unexpected(_) | E::VotesMissing => {
                RejectionKind::Conflict
            }
            _ => RejectionKind::Invalid,
        }
    }

    fn code(&self) -> &'static str {
        use DebateError as E;
        match self {
            E::AlreadyExists => "DEBATE_EXISTS",
            E::NotFound => "DEBATE_NOT_FOUND",
            E::EmptyTopic => "EMPTY_TOPIC",
            E::TopicTooLong { .. } => "TOPIC_TOO_LONG",
            E::SeatCount { .. } => "SEAT_COUNT",
            E::EmptyAgentName => "EMPTY_AGENT_NAME",
            E::DuplicateAgent { .. } => "DUPLICATE_AGENT",
            E::RoundsOutOfRange { .. } => "ROUNDS_OUT_OF_RANGE",
            E::ThresholdOutOfRange => "THRESHOLD_OUT_OF_RANGE",
            E::PhaseCount { .. } => "PHASE_COUNT",
            E::EmptyPhase => "EMPTY_PHASE",
            E::MalformedPhase { .. } => "MALFORMED_PHASE",
            E::DuplicatePhase { .. } => "DUPLICATE_PHASE",
            E::JudgeNotSeated { .. } => "JUDGE_NOT_SEATED",
            E::WrongStatus { .. } => "WRONG_STATUS",
            E::Unexpected(_) => "UNEXPECTED_CONTRIBUTION",
            E::VotesMissing => "VOTES_MISSING",
        }
    }
}
