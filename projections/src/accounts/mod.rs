//! Account and session documents: what `me`, the session list and admin
//! lockout status read; API keys ([`api_keys`]) and organizations
//! ([`organizations`]) are documents of their own.

mod api_keys;
#[cfg(test)]
mod erasure_tests;
mod organizations;

pub use api_keys::{ApiKeyDoc, ApiKeys, LIVE, REVOKED};
pub use organizations::{OrganizationView, Organizations};

use std::collections::BTreeSet;

use agon_aggregates::account::{
    AccountEvent, DEFAULT_KEY_NAME, Device, ERASED, RevokeReason, Role,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{DecodeError, DocumentProjection, EventRecord};

/// The aggregate type of accounts.
pub const ACCOUNT_AGGREGATE: &str = "account";
/// The aggregate type of organizations.
pub const ORGANIZATION_AGGREGATE: &str = "organization";

/// The account event `event` carries; `None` for other aggregates.
fn account_event(event: &EventRecord) -> Result<Option<AccountEvent>, DecodeError> {
    if event.aggregate_type != ACCOUNT_AGGREGATE {
        return Ok(None);
    }
    event.decode().map(Some)
}

/// An account's `default` key (the singular routes'): its id and the hash
/// of its secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiKeyView {
    pub key_id: String,
    pub key_hash: String,
    pub created_at: DateTime<Utc>,
}

/// The public face of an account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccountView {
    pub user_id: String,
    /// As the event holds it: sealed under the user's key since v2 of
    /// `Registered` (the service opens it on read), [`ERASED`] once erased.
    pub email: String,
    pub name: String,
    /// The blind index of the address, for an admin's exact search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email_index: Option<String>,
    /// The account's personal data was erased.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub erased: bool,
    pub role: Role,
    pub email_verified: bool,
    pub org_id: Option<String>,
    pub org_role: Option<String>,
    pub mfa_enabled: bool,
    pub disabled: bool,
    pub failed_login_count: u32,
    pub locked_until: Option<DateTime<Utc>>,
    /// The live key named `default`.
    pub api_key: Option<ApiKeyView>,
    /// Ids of the other live keys. Absent from documents written before
    /// keys had names, which is right: there were no other keys then.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub other_api_keys: BTreeSet<String>,
    pub created_at: DateTime<Utc>,
    pub last_login_at: Option<DateTime<Utc>>,
    /// Providers whose identity signs in as this account (`extidp`, `sso`).
    /// Absent from documents written before identities could be linked.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub linked_providers: BTreeSet<String>,
}

impl AccountView {
    /// Whether the user holds any live API key.
    pub fn has_api_key(&self) -> bool {
        self.api_key.is_some() || !self.other_api_keys.is_empty()
    }
}

/// Projection of accounts, one document per user.
pub struct Accounts;

impl DocumentProjection for Accounts {
    const NAME: &'static str = "accounts";
    type Doc = AccountView;

    fn key(event: &EventRecord) -> Result<Option<String>, DecodeError> {
        Ok((event.aggregate_type == ACCOUNT_AGGREGATE).then(|| event.aggregate_id.clone()))
    }

