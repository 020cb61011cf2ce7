//! Account and session documents: what `me`, the session list, admin
//! lockout status and API-key sign-in read.

use agon_aggregates::account::{AccountEvent, Device, RevokeReason, Role};
use agon_aggregates::organization::OrganizationEvent;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{DocumentProjection, EventRecord};

/// The aggregate type of accounts.
pub const ACCOUNT_AGGREGATE: &str = "account";
/// The aggregate type of organizations.
pub const ORGANIZATION_AGGREGATE: &str = "organization";

fn account_event(event: &EventRecord) -> Option<AccountEvent> {
    if event.aggregate_type != ACCOUNT_AGGREGATE {
        return None;
    }
    serde_json::from_value(event.payload.clone()).ok()
}

/// An account's API key as stored: its id and the hash of its secret.
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
    pub email: String,
    pub name: String,
    pub role: Role,
    pub email_verified: bool,
    pub org_id: Option<String>,
    pub org_role: Option<String>,
    pub mfa_enabled: bool,
    pub disabled: bool,
    pub failed_login_count: u32,
    pub locked_until: Option<DateTime<Utc>>,
    pub api_key: Option<ApiKeyView>,
    pub created_at: DateTime<Utc>,
    pub last_login_at: Option<DateTime<Utc>>,
}

/// Projection of accounts, one document per user, found by API key id too.
pub struct Accounts;

impl DocumentProjection for Accounts {
    const NAME: &'static str = "accounts";
    type Doc = AccountView;

    fn key(event: &EventRecord) -> Option<String> {
        (event.aggregate_type == ACCOUNT_AGGREGATE).then(|| event.aggregate_id.clone())
    }

    fn apply(doc: Option<AccountView>, event: &EventRecord) -> Option<AccountView> {
        use AccountEvent as E;
        let Some(change) = account_event(event) else {
            return doc;
        };
        if let E::Registered {
            user_id,
            email,
            name,
            role,
            email_verified,
            at,
            ..
        } = change
        {
            return Some(AccountView {
                user_id,
                email,
                name,
                role,
                email_verified,
                org_id: None,
                org_role: None,
                mfa_enabled: false,
                disabled: false,
                failed_login_count: 0,
                locked_until: None,
                api_key: None,
                created_at: at,
                last_login_at: None,
            });
        }
        let mut view = doc?;
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
            E::LoginSucceeded { at, .. } => {
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
            E::ApiKeyRevoked { .. } => view.api_key = None,
            E::UserDisabled { .. } => view.disabled = true,
            E::RoleChanged { role, .. } => view.role = role,
            E::JoinedOrganization {
                org_id, org_role, ..
            } => {
                view.org_id = Some(org_id);
                view.org_role = Some(org_role);
            }
            E::Registered { .. }
            | E::VerificationIssued { .. }
            | E::SessionStarted { .. }
            | E::SessionRefreshed { .. }
            | E::SessionRevoked { .. }
            | E::PasswordChanged { .. }
            | E::MfaSetupStarted { .. } => {}
        }
        Some(view)
    }

    fn owner(doc: &AccountView) -> Option<String> {
        Some(doc.user_id.clone())
    }

    fn lookup(doc: &AccountView) -> Option<String> {
        doc.api_key.as_ref().map(|key| key.key_id.clone())
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

    fn key(event: &EventRecord) -> Option<String> {
        match account_event(event)? {
            AccountEvent::SessionStarted { session_id, .. }
            | AccountEvent::SessionRefreshed { session_id, .. }
            | AccountEvent::SessionRevoked { session_id, .. } => Some(session_id),
            _ => None,
        }
    }

    fn apply(doc: Option<SessionView>, event: &EventRecord) -> Option<SessionView> {
        let Some(change) = account_event(event) else {
            return doc;
        };
        match (change, doc) {
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
        }
    }

    fn owner(doc: &SessionView) -> Option<String> {
        Some(doc.user_id.clone())
    }
}

/// An organization's name, for invitations and `me`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrganizationView {
    pub org_id: String,
    pub name: String,
    pub owner_id: String,
    pub members: u64,
    pub created_at: DateTime<Utc>,
}

/// Projection of organizations, one document per organization.
pub struct Organizations;

impl DocumentProjection for Organizations {
    const NAME: &'static str = "organizations";
    type Doc = OrganizationView;

    fn key(event: &EventRecord) -> Option<String> {
        (event.aggregate_type == ORGANIZATION_AGGREGATE).then(|| event.aggregate_id.clone())
    }

    fn apply(doc: Option<OrganizationView>, event: &EventRecord) -> Option<OrganizationView> {
        let Ok(change) = serde_json::from_value::<OrganizationEvent>(event.payload.clone()) else {
            return doc;
        };
        match (change, doc) {
            (
                OrganizationEvent::OrganizationCreated {
                    org_id,
                    name,
                    owner_id,
                    at,
                },
                _,
            ) => Some(OrganizationView {
                org_id,
                name,
                owner_id,
                members: 1,
                created_at: at,
            }),
            (OrganizationEvent::InviteAccepted { .. }, Some(mut view)) => {
                view.members += 1;
                Some(view)
            }
            (_, doc) => doc,
        }
    }

    fn owner(doc: &OrganizationView) -> Option<String> {
        Some(doc.owner_id.clone())
    }
}
