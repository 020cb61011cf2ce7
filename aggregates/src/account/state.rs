//! The state of an account as its events leave it, and the checks the
//! decisions share.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::AccountError;
use super::events::{AccountEvent, RevokeReason, Role, SecondFactor};

/// Failed attempts at which the lock starts, and its length (§8.2).
pub const LOCKOUT_LADDER: [(u32, i64); 3] = [(15, 3_600), (10, 900), (5, 60)];

/// How long the account stays locked after `failures` consecutive failures.
pub fn lock_seconds(failures: u32) -> Option<i64> {
    LOCKOUT_LADDER
        .iter()
        .find(|(threshold, _)| failures >= *threshold)
        .map(|(_, seconds)| *seconds)
}

/// The failure count at which the next lock starts, after `failures`.
pub fn next_lock_at(failures: u32) -> u32 {
    let first = LOCKOUT_LADDER
        .iter()
        .map(|(threshold, _)| *threshold)
        .min()
        .unwrap_or(1);
    first.max(failures.saturating_add(1))
}

/// Wrong current passwords or codes one credential may present before it ends.
pub const REAUTH_LIMIT: u32 = 5;

/// A check still in flight after this long is taken to have died with its
/// process, and no longer counts.
pub const ATTEMPT_TIMEOUT_SECONDS: i64 = 30;

/// How an API key names itself as the credential of a re-authentication.
pub const API_KEY_CREDENTIAL_PREFIX: &str = "api_key:";

/// What an erased personal field reads as.
pub const ERASED: &str = "[erased]";

/// A password or code check under way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingAttempt {
    /// `None` for a sign-in; else the credential re-authenticating.
    pub credential: Option<String>,
    pub started_at: DateTime<Utc>,
}

/// One open session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    pub started_at: DateTime<Utc>,
    /// The generation of the only refresh token that may still be used.
    pub refresh_generation: u32,
    pub refresh_expires_at: DateTime<Utc>,
}

/// MFA as configured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MfaState {
    pub enabled: bool,
    /// The TOTP secret envelope, pending until enabled.
    pub secret: Option<Value>,
    pub backup_code_hashes: Vec<String>,
    /// The last TOTP step accepted: no code of this step or earlier works again.
    pub last_totp_step: u64,
}

/// One live API key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiKeyState {
    pub key_id: String,
    pub key_hash: String,
    /// Unique among the account's live keys; the singular routes' key is
    /// the one named [`super::DEFAULT_KEY_NAME`].
    pub name: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingVerification {
    pub token_hash: String,
    pub expires_at: DateTime<Utc>,
}

/// The state of one account, rebuilt from its events.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Account {
    pub user_id: String,
    /// Sealed since v2 of `Registered` (plaintext in older streams);
    /// [`ERASED`] once erased.
    pub email: String,
    pub name: String,
    /// The blind index of the address (none in streams from before it).
    pub email_index: Option<String>,
    pub password_hash: String,
    pub role: Role,
    pub email_verified: bool,
    pub verification: Option<PendingVerification>,
    pub failed_login_count: u32,
    pub locked_until: Option<DateTime<Utc>>,
    pub disabled: bool,
    pub mfa: MfaState,
    /// Live API keys, by key id.
    pub api_keys: BTreeMap<String, ApiKeyState>,
    pub sessions: BTreeMap<String, SessionState>,
    pub org_id: Option<String>,
    pub org_role: Option<String>,
    pub created_at: Option<DateTime<Utc>>,
    pub last_login_at: Option<DateTime<Utc>>,
    /// Checks under way, by attempt id.
    pub attempts: BTreeMap<String, PendingAttempt>,
    /// Wrong re-authentications per live credential.
    pub reauth_failures: BTreeMap<String, u32>,
    /// MFA step tokens already used, with their expiry.
    pub spent_step_tokens: BTreeMap<String, DateTime<Utc>>,
    /// Personal data erased: the account is gone for every purpose.
    pub erased: bool,
    /// Linked provider identities: provider → subject.
    pub identities: BTreeMap<String, String>,
    /// Made for a provider's identity, and no password set since: the
    /// stored hash is of a secret nobody holds.
    pub password_unset: bool,
}

impl Account {
    /// Registered and not erased.
    pub fn exists(&self) -> bool {
        self.created_at.is_some() && !self.erased
    }

    /// Seconds the lock still holds at `now`, if it does.
    pub fn lock_remaining(&self, now: DateTime<Utc>) -> Option<i64> {
        let until = self.locked_until?;
        let remaining = (until - now).num_milliseconds();
        // Round up: a lock with 200 ms left still says "1 seconds", never "0".
        (remaining > 0).then(|| (remaining + 999) / 1_000)
    }

    pub(super) fn ensure_usable(&self, now: DateTime<Utc>) -> Result<(), AccountError> {
        if !self.exists() {
            return Err(AccountError::NotRegistered);
        }
        if self.disabled {
            return Err(AccountError::Disabled);
        }
        match self.lock_remaining(now) {
            Some(remaining_seconds) => Err(AccountError::Locked { remaining_seconds }),
            None => Ok(()),
        }
    }

    /// Exists and is not disabled; a lock does not matter (signed-in
    /// callers keep their sessions and security actions while it holds).
    pub(super) fn ensure_active(&self) -> Result<(), AccountError> {
        self.ensure_exists()?;
        if self.disabled {
            return Err(AccountError::Disabled);
        }
        Ok(())
    }

    pub(super) fn ensure_exists(&self) -> Result<(), AccountError> {
        if self.exists() {
            Ok(())
        } else {
            Err(AccountError::NotRegistered)
        }
    }

    /// Checks a second factor without consuming it.
    pub(super) fn check_second_factor(&self, factor: &SecondFactor) -> Result<(), AccountError> {
        match factor {
            SecondFactor::Totp { step } if *step <= self.mfa.last_totp_step => {
                Err(AccountError::CodeReplayed)
            }
            SecondFactor::Totp { .. } => Ok(()),
            SecondFactor::BackupCode { code_hash } => {
                if self.mfa.backup_code_hashes.contains(code_hash) {
                    Ok(())
                } else {
                    Err(AccountError::InvalidBackupCode)
                }
            }
        }
    }

    /// Sessions ordered oldest first.
    pub(super) fn sessions_by_age(&self) -> Vec<String> {
        let mut sessions: Vec<_> = self.sessions.iter().collect();
        sessions.sort_by(|a, b| (a.1.started_at, a.0).cmp(&(b.1.started_at, b.0)));
        sessions.into_iter().map(|(id, _)| id.clone()).collect()
    }

    pub(super) fn revocations(
        &self,
        keep: Option<&str>,
        reason: RevokeReason,
        at: DateTime<Utc>,
    ) -> Vec<AccountEvent> {
        self.sessions_by_age()
            .into_iter()
            .filter(|id| Some(id.as_str()) != keep)
            .map(|session_id| AccountEvent::SessionRevoked {
                session_id,
                reason,
                at,
            })
            .collect()
    }
}
