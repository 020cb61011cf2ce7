//! Operations endpoints of §4.3 that the platform itself serves: recent
//! errors and the rate limiter's configuration and state.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::response::IntoResponse;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::ApiQuery;
use super::ratelimit::{Action, AuthPath, Backend, PathLimit, Principal, Quota, Tier};
use super::recent_errors::RecordedError;
use super::routes::{RouteSpec, RouteTable, Routes};
use super::version::ListLinks;
use crate::auth::rbac::Permission;
use crate::http::state::HttpState;

fn admin() -> RouteSpec {
    RouteSpec::new().requires(Permission::Admin)
}

pub fn routes() -> Routes {
    Routes::new()
        // Other users' paths and messages, the limiter's state and its
        // configuration are operations data: admins only. Each caller may
        // still read their own buckets (`/api/rate-limit/status`).
        .add(routes!(recent_errors), admin())
        .add(routes!(system_rate_limits), admin())
        .add(routes!(rate_limit_config), admin())
        .add(routes!(rate_limit_status), RouteSpec::new())
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ErrorsQuery {
    /// How many errors, newest first: 1 to SERVICE_RECENT_ERRORS (default
    /// 200), the most held; default 20.
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RecentErrorsPage {
    pub errors: Vec<RecordedError>,
    /// Errors held now.
    pub total: usize,
    /// The most that are held.
    pub capacity: usize,
}

/// The latest error responses, newest first.
#[utoipa::path(get, path = "/api/system/errors", tag = "operations", params(ErrorsQuery),
    responses((status = 200, body = RecentErrorsPage)))]
async fn recent_errors(
    State(http): State<HttpState>,
    ApiQuery(query): ApiQuery<ErrorsQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let capacity = http.recent_errors.capacity();
    let limit = query.limit.unwrap_or(20.min(capacity as u32));
    if !(1..=capacity).contains(&(limit as usize)) {
        return Err(ApiError::bad_request(format!(
            "limit must be between 1 and {capacity}, not {limit}"
        )));
    }
    let (errors, total) = http.recent_errors.latest(limit as usize);
    let page = RecentErrorsPage {
        errors,
        total,
        capacity,
    };
    Ok((Extension(ListLinks::default()), Json(page)))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LimiterState {
    pub backend: Backend,
    /// `not_configured`, `healthy` or `unavailable`.
    pub redis: &'static str,
    pub fail_open: bool,
    /// Buckets this replica holds in memory that are not full.
    pub buckets_in_memory: usize,
    /// Bucket checks since start.
    pub checks: u64,
    /// Requests refused since start.
    pub rejections: u64,
    /// Checks passed uncounted while Redis was away (fail open).
    pub uncounted: u64,
}

/// The limiter's live state on this replica.
#[utoipa::path(get, path = "/api/system/rate-limits", tag = "operations",
    responses((status = 200, body = LimiterState)))]
async fn system_rate_limits(State(http): State<HttpState>) -> Json<LimiterState> {
    let limiter = &http.limiter;
    let (checks, rejections, uncounted) = limiter.totals();
    Json(LimiterState {
        backend: limiter.backend(),
        redis: limiter.redis_status(),
        fail_open: limiter.settings().fail_open,
        buckets_in_memory: limiter.tracked_in_memory(),
        checks,
        rejections,
        uncounted,
    })
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EndpointLimit {
    pub path: String,
    pub quota: Quota,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RateLimitConfig {
    pub backend: Backend,
    pub redis_configured: bool,
    pub fail_open: bool,
    pub burst_multiplier: f64,
    pub trusted_proxies: Vec<String>,
    /// Every request, per client address.
    pub per_ip: Quota,
    /// Per authenticated user and action.
    pub actions: BTreeMap<&'static str, Quota>,
    /// Replace the `default` action bucket for users with a tier.
    pub tiers: BTreeMap<&'static str, Quota>,
    /// Sign-in paths, per client address, no burst.
    pub auth_paths: BTreeMap<&'static str, Quota>,
    /// Routes with their own limit, per caller.
    pub endpoints: Vec<EndpointLimit>,
}

/// The limits in force and where they are counted.
#[utoipa::path(get, path = "/api/rate-limits/config", tag = "operations",
    responses((status = 200, body = RateLimitConfig)))]
