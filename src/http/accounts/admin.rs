//! Admin controls over accounts: the user directory, lock status, unlock,
//! MFA reset, disable and enable, revoke everything, erase.

use agon_projections::accounts::AccountView;
use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use super::Done;
use crate::auth::admin::LockoutStatus;
use crate::auth::rbac::Permission;
use crate::auth::{Auth, AuthError, Caller};
use crate::http::error::ApiError;
use crate::http::extract::{ApiPath, ApiQuery};
use crate::http::paging::Paging;
use crate::http::ratelimit::Action;
use crate::http::routes::{RouteSpec, Routes};
use crate::http::shared::Shared;
use agon_aggregates::ids::UserId;

pub fn routes() -> Routes {
    let admin = || {
        RouteSpec::new()
            .requires(Permission::Admin)
            .action(Action::Admin)
            .oauth_under_v2()
    };
    let legacy_admin = || {
        RouteSpec::unversioned()
            .requires(Permission::Admin)
            .action(Action::Admin)
    };
    Routes::new()
        .add(routes!(list_users), admin())
        .add(routes!(lockout_status), admin())
        .add(routes!(unlock_user), admin())
        .add(routes!(reset_user_mfa), admin())
        .add(routes!(disable_user), legacy_admin())
        .add(routes!(enable_user), legacy_admin())
        .add(routes!(revoke_user_tokens), legacy_admin())
        .add(routes!(erase_user), legacy_admin())
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct UsersQuery {
    /// Only users whose email or name contains this text (any case).
    #[param(max_length = 254)]
    pub search: Option<String>,
    /// Page size, default 20, at most SERVICE_MAX_PAGE_SIZE (default 100).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    #[param(minimum = 0)]
    pub offset: Option<i64>,
}

/// A user as admins see it in the directory.
#[derive(Debug, Serialize, ToSchema)]
pub struct AdminUser {
    pub user_id: String,
    pub email: String,
    pub name: String,
    /// `user` or `admin`.
    pub role: String,
    pub email_verified: bool,
    pub mfa_enabled: bool,
    pub disabled: bool,
    pub failed_login_count: u32,
    pub locked_until: Option<DateTime<Utc>>,
    pub org_id: Option<String>,
    pub has_api_key: bool,
    pub created_at: DateTime<Utc>,
    pub last_login_at: Option<DateTime<Utc>>,
}

impl From<AccountView> for AdminUser {
    fn from(view: AccountView) -> Self {
        let has_api_key = view.has_api_key();
        Self {
            user_id: view.user_id,
            email: view.email,
            name: view.name,
            role: view.role.as_str().to_owned(),
            email_verified: view.email_verified,
            mfa_enabled: view.mfa_enabled,
            disabled: view.disabled,
            failed_login_count: view.failed_login_count,
            locked_until: view.locked_until,
            org_id: view.org_id,
            has_api_key,
            created_at: view.created_at,
            last_login_at: view.last_login_at,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct UserList {
    #[schema(value_type = Vec<AdminUser>)]
    pub users: Shared<AdminUser>,
    /// The same page (where paginating clients read it).
    #[schema(value_type = Vec<AdminUser>)]
    pub items: Shared<AdminUser>,
    /// Users matching the search, over all pages.
    pub total: u64,
    pub count: usize,
    pub limit: u32,
    pub offset: u64,
}

/// Lists users, newest first; `search` narrows to emails or names
/// containing it.
#[utoipa::path(get, path = "/api/admin/users", tag = "admin", params(UsersQuery),
    responses((status = 200, body = UserList),
        (status = 400, description = "limit or offset out of range"),
        (status = 422, description = "search longer than 254 characters")))]
async fn list_users(
    State(auth): State<Auth>,
    State(paging): State<Paging>,
    ApiQuery(query): ApiQuery<UsersQuery>,
) -> Result<Json<UserList>, ApiError> {
    let limit = paging.limit(query.limit)?;
    let offset = u64::try_from(query.offset.unwrap_or(0))
        .map_err(|_| ApiError::bad_request("offset must not be negative"))?;
    let search = query.search.as_deref();
    let (users, total) = auth.list_users(search, limit, offset).await?;
    let count = users.len();
    // v2 adds `links` from total, limit and offset (context.rs).
    let users = Shared::new(users.into_iter().map(AdminUser::from).collect());
    Ok(Json(UserList {
        items: users.clone(),
        users,
        total,
        count,
        limit,
        offset,
    }))
}

/// The user a path names; text no user id can be names no user (404).
fn user(text: &str) -> Result<UserId, ApiError> {
    UserId::parse(text).map_err(|_| {
        ApiError::from(AuthError::NotFound {
            resource_type: "user",
            resource_id: text.to_owned(),
        })
    })
}

/// A user's lock: `locked_until`, remaining seconds, failed login count.
#[utoipa::path(get, path = "/api/v2/admin/users/{user_id}/lockout-status", tag = "admin",
    params(("user_id" = String, Path)),
    responses((status = 200, body = LockoutStatus)))]
