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
    #[error("another identity of this provider is already linked")]
    ProviderAlreadyLinked,
    #[error("no identity of this provider is linked")]
    IdentityNotLinked,
    /// Unlinking would leave the account with no way to sign in.
    #[error(
        "this is the account's only way to sign in: set a password or link another provider first"
    )]
    LastSignInMethod,
}

crate::rejections!(AccountError {
    Self::NotRegistered => NotFound, "USER_NOT_FOUND",
    Self::AlreadyRegistered => Conflict, "ALREADY_REGISTERED",
    Self::Locked { .. } => Locked, "ACCOUNT_LOCKED",
    Self::Disabled => Forbidden, "ACCOUNT_DISABLED",
    Self::MfaRequired => Invalid, "MFA_REQUIRED",
    Self::MfaNotEnabled => Conflict, "MFA_NOT_ENABLED",
    Self::MfaAlreadyEnabled => Conflict, "MFA_ALREADY_ENABLED",
    Self::MfaSetupNotStarted => Conflict, "MFA_SETUP_NOT_STARTED",
    Self::CodeReplayed => Invalid, "CODE_REPLAYED",
    Self::InvalidBackupCode => Invalid, "INVALID_BACKUP_CODE",
    Self::SessionNotActive => Conflict, "SESSION_NOT_ACTIVE",
    Self::NoApiKey => Conflict, "NO_API_KEY",
    Self::ApiKeyNotFound => NotFound, "API_KEY_NOT_FOUND",
    Self::ApiKeyNameTaken => Conflict, "API_KEY_NAME_TAKEN",
    Self::InvalidApiKeyName => Invalid, "INVALID_API_KEY_NAME",
    Self::TooManyApiKeys { .. } => Conflict, "TOO_MANY_API_KEYS",
    Self::AlreadyVerified => Conflict, "ALREADY_VERIFIED",
    Self::InvalidVerificationToken => NotFound, "VERIFICATION_TOKEN_NOT_FOUND",
    Self::VerificationExpired => Conflict, "VERIFICATION_EXPIRED",
    Self::AlreadyInOrganization => Conflict, "ALREADY_IN_ORGANIZATION",
    Self::StepTokenSpent => Conflict, "STEP_TOKEN_SPENT",
    Self::AttemptsInFlight => Conflict, "ATTEMPTS_IN_FLIGHT",
    Self::CredentialExhausted => Forbidden, "CREDENTIAL_EXHAUSTED",
    Self::ProviderAlreadyLinked => Conflict, "PROVIDER_ALREADY_LINKED",
    Self::IdentityNotLinked => NotFound, "IDENTITY_NOT_LINKED",
    Self::LastSignInMethod => Conflict, "LAST_SIGN_IN_METHOD",
});
