//! The caller's API keys: keys by name, and the singular §4.1 key, which is
//! the key named `default` (creating it replaces the previous `default`
//! key, revoking it revokes that one; named keys are left alone).
//!
//! A key is handed out only once the `api_keys` read model holds it, and a
//! revocation answers only once it shows there, so every replica accepts a
//! new key and refuses a revoked one from the response on.

use agon_aggregates::account::{API_KEY_CREDENTIAL_PREFIX, AccountCommand, DEFAULT_KEY_NAME};
use agon_projections::ApiKeys;
use agon_projections::accounts::{ApiKeyDoc, LIVE};
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::{Auth, AuthError};
use crate::crypto::secrets::{API_KEY_PREFIX, constant_time_eq, new_api_key, sha256_hex};
use crate::projection::ListFilter;

/// A new API key, shown once.
#[derive(Debug, Serialize, ToSchema)]
pub struct NewApiKey {
    /// The bearer credential: `agon_<key id>_<secret>`. Store it now; it is
    /// never shown again.
    pub api_key: String,
    pub key_id: String,
    /// The key id again, under the name list entries use.
    pub id: String,
    /// `default` for the singular route's key.
    pub name: String,
    /// The start of the key that is not secret (`agon_<key id>`), to tell
    /// keys apart in lists.
    pub prefix: String,
    pub created_at: DateTime<Utc>,
}

/// One of the caller's keys as lists show it: never the secret or its hash.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyInfo {
    pub id: String,
    pub key_id: String,
    pub name: String,
    pub prefix: String,
    pub created_at: DateTime<Utc>,
    /// When the key last authenticated a request (recorded at most once a
    /// minute); `null` when it never has.
    pub last_used_at: Option<DateTime<Utc>>,
}

/// The part of a key that may be shown: everything before its secret.
fn prefix(key_id: &str) -> String {
    format!("{API_KEY_PREFIX}{key_id}")
}

impl Auth {
    /// Creates the caller's `default` key (the singular route), replacing
    /// the previous one.
    pub async fn create_api_key(&self, user_id: &str) -> Result<NewApiKey, AuthError> {
        self.issue_key(user_id, None).await
    }

    /// Creates a key named `name` beside the caller's other keys.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn create_named_api_key(
        &self,
        user_id: &str,
        name: &str,
    ) -> Result<NewApiKey, AuthError> {
        self.issue_key(user_id, Some(name)).await
    }

    /// `name: None` is the singular route's `default` key.
    async fn issue_key(&self, user_id: &str, name: Option<&str>) -> Result<NewApiKey, AuthError> {
        let (api_key, parts) = new_api_key();
        let created_at = self.clock().now();
        let key_id = parts.key_id.clone();
        let key_hash = sha256_hex(&parts.secret);
        let max_keys = self.settings().max_api_keys;
        let create = match name {
            None => AccountCommand::CreateApiKey {
                key_id: key_id.clone(),
                key_hash,
                max_keys,
                at: created_at,
            },
            Some(name) => AccountCommand::CreateNamedApiKey {
                key_id: key_id.clone(),
                name: name.to_owned(),
                key_hash,
                max_keys,
                at: created_at,
            },
        };
        let (account, _) = self.command(user_id, create, user_id).await?;
        // Usable on every replica before it is handed out.
        self.docs().wait_for::<ApiKeys>(&key_id, |_| true).await?;
        let name = account
            .api_keys
            .get(&key_id)
            .map_or(DEFAULT_KEY_NAME, |key| key.name.as_str())
            .to_owned();
        Ok(NewApiKey {
            api_key,
            id: key_id.clone(),
            prefix: prefix(&key_id),
            key_id,
            name,
            created_at,
        })
    }

    /// Revokes the caller's `default` key (the singular route).
    pub async fn revoke_api_key(&self, user_id: &str) -> Result<(), AuthError> {
        let revoke = AccountCommand::RevokeApiKey {
            at: self.clock().now(),
        };
        let (_, events) = self.command(user_id, revoke, user_id).await?;
        self.await_revocations(&events).await
    }

    /// Revokes the caller's key `key_id`; 404 unless it is a live key of theirs.
    pub async fn revoke_api_key_by_id(&self, user_id: &str, key_id: &str) -> Result<(), AuthError> {
        let revoke = AccountCommand::RevokeApiKeyById {
            key_id: key_id.to_owned(),
            at: self.clock().now(),
        };
        let (_, events) = self.command(user_id, revoke, user_id).await?;
        self.await_revocations(&events).await
    }

    /// The caller's live keys, newest first, with their last use.
    pub async fn api_keys(&self, user_id: &str) -> Result<Vec<ApiKeyInfo>, AuthError> {
        let filter = ListFilter {
            owner: Some(user_id),
            state: Some(LIVE),
        };
        // Live keys are few (the cap, or what a higher earlier cap let
        // through): no paging. Revoked ones are never read.
        let (keys, _) = self.docs().list::<ApiKeys>(filter, u32::MAX, 0).await?;
        let mut listed = Vec::with_capacity(keys.len());
        for key in keys {
            let last = self.last_activity(&key_activity(&key.key_id)).await?;
            listed.push(info(key, last));
        }
        Ok(listed)
    }

    /// The live key `key_id` with the hash `presented`, if there is one.
    pub(super) async fn live_key(
        &self,
        key_id: &str,
        presented: &str,
    ) -> Result<Option<ApiKeyDoc>, AuthError> {
        let key = self.docs().get::<ApiKeys>(key_id).await?;
        Ok(key.filter(|key| {
            key.is_live() && constant_time_eq(presented.as_bytes(), key.key_hash.as_bytes())
        }))
    }

    /// Records that key `key_id` authenticated a request now, at most once
    /// a minute per key (as for sessions: a use is not a domain event).
    pub(super) async fn key_used(&self, key_id: &str) -> Result<(), AuthError> {
        self.touch_unless_recent(&key_activity(key_id)).await
    }
}

/// The activity row of key `key_id`: beside the sessions' rows, under the
/// name re-authentication checks give the key.
fn key_activity(key_id: &str) -> String {
    format!("{API_KEY_CREDENTIAL_PREFIX}{key_id}")
}

fn info(key: ApiKeyDoc, last_used: Option<i64>) -> ApiKeyInfo {
    ApiKeyInfo {
        id: key.key_id.clone(),
        prefix: prefix(&key.key_id),
        key_id: key.key_id,
        name: key.name,
        created_at: key.created_at,
        last_used_at: last_used.and_then(|t| DateTime::from_timestamp(t, 0)),
    }
}
