//! API keys by name: a user holds up to a configured number of keys, each
//! under a name unique among them. The one key of the singular §4.1 routes
//! is simply the key named [`DEFAULT_KEY_NAME`]: creating it replaces the
//! previous one of that name, revoking it revokes that one.

use chrono::{DateTime, Utc};

use super::error::AccountError;
use super::events::{AccountEvent, KeyRevokeReason};
use super::state::{Account, ApiKeyState};

/// The name of the key the singular `/api/auth/api-key` routes manage
/// (and of every key created before keys had names).
pub const DEFAULT_KEY_NAME: &str = "default";

/// Longest key name, in characters.
pub const MAX_KEY_NAME_CHARS: usize = 100;

/// `raw` trimmed, when it is a usable key name: 1 to
/// [`MAX_KEY_NAME_CHARS`] characters, none of them a control character.
pub fn key_name(raw: &str) -> Result<&str, AccountError> {
    let name = raw.trim();
    let length = name.chars().count();
    if length == 0 || length > MAX_KEY_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(AccountError::InvalidApiKeyName);
    }
    Ok(name)
}

impl Account {
    /// The live key named [`DEFAULT_KEY_NAME`], if any.
    pub fn default_key(&self) -> Option<&ApiKeyState> {
        self.api_keys
            .values()
            .find(|key| key.name == DEFAULT_KEY_NAME)
    }

    /// The singular route's key: it replaces the key named `default`, so it
    /// counts against `max_keys` only when there was none.
    pub(super) fn decide_create_default_key(
        &self,
        key_id: String,
        key_hash: String,
        max_keys: usize,
        at: DateTime<Utc>,
    ) -> Result<Vec<AccountEvent>, AccountError> {
        self.ensure_active()?;
        let replaced = self
            .default_key()
            .map(|key| revocation(&key.key_id, KeyRevokeReason::Replaced, at));
        let kept = self.api_keys.len() - usize::from(replaced.is_some());
        self.ensure_room(kept, max_keys)?;
        let mut events: Vec<_> = replaced.into_iter().collect();
        events.push(AccountEvent::ApiKeyCreated {
            key_id,
            key_hash,
            at,
        });
        Ok(events)
    }

    /// A key beside the others, under a name none of them has.
    pub(super) fn decide_create_named_key(
        &self,
        key_id: String,
        name: &str,
        key_hash: String,
        max_keys: usize,
        at: DateTime<Utc>,
    ) -> Result<Vec<AccountEvent>, AccountError> {
        self.ensure_active()?;
        let name = key_name(name)?;
        if self.api_keys.values().any(|key| key.name == name) {
            return Err(AccountError::ApiKeyNameTaken);
        }
        self.ensure_room(self.api_keys.len(), max_keys)?;
        Ok(vec![AccountEvent::NamedApiKeyCreated {
            key_id,
            name: name.to_owned(),
            key_hash,
            at,
        }])
    }

    /// Revokes the live key `key_id` of this account; another account's
    /// key, a revoked one and an unknown one are all not found.
    pub(super) fn decide_revoke_key(
        &self,
        key_id: &str,
        at: DateTime<Utc>,
    ) -> Result<Vec<AccountEvent>, AccountError> {
        self.ensure_exists()?;
        if !self.api_keys.contains_key(key_id) {
            return Err(AccountError::ApiKeyNotFound);
        }
        Ok(vec![revocation(key_id, KeyRevokeReason::Revoked, at)])
    }

    /// The event revoking live key `key_id` for `reason`, if it is live.
    pub(super) fn key_revocation(
        &self,
        key_id: &str,
        reason: KeyRevokeReason,
        at: DateTime<Utc>,
    ) -> Option<AccountEvent> {
        self.api_keys
            .contains_key(key_id)
            .then(|| revocation(key_id, reason, at))
    }

    /// Events revoking every live key for `reason`, in key id order.
    pub(super) fn key_revocations(
        &self,
        reason: KeyRevokeReason,
        at: DateTime<Utc>,
    ) -> Vec<AccountEvent> {
        self.api_keys
            .keys()
            .map(|key_id| revocation(key_id, reason, at))
            .collect()
    }

    /// Refuses a new key when `kept` keys stay beside it and that is the cap.
    fn ensure_room(&self, kept: usize, max_keys: usize) -> Result<(), AccountError> {
        // A cap of 0 would make the singular route unusable: one key always fits.
        let max = max_keys.max(1);
        if kept >= max {
            return Err(AccountError::TooManyApiKeys { max });
        }
        Ok(())
    }
}

fn revocation(key_id: &str, reason: KeyRevokeReason, at: DateTime<Utc>) -> AccountEvent {
    AccountEvent::ApiKeyRevoked {
        key_id: key_id.to_owned(),
        reason,
        at,
    }
}
