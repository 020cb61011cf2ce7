//! What happened to an account: the replayable security history of a user.

use chrono::{DateTime, Utc};
use cqrs_es::DomainEvent;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The platform role carried in access tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    #[default]
    User,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Admin => "admin",
        }
    }
}

/// Why a sign-in attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureReason {
    /// Wrong password.
    Password,
    /// Right password, wrong or replayed second factor.
    SecondFactor,
}

/// The second factor a sign-in used, recorded so that it cannot be used again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum SecondFactor {
    /// A TOTP code that matched time step `step`.
    Totp { step: u64 },
    /// A backup code, by its hash.
    BackupCode { code_hash: String },
}

/// How a session came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoginMethod {
    Password,
    PasswordAndTotp,
    PasswordAndBackupCode,
}

/// Why an account refused a sign-in its provider vouched for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderRefusal {
    Disabled,
    Locked,
    /// The domain or group checks of the provider's settings failed.
    NotAuthorized,
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RevokeReason {
    Logout,
    Deleted,
    OthersRevoked,
    /// The user reached the session limit; the oldest session made way.
    Evicted,
    PasswordChanged,
    Disabled,
    AdminRevokeAll,
    /// A rotated refresh token was presented again: the session may be stolen.
    RefreshReuse,
    Inactive,
    /// Too many wrong passwords or codes were presented with this session.
    ReauthFailed,
}

/// Why an API key stopped working.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyRevokeReason {
    Revoked,
    Replaced,
    Disabled,
    AdminRevokeAll,
    /// Too many wrong passwords or codes were presented with this key.
    ReauthFailed,
}

/// Where a session was started from, as far as its User-Agent tells.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Device {
    pub device_type: String,
    pub browser: String,
    pub ip: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum AccountEvent {
    /// Since v2 `email` and `name` are sealed under the user's own key
    /// (the service's `agon:sealed:` form) and `email_index` is the blind
    /// index of the address; v1 streams hold them in plaintext and no index.
    Registered {
        user_id: String,
        email: String,
        name: String,
        #[serde(default)]
        email_index: Option<String>,
        password_hash: String,
        role: Role,
        email_verified: bool,
        at: DateTime<Utc>,
    },
    VerificationIssued {
        token_hash: String,
        expires_at: DateTime<Utc>,
        at: DateTime<Utc>,
    },
    EmailVerified {
        at: DateTime<Utc>,
    },
    LoginFailed {
        reason: FailureReason,
        failed_login_count: u32,
        locked_until: Option<DateTime<Utc>>,
        at: DateTime<Utc>,
    },
    AccountUnlocked {
        by: String,
        at: DateTime<Utc>,
    },
    LoginSucceeded {
        session_id: String,
        method: LoginMethod,
        second_factor: Option<SecondFactor>,
        at: DateTime<Utc>,
    },
    SessionStarted {
        session_id: String,
        device: Device,
        refresh_expires_at: DateTime<Utc>,
        at: DateTime<Utc>,
    },
    SessionRefreshed {
        session_id: String,
        generation: u32,
        refresh_expires_at: DateTime<Utc>,
        at: DateTime<Utc>,
    },
    SessionRevoked {
        session_id: String,
        reason: RevokeReason,
        at: DateTime<Utc>,
    },
    PasswordChanged {
        password_hash: String,
        at: DateTime<Utc>,
    },
    MfaSetupStarted {
        /// The TOTP secret as a field-encryption envelope (never plaintext at rest
        /// when a key is configured).
        secret: Value,
        at: DateTime<Utc>,
    },
    MfaEnabled {
        backup_code_hashes: Vec<String>,
        totp_step: u64,
        at: DateTime<Utc>,
    },
    MfaDisabled {
        at: DateTime<Utc>,
    },
    MfaReset {
        by: String,
        at: DateTime<Utc>,
    },
    /// The key named `default` (the singular route's) was created.
    ApiKeyCreated {
        key_id: String,
        key_hash: String,
        at: DateTime<Utc>,
    },
    ApiKeyRevoked {
        key_id: String,
        reason: KeyRevokeReason,
        at: DateTime<Utc>,
    },
    UserDisabled {
        by: String,
        at: DateTime<Utc>,
    },
    RoleChanged {
        role: Role,
        by: String,
        at: DateTime<Utc>,
    },
    JoinedOrganization {
        org_id: String,
        org_role: String,
        at: DateTime<Utc>,
    },
    /// A password or code check began; it counts against the lockout (or the
    /// credential's re-authentication budget) until it ends.
    AttemptStarted {
        attempt_id: String,
        /// `None` for a sign-in; else the credential re-authenticating: a
        /// session id, or `api_key:<key id>`.
        credential: Option<String>,
        at: DateTime<Utc>,
    },
    /// The check `attempt_id` is over (its outcome is the event beside it).
    AttemptEnded {
        attempt_id: String,
        at: DateTime<Utc>,
    },
    /// A signed-in caller presented a wrong current password or code.
    ReauthFailed {
        credential: String,
        /// Wrong checks with this credential so far, this one included.
        failures: u32,
        at: DateTime<Utc>,
    },
    /// An MFA step token was used to finish a sign-in; it works only once.
    MfaTokenSpent {
        token_id: String,
        expires_at: DateTime<Utc>,
        at: DateTime<Utc>,
    },
    /// An admin re-enabled a disabled account.
    UserEnabled {
        by: String,
        at: DateTime<Utc>,
    },
    /// A key was created under a name of the user's choosing, beside the
    /// account's other keys.
    NamedApiKeyCreated {
        key_id: String,
        name: String,
        key_hash: String,
        at: DateTime<Utc>,
    },
    /// An identity at a provider (the OAuth provider `extidp`, enterprise
    /// SSO) now signs in as this account. `provisioned`: the account was
    /// made for it just now and has no password anyone knows. Identities
    /// are named by `subject_index`, a keyed hash of the provider and its
    /// subject, never the subject itself (a SAML subject is an email).
    IdentityLinked {
        provider: String,
        subject_index: String,
        provisioned: bool,
        at: DateTime<Utc>,
    },
    /// The identity no longer signs in as this account.
    IdentityUnlinked {
        provider: String,
        subject_index: String,
        at: DateTime<Utc>,
    },
    /// A sign-in through a provider succeeded; the failure count and any
    /// lock are cleared. SessionStarted follows.
    ProviderLoginSucceeded {
        session_id: String,
        provider: String,
        subject_index: String,
        second_factor: Option<SecondFactor>,
        at: DateTime<Utc>,
    },
    /// The provider vouched for the identity but this account refused it.
    ProviderLoginRefused {
        provider: String,
        subject_index: String,
        reason: ProviderRefusal,
        at: DateTime<Utc>,
    },
    /// The user's personal data was erased: their key is destroyed, so the
    /// sealed fields of their events can no longer be read. Carries no
    /// personal data itself.
    Erased {
        /// user_id of whoever asked: the user, or an admin.
        by: String,
        at: DateTime<Utc>,
    },
}

