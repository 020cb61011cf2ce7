//! What can go wrong in a sign-in through a provider, in the words the
//! error address shows (the spec's hints among them).

use crate::auth::AuthError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum SsoError {
    #[error("{0} sign-in is not configured")]
    NotConfigured(&'static str),
    #[error("Invalid redirect URL")]
    InvalidRedirect,
    #[error("State token expired")]
    StateExpired,
    #[error("Invalid state token")]
    InvalidState,
    #[error("Invalid client credentials")]
    InvalidClient,
    #[error("The identity provider refused the sign-in: {0}")]
    Refused(String),
    #[error("The identity provider's ID token was rejected: {0}")]
    Token(String),
    /// Internal: the token named a key the cached set lacks (keys are
    /// fetched again once before this becomes [`SsoError::Token`]).
    #[error("The identity provider's ID token was rejected: no key matches it")]
    UnknownKey,
    #[error("The identity provider's SAML response was rejected: {0}")]
    Assertion(String),
    #[error("The identity provider's logout request was rejected: {0}")]
    Logout(String),
    #[error("The SAML assertion was already used")]
    Replayed,
    #[error("User not authorized")]
    NotAuthorized,
    #[error("The identity provider could not be reached: {0}")]
    Unreachable(String),
    #[error("identity provider setting: {0}")]
    Provider(String),
    #[error("sign-in flow: {0}")]
    Flow(String),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("event store: {0}")]
    Store(#[from] StoreError),
}

impl SsoError {
    /// Whether the service, not the caller or the provider's answer, failed.
    pub fn is_fault(&self) -> bool {
        match self {
            SsoError::Flow(_) | SsoError::Store(_) => true,
            SsoError::Auth(e) => e.is_fault(),
            _ => false,
        }
    }
}
