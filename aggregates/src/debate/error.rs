//! Why a debate refused a command.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DebateError {
    #[error("debate already exists")]
    AlreadyExists,
    #[error("debate not found")]
    NotFound,
    #[error("invalid debate: {0}")]
    Invalid(String),
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
