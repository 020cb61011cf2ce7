//! Why an account refused a command.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AccountError {
    #[error("account does not exist")]
    NotRegistered,
    #[error("account already exists")]
    AlreadyRegistered,
    #[error("Account locked for {remaining_seconds} seconds")]
    Locked { remaining_seconds: i64 },
    #[error("account is disabled")]
    Disabled,
    #[error("a second factor is required")]
    MfaRequired,
    #[error("MFA is not enabled")]
    MfaNotEnabled,
    #[error("MFA is already enabled")]
    MfaAlreadyEnabled,
    #[error("MFA setup has not been started")]
    MfaSetupNotStarted,
    #[error("this code was already used")]
    CodeReplayed,
    #[error("invalid backup code")]
    InvalidBackupCode,
    #[error("session is not active")]
    SessionNotActive,
    /// The singular route found no key named `default`.
    #[error("no API key exists")]
    NoApiKey,
    /// No live key of this account has that id.
    #[error("API key not found")]
    ApiKeyNotFound,
    #[error("an API key with this name already exists")]
    ApiKeyNameTaken,
    #[error(
        "an API key name is 1 to {} characters, without control characters",
        super::MAX_KEY_NAME_CHARS
    )]
    InvalidApiKeyName,
    #[error("at most {max} API keys per user; revoke one first")]
    TooManyApiKeys { max: usize },
    #[error("email is already verified")]
    AlreadyVerified,
    #[error("invalid verification token")]
    InvalidVerificationToken,
    #[error("verification token expired")]
    VerificationExpired,
    #[error("user already belongs to an organization")]
    AlreadyInOrganization,
    /// The MFA step token already finished a sign-in.
    #[error("this sign-in token was already used")]
    StepTokenSpent,
    /// The credential's re-authentication budget is taken by checks in flight.
    #[error("too many checks of this credential are in progress; retry shortly")]
    AttemptsInFlight,
    /// The credential presented too many wrong passwords or codes and ended.
    #[error("too many failed checks with this credential: sign in again")]
    CredentialExhausted,
}
