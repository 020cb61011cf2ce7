//! The Debate aggregate: a topic, its agents and protocol, every agent
//! contribution round by round, the synthesis, the votes and the consensus.
//!
//! The aggregate also knows what a debate needs next ([`Debate::next`]), so
//! that the runner, a process manager, keeps no state of its own: whatever
//! replica loads a debate's stream can continue it.

mod aggregate;
mod commands;
pub mod consensus;
mod error;
mod events;
mod plan;
pub mod rules;
mod state;
#[cfg(test)]
mod tests;

pub use commands::{DebateCommand, Outcome, Step};
pub use consensus::{
    Ballot, ConsensusMode, ConsensusResult, ConsensusStatus, MajorityBaseline, VoteChoice,
    VotingSummary,
};
pub use error::DebateError;
pub use events::{DebateEvent, Protocol, Usage};
pub use plan::{Next, Stage};
pub use rules::Limits;
pub use state::{AgentFailure, Debate, DebateStatus, Message, Synthesis};

/// Phases a protocol runs when it names none.
pub const DEFAULT_PHASES: [&str; 4] = ["opening", "critique", "revision", "vote"];
/// Rounds a debate runs when it names none.
pub const DEFAULT_ROUNDS: u32 = 3;
/// Fewest agents a debate seats: one agent has no one to debate.
pub const MIN_AGENTS: usize = 2;
/// The agreeing share that reaches consensus when the protocol names none.
pub const DEFAULT_THRESHOLD: f64 = 0.6;
