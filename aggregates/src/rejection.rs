//! How a refusal reads to a caller, whatever the face: each aggregate error
//! says what kind of refusal it is and names its rule with a stable code,
//! so that one mapping (in the HTTP layer) turns every aggregate's
//! refusals into the spec's error forms.

/// The kinds of refusal a caller can act on differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectionKind {
    /// The command breaks a rule of its own values.
    Invalid,
    /// The thing the command is about does not exist.
    NotFound,
    /// The thing's current state does not allow the command.
    Conflict,
    /// The actor may not do this.
    Forbidden,
    /// The thing is locked for a while.
    Locked,
}

/// An aggregate's refusal, classified.
pub trait Rejection: std::error::Error {
    fn kind(&self) -> RejectionKind;
    /// The rule broken, as a stable upper-case code (`DUPLICATE_AGENT`).
    fn code(&self) -> &'static str;
}
