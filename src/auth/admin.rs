//! Admin controls over other accounts.

use agon_aggregates::account::{Account, AccountCommand};
use agon_projections::Accounts;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::{Auth, AuthError};
use agon_aggregates::ids::UserId;

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

    pub async fn lockout_status(&self, user_id: &UserId) -> Result<LockoutStatus, AuthError> {
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
    #[tracing::instrument(level = "debug", skip_all, fields(user_id = %user_id), err(level = "debug"))]
    pub async fn unlock(
        &self,
        admin: &UserId,
        user_id: &UserId,
    ) -> Result<LockoutStatus, AuthError> {
        self.existing(user_id).await?;
        let unlock = AccountCommand::Unlock {
            by: admin.as_str().to_owned(),
            at: self.clock().now(),
        };
        self.command(user_id, unlock, admin).await?;
        self.lockout_status(user_id).await
    }

    /// Disables `user_id`: sign-in refused, every session and API key end.
    #[tracing::instrument(level = "debug", skip_all, fields(user_id = %user_id), err(level = "debug"))]
    pub async fn disable(&self, admin: &UserId, user_id: &UserId) -> Result<usize, AuthError> {
        self.existing(user_id).await?;
        let disable = AccountCommand::Disable {
            by: admin.as_str().to_owned(),
            at: self.clock().now(),
        };
        let (_, events) = self.command(user_id, disable, admin).await?;
        self.await_revocations(&events).await?;
        // Key gone and listed as disabled, on every replica.
        self.docs()
            .wait_for::<Accounts>(user_id, |view| view.disabled && !view.has_api_key())
            .await?;
        Ok(count_revoked(&events))
    }

    /// Lets a disabled `user_id` sign in again (its sessions and API keys
    /// stay revoked). Enabling an enabled account changes nothing.
    #[tracing::instrument(level = "debug", skip_all, fields(user_id = %user_id), err(level = "debug"))]
    pub async fn enable(&self, admin: &UserId, user_id: &UserId) -> Result<(), AuthError> {
        self.existing(user_id).await?;
        let enable = AccountCommand::Enable {
            by: admin.as_str().to_owned(),
            at: self.clock().now(),
        };
        self.command(user_id, enable, admin).await?;
        // Listed as enabled everywhere before the answer goes out.
        self.docs()
            .wait_for::<Accounts>(user_id, |view| !view.disabled)
            .await?;
        Ok(())
    }

    /// Ends every session of `user_id` and revokes its API keys.
    #[tracing::instrument(level = "debug", skip_all, fields(user_id = %user_id), err(level = "debug"))]
    pub async fn revoke_all(&self, admin: &UserId, user_id: &UserId) -> Result<usize, AuthError> {
        self.existing(user_id).await?;
        let revoke = AccountCommand::RevokeAll {
            by: admin.as_str().to_owned(),
            at: self.clock().now(),
        };
        let (_, events) = self.command(user_id, revoke, admin).await?;
        self.await_revocations(&events).await?;
        Ok(count_revoked(&events))
    }
}

/// Sessions that `events` ended.
pub(super) fn count_revoked(events: &[agon_aggregates::account::AccountEvent]) -> usize {
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