    fn apply(
        doc: Option<AccountView>,
        event: &EventRecord,
    ) -> Result<Option<AccountView>, DecodeError> {
        use AccountEvent as E;
        let Some(change) = account_event(event)? else {
            return Ok(doc);
        };
        if let E::Registered {
            user_id,
            email,
            name,
            email_index,
            role,
            email_verified,
            at,
            ..
        } = change
        {
            return Ok(Some(AccountView {
                user_id,
                email,
                name,
                email_index,
                erased: false,
                role,
                email_verified,
                org_id: None,
                org_role: None,
                mfa_enabled: false,
                disabled: false,
                failed_login_count: 0,
                locked_until: None,
                api_key: None,
                other_api_keys: BTreeSet::new(),
                created_at: at,
                last_login_at: None,
                linked_providers: BTreeSet::new(),
            }));
        }
        let Some(mut view) = doc else {
            return Ok(None);
        };
        match change {
            E::EmailVerified { .. } => view.email_verified = true,
            E::LoginFailed {
                failed_login_count,
                locked_until,
                ..
            } => {
                view.failed_login_count = failed_login_count;
                view.locked_until = locked_until;
            }
            E::AccountUnlocked { .. } => {
                view.failed_login_count = 0;
                view.locked_until = None;
            }
            E::LoginSucceeded { at, .. } | E::ProviderLoginSucceeded { at, .. } => {
                view.failed_login_count = 0;
                view.locked_until = None;
                view.last_login_at = Some(at);
            }
            E::MfaEnabled { .. } => view.mfa_enabled = true,
            E::MfaDisabled { .. } | E::MfaReset { .. } => view.mfa_enabled = false,
            E::ApiKeyCreated {
                key_id,
                key_hash,
                at,
            } => {
                view.api_key = Some(ApiKeyView {
                    key_id,
                    key_hash,
                    created_at: at,
                });
            }
            E::NamedApiKeyCreated {
                key_id,
                name,
                key_hash,
                at,
            } => {
                if name == DEFAULT_KEY_NAME {
                    view.api_key = Some(ApiKeyView {
                        key_id,
                        key_hash,
                        created_at: at,
                    });
                } else {
                    view.other_api_keys.insert(key_id);
                }
            }
            E::ApiKeyRevoked { key_id, .. } => {
                if view
                    .api_key
                    .as_ref()
                    .is_some_and(|key| key.key_id == key_id)
                {
                    view.api_key = None;
                }
                view.other_api_keys.remove(&key_id);
            }
            E::UserDisabled { .. } => view.disabled = true,
            E::UserEnabled { .. } => view.disabled = false,
            E::RoleChanged { role, .. } => view.role = role,
            E::JoinedOrganization {
                org_id, org_role, ..
            } => {
                view.org_id = Some(org_id);
                view.org_role = Some(org_role);
            }
            E::IdentityLinked { provider, .. } => {
                view.linked_providers.insert(provider);
            }
            E::IdentityUnlinked { provider, .. } => {
                view.linked_providers.remove(&provider);
            }
            E::Erased { .. } => {
                view.linked_providers.clear();
                view.erased = true;
                view.email = ERASED.to_owned();
                view.name = ERASED.to_owned();
                view.email_index = None;
                view.mfa_enabled = false;
            }
            E::Registered { .. }
            | E::VerificationIssued { .. }
            | E::SessionStarted { .. }
            | E::SessionRefreshed { .. }
            | E::SessionRevoked { .. }
            | E::PasswordChanged { .. }
            | E::MfaSetupStarted { .. }
            | E::AttemptStarted { .. }
            | E::AttemptEnded { .. }
            | E::ReauthFailed { .. }
            | E::MfaTokenSpent { .. }
            | E::ProviderLoginRefused { .. } => {}
        }
        Ok(Some(view))
    }

    fn owner(doc: &AccountView) -> Option<String> {
        Some(doc.user_id.clone())
    }
}

/// One session as the owner and the token check see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionView {
    pub session_id: String,
    pub user_id: String,
    pub device: Device,
    pub created_at: DateTime<Utc>,
    pub refreshed_at: Option<DateTime<Utc>>,
    pub refresh_expires_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub revoked_reason: Option<RevokeReason>,
}

/// Projection of sessions, one document per session id, owned by its user.
pub struct Sessions;

impl DocumentProjection for Sessions {
    const NAME: &'static str = "sessions";
    type Doc = SessionView;

    fn key(event: &EventRecord) -> Result<Option<String>, DecodeError> {
        Ok(match account_event(event)? {
            Some(
                AccountEvent::SessionStarted { session_id, .. }
                | AccountEvent::SessionRefreshed { session_id, .. }
                | AccountEvent::SessionRevoked { session_id, .. },
            ) => Some(session_id),
            _ => None,
        })
    }

    fn apply(
        doc: Option<SessionView>,
        event: &EventRecord,
    ) -> Result<Option<SessionView>, DecodeError> {
        let Some(change) = account_event(event)? else {
            return Ok(doc);
        };
        Ok(match (change, doc) {
            (
                AccountEvent::SessionStarted {
                    session_id,
                    device,
                    refresh_expires_at,
                    at,
                },
                _,
            ) => Some(SessionView {
                session_id,
                user_id: event.aggregate_id.clone(),
                device,
                created_at: at,
                refreshed_at: None,
                refresh_expires_at,
                revoked_at: None,
                revoked_reason: None,
            }),
            (
                AccountEvent::SessionRefreshed {
                    refresh_expires_at,
                    at,
                    ..
                },
                Some(mut view),
            ) => {
                view.refreshed_at = Some(at);
                view.refresh_expires_at = refresh_expires_at;
                Some(view)
            }
            (AccountEvent::SessionRevoked { reason, at, .. }, Some(mut view)) => {
                view.revoked_at = Some(at);
                view.revoked_reason = Some(reason);
                Some(view)
            }
            (_, doc) => doc,
        })
    }

    fn owner(doc: &SessionView) -> Option<String> {
        Some(doc.user_id.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cursor;
    use chrono::TimeZone;
    use serde_json::{Value, json};

    pub(super) fn at() -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000, 0)
            .single()
            .unwrap_or_default()
    }

