//! §4.1 accounts and authentication: sign-in and sessions ([`session`]),
//! API keys ([`api_keys`]), MFA ([`mfa`]), sign-up and organizations ([`signup`]), admin controls
//! ([`admin`]) and the OAuth 2.0 token endpoint ([`token`]).

mod admin;
mod api_keys;
mod mfa;
pub mod session;
mod signup;
mod token;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use agon_aggregates::account::Device;
use agon_projections::accounts::AccountView;
use axum::extract::{ConnectInfo, FromRef, FromRequestParts};
use axum::http::header::USER_AGENT;
use axum::http::request::Parts;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ApiError;
use super::ratelimit::client_ip;
use super::routes::Routes;
use crate::auth::device;
use crate::http::state::HttpState;

pub fn routes() -> Routes {
    Routes::new()
        .merge(session::routes())
        .merge(api_keys::routes())
        .merge(mfa::routes())
        .merge(signup::routes())
        .merge(admin::routes())
        .merge(token::routes())
}

/// The device a request comes from (User-Agent and client address).
#[derive(Debug, Clone)]
pub struct ClientDevice(pub Device);

impl<S> FromRequestParts<S> for ClientDevice
where
    S: Send + Sync,
    HttpState: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let http = HttpState::from_ref(state);
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
        let ip = client_ip(
            peer,
            &parts.headers,
            &http.limiter.settings().trusted_proxies,
        );
        let agent = parts.headers.get(USER_AGENT).and_then(|v| v.to_str().ok());
        Ok(ClientDevice(device::describe(agent, Some(ip.to_string()))))
    }
}

/// A user as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct UserProfile {
    pub id: String,
    pub user_id: String,
    pub email: String,
    pub name: String,
    /// `user` or `admin`.
    pub role: String,
    pub email_verified: bool,
    pub mfa_enabled: bool,
    pub org_id: Option<String>,
    pub org_role: Option<String>,
    /// Whether the user holds any live API key (the `default` one or a named one).
    pub has_api_key: bool,
    pub created_at: DateTime<Utc>,
    pub last_login_at: Option<DateTime<Utc>>,
    /// Identity providers that sign in to this account (`extidp`, `sso`).
    pub linked_providers: Vec<String>,
}

impl From<AccountView> for UserProfile {
    fn from(view: AccountView) -> Self {
        let has_api_key = view.has_api_key();
        Self {
            id: view.user_id.clone(),
            user_id: view.user_id,
            email: view.email,
            name: view.name,
            role: view.role.as_str().to_owned(),
            email_verified: view.email_verified,
            mfa_enabled: view.mfa_enabled,
            org_id: view.org_id,
            org_role: view.org_role,
            has_api_key,
            created_at: view.created_at,
            last_login_at: view.last_login_at,
            linked_providers: view.linked_providers.into_iter().collect(),
        }
    }
}

/// A plain acknowledgement.
#[derive(Debug, Serialize, ToSchema)]
pub struct Done {
    pub success: bool,
    pub message: String,
}

impl Done {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            success: true,
            message: message.into(),
        }
    }
}

impl UserProfile {
    /// The profile straight from the account's state (no read-model lag).
    pub fn of(account: &agon_aggregates::account::Account) -> Self {
        Self {
            id: account.user_id.clone(),
            user_id: account.user_id.clone(),
            email: account.email.clone(),
            name: account.name.clone(),
            role: account.role.as_str().to_owned(),
            email_verified: account.email_verified,
            mfa_enabled: account.mfa.enabled,
            org_id: account.org_id.clone(),
            org_role: account.org_role.clone(),
            has_api_key: !account.api_keys.is_empty(),
            created_at: account.created_at.unwrap_or_default(),
            last_login_at: account.last_login_at,
            linked_providers: account.identities.keys().cloned().collect(),
        }
    }
}