async fn rate_limit_config(
    State(http): State<HttpState>,
    Extension(table): Extension<Arc<RouteTable>>,
) -> Json<RateLimitConfig> {
    let limiter = &http.limiter;
    let settings = limiter.settings();
    let endpoints = table
        .mounts()
        .iter()
        .filter_map(|mount| match mount.limit {
            Some(PathLimit::Endpoint(endpoint)) => Some(EndpointLimit {
                path: mount.path.clone(),
                quota: limiter.endpoint_quota(endpoint),
            }),
            _ => None,
        })
        .collect();
    let auth_paths = AuthPath::ALL
        .into_iter()
        .map(|path| (path.name(), limiter.auth_quota(path)))
        .collect();
    Json(RateLimitConfig {
        backend: limiter.backend(),
        redis_configured: settings.redis_url.is_some(),
        fail_open: settings.fail_open,
        burst_multiplier: settings.burst_multiplier,
        trusted_proxies: settings
            .trusted_proxies
            .iter()
            .map(ToString::to_string)
            .collect(),
        per_ip: limiter.ip_quota(),
        actions: Action::ALL
            .into_iter()
            .map(|a| (a.name(), limiter.action_quota(a, None)))
            .collect(),
        tiers: Tier::ALL
            .into_iter()
            .map(|t| (t.name(), t.quota()))
            .collect(),
        auth_paths,
        endpoints,
    })
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ActionStatus {
    pub remaining: u32,
    /// Sustained requests per minute.
    pub limit: u32,
    /// Seconds until a request is admitted again; 0 while some remain.
    pub retry_after: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct UserRateStatus {
    pub user_id: String,
    pub limits: BTreeMap<&'static str, ActionStatus>,
}

/// The caller's standing in every action bucket; takes nothing.
#[utoipa::path(get, path = "/api/rate-limit/status", tag = "operations",
    security(("bearerAuth" = [])),
    responses((status = 200, body = UserRateStatus),
        (status = 401, description = "No authenticated caller")))]
async fn rate_limit_status(
    State(http): State<HttpState>,
    principal: Option<Extension<Principal>>,
) -> Result<Json<UserRateStatus>, ApiError> {
    let Some(Extension(principal)) = principal else {
        return Err(ApiError::Unauthorized(
            "Authentication required: per-user limits belong to a signed-in user".to_owned(),
        ));
    };
    let limits = http
        .limiter
        .user_status(&principal)
        .await
        .into_iter()
        .map(|(name, verdict)| {
            let status = ActionStatus {
                remaining: verdict.remaining,
                limit: verdict.limit,
                retry_after: verdict.retry_after_secs(),
            };
            (name, status)
        })
        .collect();
    Ok(Json(UserRateStatus {
        user_id: principal.user_id,
        limits,
    }))
}

/// The bodies of `GET /api/system/rate-limits` and
/// `/api/rate-limits/config` as JSON, for the web console.
pub async fn limiter_json(
    http: &HttpState,
    table: Arc<RouteTable>,
) -> (serde_json::Value, serde_json::Value) {
    let Json(state) = system_rate_limits(State(http.clone())).await;
    let Json(config) = rate_limit_config(State(http.clone()), Extension(table)).await;
    (
        serde_json::to_value(state).unwrap_or_default(),
        serde_json::to_value(config).unwrap_or_default(),
    )
}

/// The body of `GET /api/rate-limit/status` for `user_id`, for the web UI.
pub async fn status_json(http: &HttpState, user_id: &str) -> serde_json::Value {
    let principal = Principal {
        user_id: user_id.to_owned(),
        tier: None,
    };
    match rate_limit_status(State(http.clone()), Some(Extension(principal))).await {
        Ok(Json(status)) => serde_json::to_value(status).unwrap_or_default(),
        Err(_) => serde_json::Value::Null,
    }
}

/// The latest error responses (at most `limit`) as the body of
/// `GET /api/system/errors`, for the web console.
pub fn errors_json(http: &HttpState, limit: usize) -> serde_json::Value {
    let (errors, total) = http.recent_errors.latest(limit);
    serde_json::to_value(RecentErrorsPage {
        errors,
        total,
        capacity: http.recent_errors.capacity(),
    })
    .unwrap_or_default()
}
