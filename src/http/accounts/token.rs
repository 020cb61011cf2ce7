//! `POST /api/v2/auth/token`: the OAuth 2.0 token endpoint (RFC 6749 §4.3
//! password grant, §6 refresh), form-encoded, with RFC 6749 §5.2 errors.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Form, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::ClientDevice;
use crate::auth::Auth;
use crate::auth::login::LoginOutcome;
use crate::auth::tokens::TokenPair;
use crate::http::ratelimit::{AuthPath, PathLimit};
use crate::http::routes::{RouteSpec, Routes};

pub fn routes() -> Routes {
    Routes::new().add(
        routes!(token),
        RouteSpec::new()
            .public()
            .raw()
            .limit(PathLimit::Auth(AuthPath::Login)),
    )
}

/// The form fields of a token request.
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // documents the form; the handler reads it as a map
pub struct TokenForm {
    /// `password` or `refresh_token`.
    #[schema(pattern = "^(password|refresh_token)$")]
    grant_type: String,
    /// The email, for `password`.
    username: Option<String>,
    password: Option<String>,
    /// For `refresh_token`.
    refresh_token: Option<String>,
}

/// A successful token response (RFC 6749 §5.1).
#[derive(Debug, Serialize, ToSchema)]
pub struct OAuthToken {
    pub access_token: String,
    /// `Bearer`.
    pub token_type: &'static str,
    pub expires_in: u64,
    pub refresh_token: String,
}

/// An error response (RFC 6749 §5.2).
#[derive(Debug, Serialize, ToSchema)]
pub struct OAuthError {
    /// `invalid_request`, `invalid_grant` or `unsupported_grant_type`.
    pub error: &'static str,
    pub error_description: String,
}

impl From<TokenPair> for OAuthToken {
    fn from(pair: TokenPair) -> Self {
        Self {
            access_token: pair.access_token,
            token_type: "Bearer",
            expires_in: pair.expires_in,
            refresh_token: pair.refresh_token,
        }
    }
}

fn oauth_error(error: &'static str, description: impl Into<String>) -> Response {
    let status = if error == "invalid_client" {
        StatusCode::UNAUTHORIZED
    } else {
        StatusCode::BAD_REQUEST
    };
    no_store(
        (
            status,
            Json(OAuthError {
                error,
                error_description: description.into(),
            }),
        )
            .into_response(),
    )
}

fn no_store(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    response
}

/// Issues tokens for `grant_type=password` (`username`, `password`) or
/// `grant_type=refresh_token` (`refresh_token`). Accounts with MFA sign in
/// through `POST /api/auth/login` instead.
#[utoipa::path(post, path = "/api/v2/auth/token", tag = "auth",
    request_body(content = TokenForm, content_type = "application/x-www-form-urlencoded"),
    responses((status = 200, body = OAuthToken), (status = 400, body = OAuthError)))]
async fn token(
    State(auth): State<Auth>,
    ClientDevice(device): ClientDevice,
    form: Result<Form<HashMap<String, String>>, axum::extract::rejection::FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return oauth_error(
            "invalid_request",
            "The body must be application/x-www-form-urlencoded",
        );
    };
    let field = |name: &str| form.get(name).map(String::as_str).filter(|v| !v.is_empty());
    let result = match field("grant_type") {
        None => return oauth_error("invalid_request", "grant_type is required"),
        Some("password") => {
            let (Some(username), Some(password)) = (field("username"), field("password")) else {
                return oauth_error("invalid_request", "username and password are required");
            };
            match auth.login(username, password, device).await {
                Ok(LoginOutcome::Signed { tokens, .. }) => Ok(tokens),
                Ok(LoginOutcome::SecondFactorRequired { .. }) => {
                    return oauth_error(
                        "invalid_grant",
                        "A second factor is required: sign in with POST /api/auth/login",
                    );
                }
                Err(e) => Err(e),
            }
        }
        Some("refresh_token") => {
            let Some(refresh_token) = field("refresh_token") else {
                return oauth_error("invalid_request", "refresh_token is required");
            };
            auth.refresh(refresh_token).await
        }
        Some(_) => {
            return oauth_error(
                "unsupported_grant_type",
                "grant_type must be password or refresh_token",
            );
        }
    };
    match result {
        Ok(pair) => no_store(Json(OAuthToken::from(pair)).into_response()),
        Err(e) if e.is_fault() => crate::http::error::ApiError::from(e).into_response(),
        Err(e) => oauth_error("invalid_grant", e.to_string()),
    }
}
