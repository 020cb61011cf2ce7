//! Enterprise SSO (§5.4) at `/api/v1/auth/sso/*` and the legacy
//! `/auth/sso/*` paths: sign-in, sso_callback (GET, or a form POST), refresh,
//! logout, the providers and the configuration.

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::{CallbackQuery, StartQuery, finish, land, redirect};
use crate::auth::tokens::TokenPair;
use crate::auth::{Auth, Caller};
use crate::config::SsoProtocol;
use crate::http::accounts::ClientDevice;
use crate::http::accounts::session::RefreshBody;
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, ApiQuery, WantsHtml};
use crate::http::ratelimit::{AuthPath, PathLimit};
use crate::http::routes::{RouteSpec, Routes};
use crate::sso::{Purpose, Sso, Which};

pub fn routes() -> Routes {
    let limit = PathLimit::Auth(AuthPath::Sso);
    let public = || RouteSpec::new().public().raw().limit(limit);
    let legacy = || RouteSpec::unversioned().public().limit(limit);
    Routes::new()
        .add(
            routes!(sso_login),
            public()
                .also_at("/api/sso/login")
                .also_at("/auth/sso/login"),
        )
        .add(routes!(sso_callback), public().also_at("/api/sso/callback"))
        .add(routes!(sso_refresh), public())
        .add(routes!(sso_logout), RouteSpec::new().limit(limit))
        .add(routes!(sso_providers), public())
        .add(
            routes!(sso_config),
            RouteSpec::new()
                .requires(crate::auth::rbac::Permission::Admin)
                .limit(limit),
        )
        .add(routes!(legacy_callback, legacy_callback_post), legacy())
        .add(routes!(legacy_logout), legacy())
        .add(routes!(sso_metadata), legacy())
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LoginStarted {
    /// Send the browser here.
    pub auth_url: String,
}

/// Starts SSO sign-in (also at the legacy `/auth/sso/login`): a browser
/// (`Accept: text/html`) is redirected to the provider; other clients get
/// the address as JSON.
#[utoipa::path(get, path = "/api/auth/sso/login", tag = "sso", params(StartQuery),
    responses((status = 302, description = "To the provider (browsers)"),
        (status = 200, body = LoginStarted, description = "The provider's address (other clients)"),
        (status = 400, description = "Invalid redirect URL"),
        (status = 404, description = "SSO is not enabled"),
        (status = 503, description = "The provider could not be reached")))]
async fn sso_login(
    State(sso): State<Sso>,
    WantsHtml(html): WantsHtml,
    ApiQuery(query): ApiQuery<StartQuery>,
) -> Result<Response, ApiError> {
    let auth_url = sso
        .start(Which::Sso, Purpose::SignIn, query.redirect_url.as_deref())
        .await?;
    Ok(if html {
        redirect(&auth_url)
    } else {
        Json(LoginStarted { auth_url }).into_response()
    })
}

/// The provider's return: a redirect to the address the sign-in asked for
/// (else `OAUTH_SUCCESS_URL`) with `access_token`, `refresh_token` and
/// `user_id` in the fragment, or to `OAUTH_ERROR_URL` with `error` ("User
/// not authorized" when the domain or group checks fail).
#[utoipa::path(get, path = "/api/auth/sso/callback", tag = "sso", params(CallbackQuery),
    responses((status = 302, description = "To the success or the error address"),
        (status = 400, description = "A query that is not a callback's")))]
async fn sso_callback(
    State(sso): State<Sso>,
    ClientDevice(device): ClientDevice,
    ApiQuery(query): ApiQuery<CallbackQuery>,
) -> Response {
    finish(&sso, Which::Sso, query, device).await
}

/// Exchanges the refresh token of an SSO session (an ordinary session).
#[utoipa::path(post, path = "/api/auth/sso/refresh", tag = "sso", request_body = RefreshBody,
    responses((status = 200, body = TokenPair),
        (status = 401, description = "Token expired or invalid")))]
async fn sso_refresh(
    State(auth): State<Auth>,
    ApiJson(body): ApiJson<RefreshBody>,
) -> Result<Json<TokenPair>, ApiError> {
    Ok(Json(auth.refresh(&body.refresh_token).await?))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LoggedOut {
    pub success: bool,
    /// The provider's end-session address (RP-initiated logout), when it
    /// offers one: send the browser there to end the provider's session too.
    pub logout_url: Option<String>,
}

/// Ends the caller's session, and names the provider's end-session address.
#[utoipa::path(post, path = "/api/auth/sso/logout", tag = "sso",
    responses((status = 200, body = LoggedOut),
        (status = 403, description = "Not a session's access token (an API key)")))]
