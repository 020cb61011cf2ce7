//! Why an account or sign-in operation failed, before HTTP gives it a status.

use agon_aggregates::Refusal;
use agon_aggregates::account::{AccountError, ValueError};
use agon_aggregates::email_claim::EmailClaimError;
use agon_aggregates::identity_claim::IdentityClaimError;
use agon_aggregates::organization::OrganizationError;
use thiserror::Error;

use crate::crypto::fields::FieldError;
use crate::crypto::jwt::TokenError;
use crate::crypto::password::PasswordError;
use crate::crypto::subject_keys::SubjectKeyError;
use crate::crypto::totp::TotpError;
use crate::store::{CommandError, StoreError};

#[derive(Debug, Error)]
pub enum AuthError {
    /// Wrong email or password; the same words for both (§5.2 rule 10).
    #[error("Invalid email or password")]
    InvalidCredentials,
    #[error("Account locked for {remaining_seconds} seconds")]
    Locked { remaining_seconds: i64 },
    #[error("Account is disabled")]
    Disabled,
    #[error("Token expired")]
    TokenExpired,
    #[error("Invalid token")]
    InvalidToken,
    #[error("Invalid authentication code")]
    InvalidCode,
    /// Too many wrong current passwords or codes with one credential: it ended.
    #[error("Too many failed checks: this session has ended; sign in again")]
    CredentialEnded,
    /// The request is well-formed but breaks a rule of its fields.
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{resource_type} not found")]
    NotFound {
        resource_type: &'static str,
        resource_id: String,
    },
    /// An aggregate's refusal that means nothing more to sign-in than its
    /// kind and rule (a clash, a bad value, a missing permission).
    #[error("{}", capitalized(&.0.message))]
    Rejected(Refusal),
    /// An email, name or password the rules refuse.
    #[error(transparent)]
    Value(#[from] ValueError),
    /// Other writers kept the account's stream busy through every retry.
    #[error("Too many concurrent changes to this account; retry shortly")]
    Contended,
    #[error("event store: {0}")]
    Store(#[from] StoreError),
    #[error("password hashing: {0}")]
    Password(#[from] PasswordError),
    #[error("cannot sign a token: {0}")]
    Signing(#[source] jsonwebtoken::errors::Error),
    #[error("encrypted field: {0}")]
    Field(#[from] FieldError),
    #[error("personal field: {0}")]
    SubjectKey(#[from] SubjectKeyError),
    #[error("authenticator setup: {0}")]
    Totp(#[from] TotpError),
    #[error("stored account document: {0}")]
    Document(#[from] serde_json::Error),
    #[error("credential check task: {0}")]
    Task(#[from] tokio::task::JoinError),
    /// A rule of the service itself broke (a bug, not a request's fault).
    #[error("internal invariant: {0}")]
    Invariant(&'static str),
}

impl AuthError {
    /// Whether the service, not the request, failed (a 5xx, never an
    /// answer about the credential).
    pub fn is_fault(&self) -> bool {
        matches!(
            self,
            AuthError::Contended
                | AuthError::Store(_)
                | AuthError::Password(_)
                | AuthError::Signing(_)
                | AuthError::Field(_)
                | AuthError::SubjectKey(_)
                | AuthError::Totp(_)
                | AuthError::Document(_)
                | AuthError::Task(_)
                | AuthError::Invariant(_)
        )
    }
}

impl From<TokenError> for AuthError {
    fn from(e: TokenError) -> Self {
        match e {
            TokenError::Expired => AuthError::TokenExpired,
            TokenError::Invalid => AuthError::InvalidToken,
        }
    }
}

impl From<CommandError<AccountError>> for AuthError {
    fn from(e: CommandError<AccountError>) -> Self {
        match e {
            CommandError::Rejected(e) => e.into(),
            CommandError::Store(e) => AuthError::Store(e),
            CommandError::Contended { .. } => AuthError::Contended,
        }
    }
}

impl From<AccountError> for AuthError {
    fn from(e: AccountError) -> Self {
        use AccountError as A;
        match e {
            A::Locked { remaining_seconds } => AuthError::Locked { remaining_seconds },
            A::Disabled => AuthError::Disabled,
            A::CodeReplayed | A::InvalidBackupCode | A::MfaRequired => AuthError::InvalidCode,
            A::SessionNotActive | A::StepTokenSpent => AuthError::InvalidToken,
            A::CredentialExhausted => AuthError::CredentialEnded,
            A::NotRegistered => AuthError::NotFound {
                resource_type: "user",
                resource_id: String::new(),
            },
            A::InvalidVerificationToken => AuthError::NotFound {
                resource_type: "verification token",
                resource_id: String::new(),
            },
            A::ApiKeyNotFound => AuthError::NotFound {
                resource_type: "API key",
                resource_id: String::new(),
            },
            A::IdentityNotLinked => AuthError::NotFound {
                resource_type: "linked identity",
                resource_id: String::new(),
            },
            // A bad key name is invalid; the key cap, like a taken name, is
            // a clash with the keys the caller holds (revoking one resolves
            // it); the rest are clashes with the account's state.
            A::AttemptsInFlight
            | A::VerificationExpired
            | A::InvalidApiKeyName
            | A::TooManyApiKeys { .. }
            | A::ApiKeyNameTaken
            | A::AlreadyRegistered
            | A::MfaNotEnabled
            | A::MfaAlreadyEnabled
            | A::MfaSetupNotStarted
            | A::NoApiKey
            | A::AlreadyVerified
            | A::AlreadyInOrganization
            | A::ProviderAlreadyLinked
            | A::LastSignInMethod => AuthError::Rejected(Refusal::of(&e)),
        }
    }
}

impl From<CommandError<OrganizationError>> for AuthError {
    fn from(e: CommandError<OrganizationError>) -> Self {
        use OrganizationError as O;
        match e {
            CommandError::Store(e) => AuthError::Store(e),
            CommandError::Contended { .. } => AuthError::Contended,
            CommandError::Rejected(e) => match e {
                O::NotFound | O::InviteNotFound => AuthError::NotFound {
                    resource_type: if e == O::NotFound {
                        "organization"
                    } else {
                        "invitation"
                    },
                    resource_id: String::new(),
                },
                other => AuthError::Rejected(Refusal::of(&other)),
            },
        }
    }
}

impl From<CommandError<EmailClaimError>> for AuthError {
    fn from(e: CommandError<EmailClaimError>) -> Self {
        match e {
            CommandError::Rejected(e @ EmailClaimError::Taken) => {
                AuthError::Rejected(Refusal::of(&e))
            }
            CommandError::Store(e) => AuthError::Store(e),
            CommandError::Contended { .. } => AuthError::Contended,
        }
    }
}

impl From<CommandError<IdentityClaimError>> for AuthError {
    fn from(e: CommandError<IdentityClaimError>) -> Self {
        match e {
            CommandError::Rejected(IdentityClaimError::Taken) => {
                AuthError::Conflict("This identity already signs in to another account".to_owned())
            }
            CommandError::Store(e) => AuthError::Store(e),
            CommandError::Contended { .. } => AuthError::Contended,
        }
    }
}

/// Domain messages are lower-case sentences; API messages start upper-case.
pub(crate) fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}
