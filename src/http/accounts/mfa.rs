//! TOTP setup, enable and disable for the caller.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::Done;
use crate::auth::Auth;
use crate::auth::mfa::MfaSetup;
use crate::http::caller::AccountHolder;
use crate::http::error::ApiError;
use crate::http::extract::ApiJson;
use crate::http::routes::{RouteSpec, Routes};

pub fn routes() -> Routes {
    Routes::new()
        .add(routes!(mfa_setup), RouteSpec::new())
        .add(routes!(mfa_enable), RouteSpec::new())
        .add(routes!(mfa_disable), RouteSpec::new())
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CodeBody {
    /// A 6-digit TOTP code (or, to disable, a backup code).
    pub code: String,
}

/// Starts MFA setup: returns a new TOTP secret and its otpauth URI.
#[utoipa::path(post, path = "/api/auth/mfa/setup", tag = "auth",
    responses((status = 200, body = MfaSetup), (status = 409, description = "MFA is already enabled")))]
async fn mfa_setup(
    State(auth): State<Auth>,
    AccountHolder(caller): AccountHolder,
) -> Result<Json<MfaSetup>, ApiError> {
    Ok(Json(auth.begin_mfa(&caller.user_id).await?))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MfaEnabled {
    pub success: bool,
    /// Ten one-time backup codes, shown once.
    pub backup_codes: Vec<String>,
}

/// Turns MFA on after checking a first code from the authenticator.
#[utoipa::path(post, path = "/api/auth/mfa/enable", tag = "auth", request_body = CodeBody,
    responses((status = 200, body = MfaEnabled),
        (status = 401, description = "Invalid authentication code; at the fifth wrong code with this session or key, it has ended"),
        (status = 409, description = "MFA is already enabled; setup has not been started; or enough code checks of this session or key are already under way to reach the limit")))]
async fn mfa_enable(
    State(auth): State<Auth>,
    AccountHolder(caller): AccountHolder,
    ApiJson(body): ApiJson<CodeBody>,
) -> Result<Json<MfaEnabled>, ApiError> {
    let backup_codes = auth.enable_mfa(&caller, &body.code).await?;
    Ok(Json(MfaEnabled {
        success: true,
        backup_codes,
    }))
}

/// Turns MFA off; needs a current TOTP code or a backup code.
#[utoipa::path(post, path = "/api/auth/mfa/disable", tag = "auth", request_body = CodeBody,
    responses((status = 200, body = Done),
        (status = 401, description = "Invalid authentication code; at the fifth wrong code with this session or key, it has ended"),
        (status = 409, description = "MFA is not enabled, or enough code checks of this session or key are already under way to reach the limit")))]
async fn mfa_disable(
    State(auth): State<Auth>,
    AccountHolder(caller): AccountHolder,
    ApiJson(body): ApiJson<CodeBody>,
) -> Result<Json<Done>, ApiError> {
    auth.disable_mfa(&caller, &body.code).await?;
    Ok(Json(Done::new("MFA disabled")))
}