async fn sso_logout(State(sso): State<Sso>, caller: Caller) -> Result<Json<LoggedOut>, ApiError> {
    let logout_url = sso.logout(&caller).await?;
    Ok(Json(LoggedOut {
        success: true,
        logout_url,
    }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SsoProviders {
    /// SSO is enabled (`SERVICE_SSO_ENABLED`).
    pub enabled: bool,
    pub providers: Vec<super::ProviderView>,
}

/// The SSO provider, when SSO is enabled.
#[utoipa::path(get, path = "/api/auth/sso/providers", tag = "sso",
    responses((status = 200, body = SsoProviders)))]
async fn sso_providers(State(sso): State<Sso>) -> Json<SsoProviders> {
    let providers: Vec<_> = sso
        .providers()
        .into_iter()
        .filter(|provider| provider.id == "sso")
        .map(Into::into)
        .collect();
    Json(SsoProviders {
        enabled: !providers.is_empty(),
        providers,
    })
}

#[derive(Debug, Default, Serialize, ToSchema)]
pub struct SsoConfig {
    pub enabled: bool,
    pub provider_type: Option<String>,
    pub entity_id: Option<String>,
    pub issuer_url: Option<String>,
    pub client_id: Option<String>,
    pub callback_url: Option<String>,
    pub scopes: Vec<String>,
    pub allowed_domains: Vec<String>,
    pub allowed_groups: Vec<String>,
    pub groups_claim: Option<String>,
    /// The organization provisioned users join.
    pub org_id: Option<String>,
    /// `group=role` as configured, in order.
    pub group_roles: Vec<String>,
    pub default_role: Option<String>,
    /// SAML: the identity provider's entity id and addresses.
    pub idp_entity_id: Option<String>,
    pub idp_sso_url: Option<String>,
    pub idp_slo_url: Option<String>,
    /// SAML: our assertion consumer and single logout addresses.
    pub acs_url: Option<String>,
    pub slo_url: Option<String>,
    /// SAML: our sign-in requests are signed (`SERVICE_SSO_SP_PRIVATE_KEY`).
    pub signs_requests: bool,
}

/// The SSO configuration as the service read it (never the client secret).
#[utoipa::path(get, path = "/api/auth/sso/config", tag = "sso",
    responses((status = 200, body = SsoConfig), (status = 403, description = "Admins only")))]
async fn sso_config(State(sso): State<Sso>) -> Json<SsoConfig> {
    let Some(settings) = sso.sso_settings() else {
        return Json(SsoConfig::default());
    };
    let mut config = SsoConfig {
        enabled: true,
        provider_type: Some(settings.provider_type.clone()),
        entity_id: Some(settings.entity_id.clone()),
        allowed_domains: settings.allowed_domains.clone(),
        allowed_groups: settings.allowed_groups.clone(),
        groups_claim: Some(settings.groups_claim.clone()),
        org_id: settings.org_id.clone(),
        group_roles: settings
            .group_roles
            .iter()
            .map(|(group, role)| format!("{group}={}", role.as_str()))
            .collect(),
        default_role: Some(settings.default_role.as_str().to_owned()),
        ..SsoConfig::default()
    };
    match &settings.protocol {
        SsoProtocol::Oidc(client) => {
            config.issuer_url = Some(client.issuer_url.clone());
            config.client_id = Some(client.client_id.clone());
            config.callback_url = Some(client.redirect_uri.clone());
            config.scopes = client.scopes.clone();
        }
        SsoProtocol::Saml(saml) => {
            config.idp_entity_id = Some(saml.idp_entity_id.clone());
            config.idp_sso_url = Some(saml.idp_sso_url.clone());
            config.idp_slo_url = saml.idp_slo_url.clone();
            config.acs_url = Some(saml.acs_url.clone());
            config.callback_url = Some(saml.acs_url.clone());
            config.slo_url = Some(saml.slo_url.clone());
            config.signs_requests = saml.sp_signing.is_some();
        }
    }
    Json(config)
}

/// Legacy: the SSO callback (as `/api/v1/auth/sso/callback`).
#[utoipa::path(get, path = "/auth/sso/callback", tag = "sso", params(CallbackQuery),
    responses((status = 302, description = "To the success or the error address"),
        (status = 400, description = "A query that is not a callback's")))]
async fn legacy_callback(
    State(sso): State<Sso>,
    ClientDevice(device): ClientDevice,
    ApiQuery(query): ApiQuery<CallbackQuery>,
) -> Response {
    finish(&sso, Which::Sso, query, device).await
}

