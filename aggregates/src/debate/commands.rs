//! What may be asked of a debate. Times and ids arrive in the command.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::consensus::VoteChoice;
use super::events::{Protocol, Usage};
use super::rules::Limits;

/// One agent's slot in one phase of one round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub round: u32,
    pub phase: String,
    pub agent: String,
}

/// The result of one agent call, as the runner reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Message {
        step: Step,
        content: String,
        targets: Vec<String>,
        usage: Usage,
    },
    Synthesis {
        agent: String,
        summary: String,
        key_points: Vec<String>,
        usage: Usage,
    },
    Vote {
        agent: String,
        choice: VoteChoice,
        confidence: f64,
        reasons: Vec<String>,
        modifications: Vec<String>,
        usage: Usage,
    },
    /// The call failed (after retries and fallback); the agent drops out.
    Failure {
        step: Step,
        code: String,
        error: String,
    },
}

// A command lives for one decision and is never kept in bulk, so its largest
// variant's size costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum DebateCommand {
    Create {
        debate_id: String,
        topic: String,
        context: Option<String>,
        agents: Vec<String>,
        protocol: Protocol,
        /// The deployment's limits the panel and protocol must meet.
        limits: Limits,
        created_by: Option<String>,
        org_id: Option<String>,
        at: DateTime<Utc>,
    },
    /// A runner takes the debate from `pending` to `running`.
    Start {
        at: DateTime<Utc>,
    },
    /// Records finished agent calls of the current stage, in the order they finished.
    Record {
        outcomes: Vec<Outcome>,
        at: DateTime<Utc>,
    },
    /// Computes the consensus from the votes and completes the debate.
    /// `weights` are the agents' ELO ratings (used by `weighted` mode).
    Conclude {
        weights: BTreeMap<String, f64>,
        at: DateTime<Utc>,
    },
    Fail {
        reason: String,
        at: DateTime<Utc>,
    },
    Checkpoint {
        checkpoint_id: String,
        at: DateTime<Utc>,
    },
    /// Checkpoints and pauses a running debate.
    Pause {
        checkpoint_id: String,
        at: DateTime<Utc>,
    },
    Resume {
        at: DateTime<Utc>,
    },
    /// Puts a completed debate in the public gallery (again: no change).
    Publish {
        at: DateTime<Utc>,
    },
    /// Takes a debate out of the public gallery (when not in it: no change).
    Unpublish {
        at: DateTime<Utc>,
    },
}
