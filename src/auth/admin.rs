//! Admin controls over other accounts, and the caller's own API key.

use agon_aggregates::account::{Account, AccountCommand};
use agon_projections::Accounts;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::{Auth, AuthError};
use crate::crypto::secrets::{new_api_key, sha256_hex};

/// A user's lock as admins see it (§2.2).
#[derive(Debug, Serialize, ToSchema)]
pub struct LockoutStatus {
    pub user_id: String,
    pub email: String,
    pub locked: bool,
    pub locked_until: Option<DateTime<Utc>>,
    /// Seconds the lock still holds (0 when unlocked).
    pub remaining_seconds: i64,
    pub failed_login_count: u32,
}

/// A new API key, shown once.
#[derive(Debug, Serialize, ToSchema)]
pub struct NewApiKey {
    /// The bearer credential: `agon_<key id>_<secret>`. Store it now; it is
    /// never shown again.
    pub api_key: String,
    pub key_id: String,
    pub created_at: DateTime<Utc>,
}

impl Auth {
    /// The account `user_id`, or 404.
    pub async fn existing(&self, user_id: &str) -> Result<Account, AuthError> {
        let account = self.account(user_id).await?;
        if account.exists() {
            Ok(account)
        } else {
            Err(AuthError::NotFound {
                resource_type: "user",
                resource_id: user_id.to_owned(),
            })
        }
    }

    pub async fn lockout_status(&self, user_id: &str) -> Result<LockoutStatus, AuthError> {
        let account = self.existing(user_id).await?;
        let remaining = account.lock_remaining(self.clock().now());
        Ok(LockoutStatus {
            user_id: account.user_id,
            email: account.email,
            locked: remaining.is_some(),
            locked_until: account.locked_until.filter(|_| remaining.is_some()),
            remaining_seconds: remaining.unwrap_or(0),
            failed_login_count: account.failed_login_count,
        })
    }

    /// Clears the lock and the failure count.
    pub async fn unlock(&self, admin: &str, user_id: &str) -> Result<LockoutStatus, AuthError> {
        self.existing(user_id).await?;
        let unlock = AccountCommand::Unlock {
            by: admin.to_owned(),
            at: self.clock().now(),
        };
        self.command(user_id, unlock, admin).await?;
        self.lockout_status(user_id).await
    }

    /// Disables `user_id`: sign-in refused, every session and the API key end.
    pub async fn disable(&self, admin: &str, user_id: &str) -> Result<usize, AuthError> {
        self.existing(user_id).await?;
        let disable = AccountCommand::Disable {
            by: admin.to_owned(),
            at: self.clock().now(),
        };
        let (_, events) = self.command(user_id, disable, admin).await?;
        self.await_revocations(&events).await?;
        // Key gone and listed as disabled, on every replica.
        self.docs()
            .wait_for::<Accounts>(user_id, super::READ_MODEL_WAIT, |view| {
                view.disabled && view.api_key.is_none()
            })
            .await?;
        Ok(count_revoked(&events))
    }

    /// Lets a disabled `user_id` sign in again (its sessions and API key
    /// stay revoked). Enabling an enabled account changes nothing.
    pub async fn enable(&self, admin: &str, user_id: &str) -> Result<(), AuthError> {
        self.existing(user_id).await?;
        let enable = AccountCommand::Enable {
            by: admin.to_owned(),
            at: self.clock().now(),
        };
        self.command(user_id, enable, admin).await?;
        // Listed as enabled everywhere before the answer goes out.
        self.docs()
            .wait_for::<Accounts>(user_id, super::READ_MODEL_WAIT, |view| !view.disabled)
            .await?;
        Ok(())
    }

    /// Ends every session of `user_id` and revokes its API key.
    pub async fn revoke_all(&self, admin: &str, user_id: &str) -> Result<usize, AuthError> {
        self.existing(user_id).await?;
        let revoke = AccountCommand::RevokeAll {
            by: admin.to_owned(),
            at: self.clock().now(),
        };
        let (_, events) = self.command(user_id, revoke, admin).await?;
        self.await_revocations(&events).await?;
        self.await_key_gone(user_id).await?;
        Ok(count_revoked(&events))
    }

    /// Creates the caller's API key, replacing any earlier one.
    pub async fn create_api_key(&self, user_id: &str) -> Result<NewApiKey, AuthError> {
        let (api_key, parts) = new_api_key();
        let created_at = self.clock().now();
        let create = AccountCommand::CreateApiKey {
            key_id: parts.key_id.clone(),
            key_hash: sha256_hex(&parts.secret),
            at: created_at,
        };
        self.command(user_id, create, user_id).await?;
        // Usable on every replica before it is handed out.
        let key_id = parts.key_id.clone();
        self.docs()
            .wait_for::<Accounts>(user_id, super::READ_MODEL_WAIT, |view| {
                view.api_key.as_ref().is_some_and(|k| k.key_id == key_id)
            })
            .await?;
        Ok(NewApiKey {
            api_key,
            key_id: parts.key_id,
            created_at,
        })
    }

    /// Revokes the caller's API key.
    pub async fn revoke_api_key(&self, user_id: &str) -> Result<(), AuthError> {
        let revoke = AccountCommand::RevokeApiKey {
            at: self.clock().now(),
        };
        self.command(user_id, revoke, user_id).await?;
        self.await_key_gone(user_id).await
    }

    pub(super) async fn await_key_gone(&self, user_id: &str) -> Result<(), AuthError> {
        self.docs()
            .wait_for::<Accounts>(user_id, super::READ_MODEL_WAIT, |view| {
                view.api_key.is_none()
            })
            .await?;
        Ok(())
    }
}

fn count_revoked(events: &[agon_aggregates::account::AccountEvent]) -> usize {
    events
        .iter()
        .filter(|e| {
            matches!(
                e,
                agon_aggregates::account::AccountEvent::SessionRevoked { .. }
            )
        })
        .count()
}
