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

/// A refusal as a value: what any face needs to answer it, detached from
/// the aggregate's error type (so services can carry it in their own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub kind: RejectionKind,
    pub rule: &'static str,
    /// The aggregate's words for it.
    pub message: String,
}

impl Refusal {
    pub fn of(rejection: &dyn Rejection) -> Self {
        Self {
            kind: rejection.kind(),
            rule: rejection.code(),
            message: rejection.to_string(),
        }
    }
}

/// `impl Rejection` from a table of patterns: `Self::Variant => Kind, "CODE"`.
#[macro_export]
macro_rules! rejections {
    ($error:ty { $($pattern:pat => $kind:ident, $code:literal),* $(,)? }) => {
        impl $crate::rejection::Rejection for $error {
            fn kind(&self) -> $crate::rejection::RejectionKind {
                match self {
                    $($pattern => $crate::rejection::RejectionKind::$kind,)*
                }
            }

            fn code(&self) -> &'static str {
                match self {
                    $($pattern => $code,)*
                }
            }
        }
    };
}
