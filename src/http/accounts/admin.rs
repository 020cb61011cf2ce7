//! Admin controls over accounts: lock status, unlock, MFA reset, disable,
//! revoke everything.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::Done;
use crate::app::App;
use crate::auth::Caller;
use crate::auth::admin::LockoutStatus;
use crate::auth::rbac::Permission;
use crate::http::error::ApiError;
use crate::http::extract::ApiPath;
use crate::http::ratelimit::Action;
use crate::http::routes::{RouteSpec, Routes};

pub fn routes() -> Routes {
    let admin = || {
        RouteSpec::new()
            .requires(Permission::Admin)
            .action(Action::Admin)
    };
    let legacy_admin = || {
        RouteSpec::unversioned()
            .requires(Permission::Admin)
            .action(Action::Admin)
    };
    Routes::new()
        .add(routes!(lockout_status), admin())
        .add(routes!(unlock_user), admin())
        .add(routes!(reset_user_mfa), admin())
        .add(routes!(disable_user), legacy_admin())
        .add(routes!(revoke_user_tokens), legacy_admin())
}

/// A user's lock: `locked_until`, remaining seconds, failed login count.
#[utoipa::path(get, path = "/api/v2/admin/users/{user_id}/lockout-status", tag = "admin",
    params(("user_id" = String, Path)),
    responses((status = 200, body = LockoutStatus)))]
async fn lockout_status(
    State(app): State<App>,
    ApiPath(user_id): ApiPath<String>,
) -> Result<Json<LockoutStatus>, ApiError> {
    Ok(Json(app.auth.lockout_status(&user_id).await?))
}

/// Clears a user's lock and failed login count.
#[utoipa::path(post, path = "/api/v2/admin/users/{user_id}/unlock", tag = "admin",
    params(("user_id" = String, Path)),
    responses((status = 200, body = LockoutStatus)))]
async fn unlock_user(
    State(app): State<App>,
    caller: Caller,
    ApiPath(user_id): ApiPath<String>,
) -> Result<Json<LockoutStatus>, ApiError> {
    Ok(Json(app.auth.unlock(&caller.user_id, &user_id).await?))
}

/// Resets a user's MFA (a lost authenticator).
#[utoipa::path(delete, path = "/api/v2/admin/users/{user_id}/mfa", tag = "admin",
    params(("user_id" = String, Path)),
    responses((status = 200, body = Done), (status = 409, description = "MFA is not enabled")))]
async fn reset_user_mfa(
    State(app): State<App>,
    caller: Caller,
    ApiPath(user_id): ApiPath<String>,
) -> Result<Json<Done>, ApiError> {
    app.auth.reset_mfa(&caller.user_id, &user_id).await?;
    Ok(Json(Done::new("MFA reset")))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AccountAction {
    pub success: bool,
    pub user_id: String,
    /// Sessions that ended.
    pub sessions_revoked: usize,
}

/// Disables a user: sign-in refused, sessions and API key revoked.
#[utoipa::path(post, path = "/admin/users/{id}/disable", tag = "admin",
    params(("id" = String, Path)),
    responses((status = 200, body = AccountAction)))]
async fn disable_user(
    State(app): State<App>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<AccountAction>, ApiError> {
    let sessions_revoked = app.auth.disable(&caller.user_id, &id).await?;
    Ok(Json(AccountAction {
        success: true,
        user_id: id,
        sessions_revoked,
    }))
}

/// Revokes every session and the API key of a user.
#[utoipa::path(post, path = "/admin/users/{id}/revoke-all", tag = "admin",
    params(("id" = String, Path)),
    responses((status = 200, body = AccountAction)))]
async fn revoke_user_tokens(
    State(app): State<App>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<AccountAction>, ApiError> {
    let sessions_revoked = app.auth.revoke_all(&caller.user_id, &id).await?;
    Ok(Json(AccountAction {
        success: true,
        user_id: id,
        sessions_revoked,
    }))
}
