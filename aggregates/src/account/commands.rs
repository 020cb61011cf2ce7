//! What may be asked of an account. Time, ids and hashes arrive ready-made:
//! the domain neither reads a clock nor hashes a password.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::events::{Device, FailureReason, Role, SecondFactor};

#[derive(Debug, Clone, PartialEq)]
pub enum AccountCommand {
    Register {
        user_id: String,
        email: String,
        name: String,
        password_hash: String,
        role: Role,
        email_verified: bool,
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
    /// A wrong password or second factor was presented.
    RecordLoginFailure {
        reason: FailureReason,
        at: DateTime<Utc>,
    },
    /// The password was right (and the second factor, when MFA is on): open a session.
    Login {
        session_id: String,
        device: Device,
        second_factor: Option<SecondFactor>,
        max_sessions: usize,
        refresh_expires_at: DateTime<Utc>,
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
        at: DateTime<Utc>,
    },
    DisableMfa {
        second_factor: SecondFactor,
        at: DateTime<Utc>,
    },
    ResetMfa {
        by: String,
        at: DateTime<Utc>,
    },
    CreateApiKey {
        key_id: String,
        key_hash: String,
        at: DateTime<Utc>,
    },
    RevokeApiKey {
        at: DateTime<Utc>,
    },
    Disable {
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
