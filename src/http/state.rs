//! The state the HTTP face serves from: [`ApiState`] holds the services a
//! handler may take (each through `FromRef`, so a handler names only the
//! one it uses), and [`HttpState`] what only the HTTP layer has: the rate
//! limiter, the recent errors the system endpoints show, and the header
//! limit the error form reports.

use std::sync::Arc;

use axum::extract::FromRef;

use crate::agents::Agents;
use crate::audit::Audit;
use crate::auth::Auth;
use crate::config::Settings;
use crate::debates::Debates;
use crate::http::debates::rendered::RenderedDetails;
use crate::http::ratelimit::{RateLimiter, RedisError};
use crate::http::recent_errors::RecentErrors;
use crate::ops::Ops;
use crate::push::Push;
use crate::receipts::Receipts;
use crate::review::Reviews;
use crate::scm::Scm;
use crate::webhooks::Webhooks;

/// The HTTP layer's own state; cheap to clone.
#[derive(Debug, Clone)]
pub struct HttpState {
    pub limiter: RateLimiter,
    pub recent_errors: RecentErrors,
    /// `SERVICE_MAX_HEADER_BYTES`, named in 431 answers.
    pub max_header_bytes: usize,
    /// Rendered debate details, by the version of their debates.
    pub details: Arc<RenderedDetails>,
    /// How far the health report last found idle projections with nothing
    /// to apply.
    pub lag: Arc<super::health::LagMemo>,
}

impl HttpState {
    pub fn new(settings: &Settings) -> Result<Self, RedisError> {
        Ok(Self {
            limiter: RateLimiter::new(&settings.rate_limits)?,
            recent_errors: RecentErrors::new(settings.http.recent_errors),
            max_header_bytes: settings.http.connections.max_header_bytes,
            details: Arc::new(RenderedDetails::new(settings.http.detail_cache_bytes)),
            lag: Arc::default(),
        })
    }
}

/// What the API's router is built from; the composition root fills it.
#[derive(Debug, Clone)]
pub struct ApiState {
    pub settings: Arc<Settings>,
    pub auth: Auth,
    pub debates: Debates,
    pub ops: Ops,
    pub agents: Agents,
    pub http: HttpState,
    pub push: Push,
    pub webhooks: Webhooks,
    pub reviews: Reviews,
    pub scm: Scm,
    pub receipts: Receipts,
    pub backups: crate::backup::Backups,
    pub audit: Audit,
    pub sso: crate::sso::Sso,
}

macro_rules! substate {
    ($($field:ident: $service:ty),* $(,)?) => {$(
        impl FromRef<ApiState> for $service {
            fn from_ref(state: &ApiState) -> Self {
                state.$field.clone()
            }
        }
    )*};
}

substate!(auth: Auth, debates: Debates, ops: Ops, agents: Agents, http: HttpState, push: Push);
substate!(webhooks: Webhooks);
substate!(reviews: Reviews, scm: Scm);
substate!(receipts: Receipts);
substate!(backups: crate::backup::Backups);
substate!(audit: Audit);
substate!(sso: crate::sso::Sso);
