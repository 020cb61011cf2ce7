//! API key documents, one per key id: what key sign-in reads (by the id in
//! the presented key) and what the owner's key list shows. A revoked key
//! keeps its document, marked revoked, so that sign-in and the commands
//! that revoke keys can tell "revoked" from "not projected yet".

use agon_aggregates::account::{AccountEvent, DEFAULT_KEY_NAME, KeyRevokeReason};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::account_event;
use crate::{DecodeError, DocumentProjection, EventRecord};

/// The listing state of a key that still works.
pub const LIVE: &str = "live";
/// The listing state of a revoked key.
pub const REVOKED: &str = "revoked";

/// One API key as stored: never the secret, only its hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiKeyDoc {
    pub key_id: String,
    pub user_id: String,
    pub name: String,
    /// Hex SHA-256 of the key's secret part.
    pub key_hash: String,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub revoked_reason: Option<KeyRevokeReason>,
}

impl ApiKeyDoc {
    pub fn is_live(&self) -> bool {
        self.revoked_at.is_none()
    }
}

/// Projection of API keys, one document per key id, owned by its user.
pub struct ApiKeys;

impl DocumentProjection for ApiKeys {
    const NAME: &'static str = "api_keys";
    type Doc = ApiKeyDoc;

    fn key(event: &EventRecord) -> Result<Option<String>, DecodeError> {
        Ok(match account_event(event)? {
            Some(
                AccountEvent::ApiKeyCreated { key_id, .. }
                | AccountEvent::NamedApiKeyCreated { key_id, .. }
                | AccountEvent::ApiKeyRevoked { key_id, .. },
            ) => Some(key_id),
            _ => None,
        })
    }

    fn apply(
        doc: Option<ApiKeyDoc>,
        event: &EventRecord,
    ) -> Result<Option<ApiKeyDoc>, DecodeError> {
        let Some(change) = account_event(event)? else {
            return Ok(doc);
        };
        let created = |key_id: String, name: String, key_hash: String, at: DateTime<Utc>| {
            Some(ApiKeyDoc {
                key_id,
                user_id: event.aggregate_id.clone(),
                name,
                key_hash,
                created_at: at,
                revoked_at: None,
                revoked_reason: None,
            })
        };
        Ok(match (change, doc) {
            (
                AccountEvent::ApiKeyCreated {
                    key_id,
                    key_hash,
                    at,
                },
                _,
            ) => created(key_id, DEFAULT_KEY_NAME.to_owned(), key_hash, at),
            (
                AccountEvent::NamedApiKeyCreated {
                    key_id,
                    name,
                    key_hash,
                    at,
                },
                _,
            ) => created(key_id, name, key_hash, at),
            (AccountEvent::ApiKeyRevoked { reason, at, .. }, Some(mut doc)) => {
                doc.revoked_at = Some(at);
                doc.revoked_reason = Some(reason);
                Some(doc)
            }
            (_, doc) => doc,
        })
    }

    fn owner(doc: &ApiKeyDoc) -> Option<String> {
        Some(doc.user_id.clone())
    }

    /// `live` or `revoked`, so that the owner's list reads only live keys
    /// however many revoked ones pile up.
    fn state(doc: &ApiKeyDoc) -> Option<String> {
        Some(if doc.is_live() { LIVE } else { REVOKED }.to_owned())
    }

    /// Creation time, then id: RFC 3339 in UTC with fixed precision sorts as text.
    fn sort_key(doc: &ApiKeyDoc) -> Option<String> {
        Some(format!(
            "{}|{}",
            doc.created_at
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            doc.key_id
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{account, at, fold};
    use super::*;

    #[test]
    fn a_key_document_has_its_name_owner_and_revocation() {
        let legacy = account(
            "u1",
            2,
            AccountEvent::ApiKeyCreated {
                key_id: "k1".to_owned(),
                key_hash: "h1".to_owned(),
                at: at(),
            },
        );
        assert_eq!(ApiKeys::key(&legacy).ok().flatten().as_deref(), Some("k1"));
        let view =
            fold::<ApiKeys>(std::slice::from_ref(&legacy)).unwrap_or_else(|| panic!("no key"));
        assert_eq!(
            (view.name.as_str(), view.user_id.as_str()),
            ("default", "u1")
        );

        let named = account(
            "u1",
            3,
            AccountEvent::NamedApiKeyCreated {
                key_id: "k2".to_owned(),
                name: "ci".to_owned(),
                key_hash: "h2".to_owned(),
                at: at(),
            },
        );
        let revoked = account(
            "u1",
            4,
            AccountEvent::ApiKeyRevoked {
                key_id: "k2".to_owned(),
                reason: KeyRevokeReason::Revoked,
                at: at(),
            },
        );
        let live =
            fold::<ApiKeys>(std::slice::from_ref(&named)).unwrap_or_else(|| panic!("no key"));
        assert!(live.is_live());
        assert_eq!(ApiKeys::owner(&live).as_deref(), Some("u1"));
        let view = fold::<ApiKeys>(&[named, revoked]).unwrap_or_else(|| panic!("no key"));
        assert_eq!(view.name, "ci");
        assert!(!view.is_live());
        assert_eq!(ApiKeys::state(&view).as_deref(), Some(REVOKED));
        assert_eq!(view.revoked_reason, Some(KeyRevokeReason::Revoked));
    }
}
