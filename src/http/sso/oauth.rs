//! The OAuth 2.0 provider `extidp` (§5.3): sign-in, its callback, linking
//! and unlinking a signed-in account, and the providers on offer.

use axum::Json;
use axum::extract::State;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use super::{CallbackQuery, Providers, StartQuery, finish, redirect};
use crate::auth::Auth;
use crate::http::accounts::{ClientDevice, Done};
use crate::http::caller::AccountHolder;
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, ApiQuery};
use crate::http::ratelimit::{AuthPath, PathLimit};
use crate::http::routes::{RouteSpec, Routes};
use crate::sso::{Purpose, Sso, Which};

pub fn routes() -> Routes {
    let limit = PathLimit::Auth(AuthPath::Oauth);
    let public = || RouteSpec::new().public().raw().limit(limit);
    Routes::new()
        .add(routes!(extidp_start), public())
        .add(routes!(extidp_callback), public())
        .add(routes!(oauth_providers), public())
        .add(routes!(oauth_link), RouteSpec::new().limit(limit))
        .add(routes!(oauth_unlink), RouteSpec::new().limit(limit))
}

/// Starts sign-in with the OAuth provider: a redirect to it, with a state
/// token (single use, 10 minutes) and a PKCE challenge.
#[utoipa::path(get, path = "/api/auth/oauth/extidp", tag = "auth", params(StartQuery),
    responses((status = 302, description = "To the provider's authorization page"),
        (status = 400, description = "Invalid redirect URL"),
        (status = 404, description = "The provider is not configured (EXTIDP_OAUTH_CLIENT_ID)"),
        (status = 503, description = "The provider could not be reached")))]
async fn extidp_start(
    State(sso): State<Sso>,
    ApiQuery(query): ApiQuery<StartQuery>,
) -> Result<Response, ApiError> {
    let url = sso
        .start(
            Which::ExtIdp,
            Purpose::SignIn,
            query.redirect_url.as_deref(),
        )
        .await?;
    Ok(redirect(&url))
}

/// The provider's return: a redirect to `OAUTH_SUCCESS_URL` with
/// `access_token`, `refresh_token` and `user_id` in the fragment (or
/// `mfa_required` and `mfa_token` when the account has MFA: finish at
/// `POST /api/auth/mfa/verify`), or to `OAUTH_ERROR_URL` with `error`.
#[utoipa::path(get, path = "/api/auth/oauth/extidp/callback", tag = "auth", params(CallbackQuery),
    responses((status = 302, description = "To the success or the error address"),
        (status = 400, description = "A query that is not a callback's")))]
async fn extidp_callback(
    State(sso): State<Sso>,
    ClientDevice(device): ClientDevice,
    ApiQuery(query): ApiQuery<CallbackQuery>,
) -> Response {
    finish(&sso, Which::ExtIdp, query, device).await
}

/// The identity providers configured: the OAuth provider and enterprise SSO.
#[utoipa::path(get, path = "/api/auth/oauth/providers", tag = "auth",
    responses((status = 200, body = Providers)))]
async fn oauth_providers(State(sso): State<Sso>) -> Json<Providers> {
    Json(Providers {
        providers: sso.providers().into_iter().map(Into::into).collect(),
    })
}

/// An identity provider by name.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProviderName {
    Extidp,
    Sso,
}

impl From<ProviderName> for Which {
    fn from(name: ProviderName) -> Self {
        match name {
            ProviderName::Extidp => Which::ExtIdp,
            ProviderName::Sso => Which::Sso,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkBody {
    pub provider: ProviderName,
    /// Where the browser lands once linked (`#linked=<provider>`); a host
    /// of `OAUTH_ALLOWED_REDIRECT_HOSTS`.
    pub redirect_url: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LinkStarted {
    /// Send the signed-in user's browser here.
    pub auth_url: String,
}

/// Links a provider's identity to the caller's account: the address to
/// send the caller's browser to. The identity must not sign in to another
/// account.
#[utoipa::path(post, path = "/api/auth/oauth/link", tag = "auth", request_body = LinkBody,
    responses((status = 200, body = LinkStarted),
        (status = 400, description = "Invalid redirect URL"),
        (status = 404, description = "The provider is not configured")))]
async fn oauth_link(
    State(sso): State<Sso>,
    AccountHolder(caller): AccountHolder,
    ApiJson(body): ApiJson<LinkBody>,
) -> Result<Json<LinkStarted>, ApiError> {
    let which = Which::from(body.provider);
    let purpose = Purpose::Link {
        user_id: caller.user_id.to_string(),
    };
    let auth_url = sso.start(which, purpose, Some(&body.redirect_url)).await?;
    Ok(Json(LinkStarted { auth_url }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UnlinkQuery {
    /// Default `extidp`.
    #[serde(default)]
    provider: Option<ProviderName>,
}

/// Unlinks the caller's identity at a provider; refused (409) when it is
/// the account's only way to sign in.
#[utoipa::path(delete, path = "/api/auth/oauth/unlink", tag = "auth", params(UnlinkQuery),
    responses((status = 200, body = Done),
        (status = 404, description = "No identity of this provider is linked"),
        (status = 409, description = "The account's only way to sign in")))]
async fn oauth_unlink(
    State(auth): State<Auth>,
    AccountHolder(caller): AccountHolder,
    ApiQuery(query): ApiQuery<UnlinkQuery>,
) -> Result<Json<Done>, ApiError> {
    let which = Which::from(query.provider.unwrap_or(ProviderName::Extidp));
    auth.unlink(&caller.user_id, which.name()).await?;
    Ok(Json(Done::new("Provider unlinked")))
}
