//! §4.1 sign-in through identity providers: the OAuth 2.0 provider
//! `extidp` (`oauth.rs`, §5.3) and enterprise SSO with its legacy
//! `/auth/sso/*` paths (`enterprise.rs`, §5.4). Browsers are redirected:
//! to the provider, then back to `OAUTH_SUCCESS_URL` with the tokens in the
//! fragment, or to `OAUTH_ERROR_URL` with `error` in the query.

mod enterprise;
mod oauth;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use url::form_urlencoded;
use utoipa::{IntoParams, ToSchema};

use super::error::ApiError;
use super::routes::Routes;
use crate::auth::login::LoginOutcome;
use crate::sso::{Answer, Finished, ProviderInfo, Sso, SsoError};

pub fn routes() -> Routes {
    Routes::new()
        .merge(oauth::routes())
        .merge(enterprise::routes())
}

impl From<SsoError> for ApiError {
    fn from(e: SsoError) -> Self {
        use SsoError as S;
        match e {
            S::NotConfigured(name) => ApiError::NotFound {
                resource_type: "identity provider",
                resource_id: Some(name.to_owned()),
            },
            S::InvalidRedirect | S::StateExpired | S::InvalidState => {
                ApiError::bad_request(e.to_string())
            }
            S::InvalidClient
            | S::Refused(_)
            | S::Token(_)
            | S::UnknownKey
            | S::Assertion(_)
            | S::Logout(_)
            | S::Replayed => ApiError::Unauthorized(e.to_string()),
            S::NotAuthorized => ApiError::Forbidden(e.to_string()),
            S::Unreachable(_) => ApiError::Unavailable(e.to_string()),
            S::Auth(e) => e.into(),
            S::Store(e) => e.into(),
            S::Provider(_) | S::Flow(_) => ApiError::Internal(Box::new(e)),
        }
    }
}

/// Where a browser starting a sign-in wants to land.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StartQuery {
    /// An http(s) address on a host of `OAUTH_ALLOWED_REDIRECT_HOSTS`;
    /// default `OAUTH_SUCCESS_URL`.
    #[serde(default)]
    redirect_url: Option<String>,
}

/// What the provider sends back to the callback.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CallbackQuery {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    state: Option<String>,
    /// The provider's refusal (`access_denied`, …).
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_description: Option<String>,
    /// The issuer of the answer (RFC 9207); must be the provider's.
    #[serde(default)]
    iss: Option<String>,
}

/// A provider a client may send its users to.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProviderView {
    /// `extidp` or `sso`.
    pub id: &'static str,
    /// `oauth2`, `oidc` or `saml`.
    pub protocol: &'static str,
    /// `SERVICE_SSO_PROVIDER_TYPE` for SSO, `extidp` for OAuth.
    pub provider_type: String,
    pub issuer_url: String,
    /// Where a browser starts the sign-in.
    pub login_url: &'static str,
}

impl From<ProviderInfo> for ProviderView {
    fn from(info: ProviderInfo) -> Self {
        Self {
            id: info.id,
            protocol: info.protocol,
            provider_type: info.provider_type,
            issuer_url: info.issuer_url,
            login_url: info.login_url,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Providers {
    pub providers: Vec<ProviderView>,
}

/// A 302 to `location`, never cached or sent on as a referrer.
fn redirect(location: &str) -> Response {
    (
        StatusCode::FOUND,
        [
            (header::LOCATION, location.to_owned()),
            (header::CACHE_CONTROL, "no-store".to_owned()),
            (header::REFERRER_POLICY, "no-referrer".to_owned()),
        ],
    )
        .into_response()
}

/// Finishes a callback: the tokens (or the second-factor step) in the
/// success address's fragment, or the error address.
async fn finish(
    sso: &Sso,
    which: crate::sso::Which,
    query: CallbackQuery,
    device: agon_aggregates::account::Device,
) -> Response {
    let provider_error = query.error.map(|error| match query.error_description {
        Some(description) => format!("{error}: {description}"),
        None => error,
    });
    let state = query.state.unwrap_or_default();
    let answer = Answer {
        code: query.code,
        error: provider_error,
        issuer: query.iss,
    };
    let finished = sso.finish(which, &state, answer, device).await;
    land(sso, which, finished)
}

/// Where a finished callback sends the browser.
fn land(sso: &Sso, which: crate::sso::Which, finished: Result<Finished, SsoError>) -> Response {
    match finished {
        Ok(Finished::SignedIn {
            outcome,
            redirect: to,
        }) => {
            let mut fragment = form_urlencoded::Serializer::new(String::new());
            match outcome {
                LoginOutcome::Signed { tokens, account } => {
                    fragment
                        .append_pair("access_token", &tokens.access_token)
                        .append_pair("refresh_token", &tokens.refresh_token)
                        .append_pair("user_id", &account.user_id)
                        .append_pair("token_type", tokens.token_type)
                        .append_pair("expires_in", &tokens.expires_in.to_string());
                }
                LoginOutcome::SecondFactorRequired { mfa_token } => {
                    fragment
                        .append_pair("mfa_required", "true")
                        .append_pair("mfa_token", &mfa_token);
                }
            }
            redirect(&with_fragment(&to, &fragment.finish()))
        }
        Ok(Finished::Linked { redirect: to }) => {
            let fragment = form_urlencoded::Serializer::new(String::new())
                .append_pair("linked", which.name())
                .finish();
            redirect(&with_fragment(&to, &fragment))
        }
        Err(e) => {
            if e.is_fault() {
                tracing::error!(error = %e, provider = which.name(), "sign-in callback failed");
            } else {
                tracing::info!(error = %e, provider = which.name(), "sign-in refused");
            }
            redirect(&sso.error_redirect(&e))
        }
    }
}

/// `url` with `fragment` in place of any fragment it had.
fn with_fragment(url: &str, fragment: &str) -> String {
    let base = url.split_once('#').map_or(url, |(base, _)| base);
    format!("{base}#{fragment}")
}