impl AccountEvent {
    /// The event's variant name, as stored in `event_type`.
    pub fn name(&self) -> &'static str {
        match self {
            AccountEvent::Registered { .. } => "Registered",
            AccountEvent::VerificationIssued { .. } => "VerificationIssued",
            AccountEvent::EmailVerified { .. } => "EmailVerified",
            AccountEvent::LoginFailed { .. } => "LoginFailed",
            AccountEvent::AccountUnlocked { .. } => "AccountUnlocked",
            AccountEvent::LoginSucceeded { .. } => "LoginSucceeded",
            AccountEvent::SessionStarted { .. } => "SessionStarted",
            AccountEvent::SessionRefreshed { .. } => "SessionRefreshed",
            AccountEvent::SessionRevoked { .. } => "SessionRevoked",
            AccountEvent::PasswordChanged { .. } => "PasswordChanged",
            AccountEvent::MfaSetupStarted { .. } => "MfaSetupStarted",
            AccountEvent::MfaEnabled { .. } => "MfaEnabled",
            AccountEvent::MfaDisabled { .. } => "MfaDisabled",
            AccountEvent::MfaReset { .. } => "MfaReset",
            AccountEvent::ApiKeyCreated { .. } => "ApiKeyCreated",
            AccountEvent::ApiKeyRevoked { .. } => "ApiKeyRevoked",
            AccountEvent::UserDisabled { .. } => "UserDisabled",
            AccountEvent::RoleChanged { .. } => "RoleChanged",
            AccountEvent::JoinedOrganization { .. } => "JoinedOrganization",
            AccountEvent::AttemptStarted { .. } => "AttemptStarted",
            AccountEvent::AttemptEnded { .. } => "AttemptEnded",
            AccountEvent::ReauthFailed { .. } => "ReauthFailed",
            AccountEvent::MfaTokenSpent { .. } => "MfaTokenSpent",
            AccountEvent::UserEnabled { .. } => "UserEnabled",
            AccountEvent::NamedApiKeyCreated { .. } => "NamedApiKeyCreated",
            AccountEvent::Erased { .. } => "Erased",
            AccountEvent::IdentityLinked { .. } => "IdentityLinked",
            AccountEvent::IdentityUnlinked { .. } => "IdentityUnlinked",
            AccountEvent::ProviderLoginSucceeded { .. } => "ProviderLoginSucceeded",
            AccountEvent::ProviderLoginRefused { .. } => "ProviderLoginRefused",
        }
    }
}

impl DomainEvent for AccountEvent {
    fn event_type(&self) -> String {
        self.name().to_owned()
    }

    /// The version the upcasters bring stored events of this type to.
    fn event_version(&self) -> String {
        crate::wire::current_version(
            <crate::account::Account as cqrs_es::Aggregate>::TYPE,
            &self.event_type(),
        )
    }
}