/// The fields of a callback posted as a form: an OIDC `form_post` answer,
/// or a SAML response on the HTTP-POST binding.
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // documents the form; the handler reads it leniently
pub struct CallbackForm {
    code: Option<String>,
    /// The state token the sign-in started with (OIDC).
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
    iss: Option<String>,
    /// The identity provider's response, base64 (SAML).
    #[schema(rename = "SAMLResponse")]
    saml_response: Option<String>,
    /// The state token the sign-in started with (SAML).
    #[schema(rename = "RelayState")]
    relay_state: Option<String>,
}

/// Legacy: the SSO callback as a form post: the assertion consumer service
/// of SAML (`SAMLResponse`, `RelayState`) and the OIDC `form_post` response
/// mode (the same fields as the query of the GET).
#[utoipa::path(post, path = "/auth/sso/callback", tag = "sso",
    request_body(content_type = "application/x-www-form-urlencoded", content = CallbackForm),
    responses((status = 302, description = "To the success or the error address"),
        (status = 415, description = "Not a form")))]
async fn legacy_callback_post(
    State(sso): State<Sso>,
    ClientDevice(device): ClientDevice,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let form_type = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if !form_type {
        return Err(ApiError::UnsupportedMediaType(
            "Expected application/x-www-form-urlencoded".to_owned(),
        ));
    }
    // Read leniently: whatever the form holds, the answer is a redirect
    // (a form without a good state ends at the error address).
    let mut form = CallbackQuery::default();
    let (mut saml_response, mut relay_state) = (None, None);
    for (key, value) in url::form_urlencoded::parse(&body) {
        let field = match key.as_ref() {
            "code" => &mut form.code,
            "state" => &mut form.state,
            "error" => &mut form.error,
            "error_description" => &mut form.error_description,
            "iss" => &mut form.iss,
            "SAMLResponse" => &mut saml_response,
            "RelayState" => &mut relay_state,
            _ => continue,
        };
        *field = Some(value.into_owned());
    }
    // A form without the state (or RelayState) it needs belongs to no flow:
    // it ends at the error address like any other bad answer.
    if let Some(saml_response) = saml_response {
        let relay_state = relay_state.unwrap_or_default();
        let finished = sso.finish_saml(&relay_state, &saml_response, device).await;
        return Ok(land(&sso, Which::Sso, finished));
    }
    Ok(finish(&sso, Which::Sso, form, device).await)
}

/// Legacy single logout, and SAML's single logout service: a signed
/// `SAMLRequest` from the provider ends every session of that user and
/// answers the provider; a `SAMLResponse` (the provider's answer to our
/// logout) lands on `OAUTH_SUCCESS_URL`; otherwise the caller's session ends
/// and the browser goes to the provider's end-session address, else to
/// `OAUTH_SUCCESS_URL`.
#[utoipa::path(get, path = "/auth/sso/logout", tag = "sso",
    params(("SAMLRequest" = Option<String>, Query, description = "The provider's logout request (redirect binding, signed)"),
        ("SAMLResponse" = Option<String>, Query, description = "The provider's answer to our logout request")),
    responses((status = 302, description = "To the provider, or the success or error address"),
        (status = 401, description = "Neither a SAML message nor a signed-in caller"),
        (status = 403, description = "Not a session's access token (an API key)")))]
async fn legacy_logout(
    State(sso): State<Sso>,
    caller: Option<Caller>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let query = query.unwrap_or_default();
    let carries = |name: &str| {
        query
            .split('&')
            .any(|pair| pair.split('=').next() == Some(name))
    };
    if carries("SAMLRequest") {
        return Ok(match sso.provider_logout(&query).await {
            Ok(to) => redirect(&to),
            Err(e) => {
                tracing::info!(error = %e, "a provider's logout request was refused");
                redirect(&sso.error_redirect(&e))
            }
        });
    }
    if carries("SAMLResponse") {
        return Ok(redirect(sso.success_url()));
    }
    let caller =
        caller.ok_or_else(|| ApiError::Unauthorized("Authentication required".to_owned()))?;
    let to = sso.logout(&caller).await?;
    Ok(redirect(
        &to.unwrap_or_else(|| sso.success_url().to_owned()),
    ))
}

/// Legacy: the SAML 2.0 service provider metadata (entity id, assertion
/// consumer and single logout addresses, NameID format emailAddress).
#[utoipa::path(get, path = "/auth/sso/metadata", tag = "sso",
    responses((status = 200, content_type = "application/samlmetadata+xml", body = String,
            description = "The service provider's metadata"),
        (status = 404, description = "SAML SSO is not configured")))]
async fn sso_metadata(State(sso): State<Sso>) -> Result<Response, ApiError> {
    let metadata = sso.saml_metadata()?;
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "application/samlmetadata+xml",
        )],
        metadata,
    )
        .into_response())
}
