//! The Account aggregate: registration, verification, sign-in and lockout,
//! sessions, MFA, API keys by name, roles and organization membership.
//!
//! Every change to a user's security state is one of its events, so the
//! security history of a user is its stream, and replaying it rebuilds the
//! state exactly.

mod aggregate;
mod apply;
mod attempts;
mod commands;
mod error;
mod events;
mod identities;
mod keys;
mod state;
#[cfg(test)]
mod tests;
pub mod values;

pub use commands::{AccountCommand, StepToken};
pub use error::AccountError;
pub use events::{
    AccountEvent, Device, FailureReason, KeyRevokeReason, LoginMethod, ProviderRefusal,
    RevokeReason, Role, SecondFactor,
};
pub use identities::ProviderIdentity;
pub use keys::{DEFAULT_KEY_NAME, MAX_KEY_NAME_CHARS, key_name};
pub use state::{
    API_KEY_CREDENTIAL_PREFIX, ATTEMPT_TIMEOUT_SECONDS, Account, ApiKeyState, ERASED,
    LOCKOUT_LADDER, MfaState, PendingAttempt, PendingVerification, REAUTH_LIMIT, SessionState,
    lock_seconds, next_lock_at,
};
pub use values::{DisplayName, Email, MAX_EMAIL_CHARS, Password, ValueError};