async fn lockout_status(
    State(auth): State<Auth>,
    ApiPath(user_id): ApiPath<String>,
) -> Result<Json<LockoutStatus>, ApiError> {
    Ok(Json(auth.lockout_status(&user(&user_id)?).await?))
}

/// Clears a user's lock and failed login count.
#[utoipa::path(post, path = "/api/v2/admin/users/{user_id}/unlock", tag = "admin",
    params(("user_id" = String, Path)),
    responses((status = 200, body = LockoutStatus)))]
async fn unlock_user(
    State(auth): State<Auth>,
    caller: Caller,
    ApiPath(user_id): ApiPath<String>,
) -> Result<Json<LockoutStatus>, ApiError> {
    Ok(Json(auth.unlock(&caller.user_id, &user(&user_id)?).await?))
}

/// Resets a user's MFA (a lost authenticator).
#[utoipa::path(delete, path = "/api/v2/admin/users/{user_id}/mfa", tag = "admin",
    params(("user_id" = String, Path)),
    responses((status = 200, body = Done), (status = 409, description = "MFA is not enabled")))]
async fn reset_user_mfa(
    State(auth): State<Auth>,
    caller: Caller,
    ApiPath(user_id): ApiPath<String>,
) -> Result<Json<Done>, ApiError> {
    auth.reset_mfa(&caller.user_id, &user(&user_id)?).await?;
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
    State(auth): State<Auth>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<AccountAction>, ApiError> {
    let sessions_revoked = auth.disable(&caller.user_id, &user(&id)?).await?;
    Ok(Json(AccountAction {
        success: true,
        user_id: id,
        sessions_revoked,
    }))
}

/// Re-enables a disabled user: sign-in works again. Sessions and the API
/// key revoked by the disable stay revoked. Enabling an enabled user is a
/// no-op.
#[utoipa::path(post, path = "/admin/users/{id}/enable", tag = "admin",
    params(("id" = String, Path)),
    responses((status = 200, body = AccountAction), (status = 404, description = "No such user")))]
async fn enable_user(
    State(auth): State<Auth>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<AccountAction>, ApiError> {
    auth.enable(&caller.user_id, &user(&id)?).await?;
    Ok(Json(AccountAction {
        success: true,
        user_id: id,
        sessions_revoked: 0,
    }))
}

/// Revokes every session and the API key of a user.
#[utoipa::path(post, path = "/admin/users/{id}/revoke-all", tag = "admin",
    params(("id" = String, Path)),
    responses((status = 200, body = AccountAction)))]
async fn revoke_user_tokens(
    State(auth): State<Auth>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<AccountAction>, ApiError> {
    let sessions_revoked = auth.revoke_all(&caller.user_id, &user(&id)?).await?;
    Ok(Json(AccountAction {
        success: true,
        user_id: id,
        sessions_revoked,
    }))
}

/// Erases a user (crypto-shredding): their email and name can never be
/// read again, every session and API key ends, and the address may be
/// registered anew; the event log, its hashes and seals stay as they are.
/// Erasing an erased user again only finishes an interrupted erasure.
#[utoipa::path(post, path = "/admin/users/{id}/erase", tag = "admin",
    params(("id" = String, Path)),
    responses((status = 200, body = AccountAction), (status = 404, description = "No such user")))]
async fn erase_user(
    State(auth): State<Auth>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<AccountAction>, ApiError> {
    let erased = auth.erase(&caller.user_id, &user(&id)?).await?;
    Ok(Json(AccountAction {
        success: true,
        user_id: id,
        sessions_revoked: erased.sessions_revoked,
    }))
}
