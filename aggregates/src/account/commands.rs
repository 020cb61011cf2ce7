//! What may be asked of an account. Time, ids and hashes arrive ready-made:
//! the domain neither reads a clock nor hashes a password.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::events::{Device, FailureReason, ProviderRefusal, Role, SecondFactor};
use super::identities::ProviderIdentity;

#[derive(Debug, Clone, PartialEq)]
pub enum AccountCommand {
    /// `email` and `name` arrive sealed: the service checked them
    /// ([`super::values::Email`], [`super::values::DisplayName`]) and sealed
    /// them under the user's key; `email_index` is the address's blind index.
    Register {
        user_id: String,
        email: String,
        name: String,
        email_index: String,
        password_hash: String,
        role: Role,
        email_verified: bool,
        /// The provider identity the account is made for (just-in-time
        /// provisioning): linked at once, and no password is known.
        identity: Option<ProviderIdentity>,
        at: DateTime<Utc>,
    },
    IssueVerification {
        token_hash: String,
        expires_at: DateTime<Utc>,
        at: DateTime<Utc>,
    },
    VerifyEmail {
        token_hash: String,
        at: DateTime<Utc>,
    },
    /// Reserve a password or code check before making it: refused (locked)
    /// once the failures plus the checks in flight reach the next lock, so
    /// that no more checks run than the lockout allows, however many arrive
    /// at once. `credential` is `None` for a sign-in, else the session id
    /// (or `api_key:<key id>`) of a signed-in caller re-authenticating.
    BeginAttempt {
        attempt_id: String,
        credential: Option<String>,
        at: DateTime<Utc>,
    },
    /// The check `attempt_id` ended without an outcome event of its own.
    EndAttempt {
        attempt_id: String,
        at: DateTime<Utc>,
    },
    /// A wrong password or second factor was presented (in check `attempt`).
    RecordLoginFailure {
        reason: FailureReason,
        attempt: Option<String>,
        at: DateTime<Utc>,
    },
    /// A signed-in caller's current password or code was wrong.
    RecordReauthFailure {
        credential: String,
        attempt: Option<String>,
        at: DateTime<Utc>,
    },
    /// The password was right (and the second factor, when MFA is on): open a session.
    Login {
        session_id: String,
        device: Device,
        second_factor: Option<SecondFactor>,
        /// The MFA step token that carried the password step, spent now.
        step_token: Option<StepToken>,
        /// The check this sign-in settles.
        attempt: Option<String>,
        max_sessions: usize,
        refresh_expires_at: DateTime<Utc>,
        /// The linked provider identity the sign-in came through, in place
        /// of the password.
        via: Option<ProviderIdentity>,
        at: DateTime<Utc>,
    },
    /// Link a provider's identity (one per provider).
    LinkIdentity {
        identity: ProviderIdentity,
        at: DateTime<Utc>,
    },
    /// Unlink the identity of `provider`, unless it is the last way in.
    UnlinkIdentity {
        provider: String,
        at: DateTime<Utc>,
    },
    /// Record that a provider's sign-in was refused by the account.
    RefuseProviderLogin {
        identity: ProviderIdentity,
        reason: ProviderRefusal,
        at: DateTime<Utc>,
    },
    /// Exchange refresh token `generation` of `session_id` for the next one.
    Refresh {
        session_id: String,
        generation: u32,
        refresh_expires_at: DateTime<Utc>,
        at: DateTime<Utc>,
    },
    EndSession {
        session_id: String,
        reason: super::events::RevokeReason,
        at: DateTime<Utc>,
    },
    RevokeOtherSessions {
        keep: String,
        at: DateTime<Utc>,
    },
    /// An admin revokes every session and the API key of the user.
    RevokeAll {
        by: String,
        at: DateTime<Utc>,
    },
    Unlock {
        by: String,
        at: DateTime<Utc>,
    },
    /// The current password was checked by the caller; every session ends.
    ChangePassword {
        password_hash: String,
        attempt: Option<String>,
        at: DateTime<Utc>,
    },
    BeginMfaSetup {
        secret: Value,
        at: DateTime<Utc>,
    },
    /// The caller checked a code against the pending secret; it matched `step`.
    EnableMfa {
        totp_step: u64,
        backup_code_hashes: Vec<String>,
        attempt: Option<String>,
        at: DateTime<Utc>,
    },
    DisableMfa {
        second_factor: SecondFactor,
        attempt: Option<String>,
        at: DateTime<Utc>,
    },
    ResetMfa {
        by: String,
        at: DateTime<Utc>,
    },
    /// The singular route's key: the key named `default`, replacing the
    /// previous one of that name. Refused when it would make more than
    /// `max_keys` live keys.
    CreateApiKey {
        key_id: String,
        key_hash: String,
        max_keys: usize,
        at: DateTime<Utc>,
    },
    /// A key under a name no live key of the account has, up to `max_keys`.
    CreateNamedApiKey {
        key_id: String,
        /// As the caller sent it; the account trims and checks it.
        name: String,
        key_hash: String,
        max_keys: usize,
        at: DateTime<Utc>,
    },
    /// The singular route: revokes the key named `default`.
    RevokeApiKey {
        at: DateTime<Utc>,
    },
    /// Revokes one of the account's live keys.
    RevokeApiKeyById {
        key_id: String,
        at: DateTime<Utc>,
    },
    Disable {
        by: String,
        at: DateTime<Utc>,
    },
    /// Erase the user's personal data (their key is destroyed by the
    /// service right after); sessions and keys end with it.
    Erase {
        by: String,
        at: DateTime<Utc>,
    },
    /// An admin lets a disabled account sign in again.
    Enable {
        by: String,
        at: DateTime<Utc>,
    },
    ChangeRole {
        role: Role,
        by: String,
        at: DateTime<Utc>,
    },
    JoinOrganization {
        org_id: String,
        org_role: String,
        at: DateTime<Utc>,
    },
}

/// An MFA step token, by its id (`jti`) and expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepToken {
    pub token_id: String,
    pub expires_at: DateTime<Utc>,
}