    pub(super) fn record(
        aggregate_type: &str,
        id: &str,
        sequence: i64,
        payload: Value,
    ) -> EventRecord {
        EventRecord {
            cursor: Cursor::START,
            event_id: format!("{id}-{sequence}"),
            aggregate_type: aggregate_type.to_owned(),
            aggregate_id: id.to_owned(),
            sequence,
            event_type: String::new(),
            event_version: "1".to_owned(),
            payload,
            metadata: json!({}),
            hash: String::new(),
        }
    }

    pub(super) fn account(id: &str, sequence: i64, event: AccountEvent) -> EventRecord {
        record(
            ACCOUNT_AGGREGATE,
            id,
            sequence,
            serde_json::to_value(event).unwrap_or_default(),
        )
    }

    fn registered() -> AccountEvent {
        AccountEvent::Registered {
            user_id: "u1".to_owned(),
            email: "a@example.com".to_owned(),
            name: "A".to_owned(),
            email_index: None,
            password_hash: "h".to_owned(),
            role: Role::User,
            email_verified: false,
            at: at(),
        }
    }

    pub(super) fn fold<P: DocumentProjection>(events: &[EventRecord]) -> Option<P::Doc> {
        events
            .iter()
            .try_fold(None, |doc, e| P::apply(doc, e))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn an_account_document_follows_lockout_keys_and_disable() {
        let events = [
            account("u1", 1, registered()),
            account(
                "u1",
                2,
                AccountEvent::LoginFailed {
                    reason: agon_aggregates::account::FailureReason::Password,
                    failed_login_count: 5,
                    locked_until: Some(at()),
                    at: at(),
                },
            ),
            account(
                "u1",
                3,
                AccountEvent::ApiKeyCreated {
                    key_id: "k1".to_owned(),
                    key_hash: "kh".to_owned(),
                    at: at(),
                },
            ),
        ];
        let view = fold::<Accounts>(&events).unwrap_or_else(|| panic!("no document"));
        assert_eq!(view.failed_login_count, 5);
        assert_eq!(view.locked_until, Some(at()));
        assert_eq!(view.api_key.as_ref().map(|k| k.key_id.as_str()), Some("k1"));
        assert!(view.has_api_key());
        let named = AccountEvent::NamedApiKeyCreated {
            key_id: "k2".to_owned(),
            name: "ci".to_owned(),
            key_hash: "kh2".to_owned(),
            at: at(),
        };
        let revoke = |key_id: &str| AccountEvent::ApiKeyRevoked {
            key_id: key_id.to_owned(),
            reason: agon_aggregates::account::KeyRevokeReason::Revoked,
            at: at(),
        };
        let keys = [account("u1", 4, named), account("u1", 5, revoke("k1"))];
        let view = keys
            .iter()
            .try_fold(view, |doc, e| Accounts::apply(Some(doc), e).ok().flatten())
            .unwrap_or_else(|| panic!("document lost"));
        assert_eq!(view.api_key, None);
        assert!(view.has_api_key(), "the named key is left");
        let view = Accounts::apply(Some(view), &account("u1", 6, revoke("k2")))
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("document lost"));
        assert!(!view.has_api_key());
        let disabled = Accounts::apply(
            Some(view),
            &account(
                "u1",
                7,
                AccountEvent::UserDisabled {
                    by: "admin".to_owned(),
                    at: at(),
                },
            ),
        )
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("document lost"));
        assert!(disabled.disabled);
        assert_eq!(
            Accounts::key(&record("debate", "d", 1, json!({}))).ok(),
            Some(None)
        );
    }

    #[test]
    fn a_session_document_records_its_revocation() {
        let started = account(
            "u1",
            2,
            AccountEvent::SessionStarted {
                session_id: "s1".to_owned(),
                device: Device::default(),
                refresh_expires_at: at(),
                at: at(),
            },
        );
        assert_eq!(
            Sessions::key(&started).ok().flatten().as_deref(),
            Some("s1")
        );
        let revoked = account(
            "u1",
            3,
            AccountEvent::SessionRevoked {
                session_id: "s1".to_owned(),
                reason: RevokeReason::Logout,
                at: at(),
            },
        );
        let view = fold::<Sessions>(&[started, revoked]).unwrap_or_else(|| panic!("no session"));
        assert_eq!(view.user_id, "u1");
        assert_eq!(view.revoked_reason, Some(RevokeReason::Logout));
        assert_eq!(
            Sessions::key(&account("u1", 1, registered())).ok(),
            Some(None)
        );
    }
}
