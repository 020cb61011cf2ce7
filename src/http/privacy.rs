//! Privacy (the SDK's `privacy` namespace): a user erases their own account.
//! The erasure itself is the accounts service's (`auth::erase`).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa::openapi::schema::{Object, ObjectBuilder, SchemaType, Type};
use utoipa_axum::routes;

use crate::auth::Auth;
use crate::http::caller::AccountHolder;
use crate::http::error::ApiError;
use crate::http::extract::ApiJson;
use crate::http::routes::{RouteSpec, Routes};

pub fn routes() -> Routes {
    Routes::new().add(routes!(delete_account), RouteSpec::new())
}

/// What `DELETE /api/v1/privacy/account` takes (the SDK's `delete_account`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteAccountBody {
    /// The caller's current password.
    pub password: String,
    /// Must be `true`: the erasure cannot be undone.
    #[schema(schema_with = must_be_true)]
    pub confirm: bool,
    /// Why, for the caller's own record: not stored (it may itself be
    /// personal data).
    #[serde(default)]
    pub reason: Option<String>,
}

/// `true`, the only value `confirm` takes.
fn must_be_true() -> Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::new(Type::Boolean))
        .enum_values(Some([true]))
        .description(Some("Must be `true`: the erasure cannot be undone."))
        .build()
}

/// The account is erased.
#[derive(Debug, Serialize, ToSchema)]
pub struct AccountErased {
    pub success: bool,
    pub user_id: String,
    /// Sessions that ended with it (API keys end too).
    pub sessions_revoked: usize,
}

/// Erases the caller's account: their email and name can never be read
/// again (the key that sealed them is destroyed), every session and API
/// key ends, and the address may be registered anew. The event log keeps
/// its events, hashes and seals; reads show the fields as `[erased]`.
/// Wrong passwords count against the caller's session (or API key), which
/// ends at the fifth.
#[utoipa::path(delete, path = "/api/privacy/account", tag = "privacy",
    request_body = DeleteAccountBody,
    responses((status = 200, body = AccountErased),
        (status = 401, description = "The fifth wrong password with this session or key: it has ended"),
        (status = 403, description = "Password is incorrect, or the credential is not a user account's"),
        (status = 409, description = "Enough password checks of this session or key are already under way to reach the limit; retry shortly"),
        (status = 422, description = "confirm is not true")))]
async fn delete_account(
    State(auth): State<Auth>,
    AccountHolder(caller): AccountHolder,
    ApiJson(body): ApiJson<DeleteAccountBody>,
) -> Result<Json<AccountErased>, ApiError> {
    if !body.confirm {
        return Err(ApiError::field(
            "confirm",
            "must be true to erase the account",
        ));
    }
    let erased = auth.erase_own(&caller, &body.password).await?;
    Ok(Json(AccountErased {
        success: true,
        user_id: caller.user_id.to_string(),
        sessions_revoked: erased.sessions_revoked,
    }))
}
