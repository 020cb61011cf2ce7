//! The caller's API keys: the singular §4.1 routes (`/api/auth/api-key`,
//! the key named `default`) and keys by name (`/api/auth/api-keys`).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::Done;
use crate::auth::Auth;
use crate::auth::api_keys::{ApiKeyInfo, NewApiKey};
use crate::http::caller::AccountHolder;
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, ApiPath};
use crate::http::routes::{RouteSpec, Routes};
use crate::http::shared::Shared;

pub fn routes() -> Routes {
    Routes::new()
        .add(routes!(create_api_key, revoke_api_key), RouteSpec::new())
        .add(
            routes!(create_named_api_key, list_api_keys),
            RouteSpec::new(),
        )
        .add(routes!(revoke_api_key_by_id), RouteSpec::new())
}

/// Creates the caller's `default` API key, replacing the previous
/// `default` key (named keys stay). The key is shown once; it works as a
/// bearer credential. A body, if sent, is ignored.
#[utoipa::path(post, path = "/api/auth/api-key", tag = "auth",
    responses((status = 201, body = NewApiKey),
        (status = 403, description = "Account disabled"),
        (status = 409, description = "No `default` key to replace and the caller already holds `SERVICE_MAX_API_KEYS_PER_USER` keys")))]
async fn create_api_key(
    State(auth): State<Auth>,
    AccountHolder(caller): AccountHolder,
) -> Result<(StatusCode, Json<NewApiKey>), ApiError> {
    let key = auth.create_api_key(&caller.user_id).await?;
    Ok((StatusCode::CREATED, Json(key)))
}

/// Revokes the caller's `default` API key (named keys stay).
#[utoipa::path(delete, path = "/api/auth/api-key", tag = "auth",
    responses((status = 200, body = Done), (status = 409, description = "No API key named `default` exists")))]
async fn revoke_api_key(
    State(auth): State<Auth>,
    AccountHolder(caller): AccountHolder,
) -> Result<Json<Done>, ApiError> {
    auth.revoke_api_key(&caller.user_id).await?;
    Ok(Json(Done::new("API key revoked")))
}

/// The body of a key by name. Scopes and expiry are not offered (every key
/// acts with all of its owner's rights until revoked), so those fields are
/// refused like any unknown field rather than silently ignored.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewKeyBody {
    /// Unique among the caller's live keys; trimmed; 1 to 100 characters,
    /// no control characters. `default` is the singular route's key.
    #[schema(min_length = 1, max_length = 100)]
    pub name: String,
}

/// Creates an API key named `name` beside the caller's other keys. The key
/// is shown once, in this response.
#[utoipa::path(post, path = "/api/auth/api-keys", tag = "auth", request_body = NewKeyBody,
    responses((status = 201, body = NewApiKey),
        (status = 403, description = "Account disabled"),
        (status = 409, description = "A live key already has this name, or the caller holds `SERVICE_MAX_API_KEYS_PER_USER` keys"),
        (status = 422, description = "The name is empty, longer than 100 characters or holds a control character; or the body has other fields (`scopes`, `expires_at` are not supported)")))]
async fn create_named_api_key(
    State(auth): State<Auth>,
    AccountHolder(caller): AccountHolder,
    ApiJson(body): ApiJson<NewKeyBody>,
) -> Result<(StatusCode, Json<NewApiKey>), ApiError> {
    let key = auth
        .create_named_api_key(&caller.user_id, &body.name)
        .await?;
    Ok((StatusCode::CREATED, Json(key)))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyList {
    #[schema(value_type = Vec<ApiKeyInfo>)]
    pub keys: Shared<ApiKeyInfo>,
    /// The same list (where paginating clients read it).
    #[schema(value_type = Vec<ApiKeyInfo>)]
    pub items: Shared<ApiKeyInfo>,
    pub total: usize,
}

/// The caller's live API keys, newest first, the `default` key included:
/// never a secret or its hash.
#[utoipa::path(get, path = "/api/auth/api-keys", tag = "auth",
    responses((status = 200, body = ApiKeyList)))]
async fn list_api_keys(
    State(auth): State<Auth>,
    AccountHolder(caller): AccountHolder,
) -> Result<Json<ApiKeyList>, ApiError> {
    let keys = auth.api_keys(&caller.user_id).await?;
    let total = keys.len();
    let keys = Shared::new(keys);
    Ok(Json(ApiKeyList {
        total,
        items: keys.clone(),
        keys,
    }))
}

/// Revokes one of the caller's API keys; it stops authenticating at once.
#[utoipa::path(delete, path = "/api/auth/api-keys/{key_id}", tag = "auth",
    params(("key_id" = String, Path, description = "The key's id (`key_id` of the create response or the list)")),
    responses((status = 200, body = Done),
        (status = 404, description = "No live key of the caller has this id (another user's key included)")))]
async fn revoke_api_key_by_id(
    State(auth): State<Auth>,
    AccountHolder(caller): AccountHolder,
    ApiPath(key_id): ApiPath<String>,
) -> Result<Json<Done>, ApiError> {
    auth.revoke_api_key_by_id(&caller.user_id, &key_id).await?;
    Ok(Json(Done::new("API key revoked")))
}
