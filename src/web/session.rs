//! The UI's sign-in state, kept in cookies that script cannot read: the
//! access token in `__Host-agon_session`, the refresh token in
//! `__Host-agon_refresh`, and, between a password and its second factor,
//! the step token in `__Host-agon_mfa`. Each request's cookie is judged by
//! the accounts service exactly like a bearer token; an expired one is
//! exchanged for a new pair on that response, and a revoked one signs the
//! browser out.

use axum::extract::{FromRequestParts, OptionalFromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::WebState;
use super::error::PageError;
use crate::auth::tokens::TokenPair;
use crate::auth::{Caller, Credential, Presented};

pub const SESSION: &str = crate::views::SESSION_COOKIE;
pub const REFRESH: &str = "__Host-agon_refresh";
pub const MFA: &str = "__Host-agon_mfa";

/// The value of cookie `name` in `headers`.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|line| line.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim())
        .filter(|value| !value.is_empty())
}

/// A `Set-Cookie` value: HttpOnly, Secure, SameSite=Strict, Path=/, no
/// Domain (what the `__Host-` prefix demands). Without `max_age_seconds`
/// it lasts until the browser closes (the token inside still expires).
pub fn set_cookie(name: &str, value: &str, max_age_seconds: Option<u64>) -> HeaderValue {
    let max_age = max_age_seconds.map_or_else(String::new, |s| format!("; Max-Age={s}"));
    let text = format!("{name}={value}{max_age}; Path=/; Secure; HttpOnly; SameSite=Strict");
    // Tokens are base64url and dots: always a valid header value.
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// A `Set-Cookie` value that removes cookie `name`.
pub fn clear_cookie(name: &str) -> HeaderValue {
    set_cookie(name, "", Some(0))
}

/// The cookies of a fresh token pair.
pub fn pair_cookies(pair: &TokenPair) -> [HeaderValue; 2] {
    [
        set_cookie(SESSION, &pair.access_token, Some(pair.refresh_expires_in)),
        set_cookie(REFRESH, &pair.refresh_token, Some(pair.refresh_expires_in)),
    ]
}

/// Who the request's cookies stand for (`None`: nobody signed in).
#[derive(Debug, Clone)]
pub struct Visitor(pub Option<Caller>);

/// Reads the session cookies, refreshes an expired pair, and leaves a
/// [`Visitor`] on the request. A handler that sets cookies of its own
/// (sign-in, sign-out) wins over the refreshed ones.
pub async fn layer(State(state): State<WebState>, mut request: Request, next: Next) -> Response {
    let headers = request.headers();
    let (access, refresh) = (cookie(headers, SESSION), cookie(headers, REFRESH));
    let had_cookies = access.is_some() || refresh.is_some();
    let (access, refresh) = (access.map(str::to_owned), refresh.map(str::to_owned));
    let mut set = Vec::new();
    let mut caller = match access {
        Some(token) => match state.auth.identify(Presented::Bearer(token), None).await {
            // Only a session's access token signs a browser in; an API key
            // or the static token in a cookie counts as nobody.
            Ok(Some(caller)) if matches!(caller.credential, Credential::Session { .. }) => {
                Some(caller)
            }
            Err(e) if e.is_fault() => return PageError::internal(e).into_response(),
            _ => None,
        },
        None => None,
    };
    if caller.is_none()
        && let Some(token) = refresh
    {
        match state.auth.refresh(&token).await {
            Ok(pair) => {
                let presented = Presented::Bearer(pair.access_token.clone());
                match state.auth.identify(presented, None).await {
                    Ok(found) => caller = found,
                    Err(e) => return PageError::internal(e).into_response(),
                }
                set.extend(pair_cookies(&pair));
            }
            Err(e) if e.is_fault() => return PageError::internal(e).into_response(),
            Err(_) => {}
        }
    }
    if caller.is_none() && had_cookies {
        set = vec![clear_cookie(SESSION), clear_cookie(REFRESH)];
    }
    request.extensions_mut().insert(Visitor(caller));
    let mut response = next.run(request).await;
    let handler_set = response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .any(|v| v.as_bytes().starts_with(SESSION.as_bytes()));
    if !handler_set {
        for value in set {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

impl<S: Send + Sync> OptionalFromRequestParts<S> for Visitor {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        _state: &S,
    ) -> Result<Option<Self>, Self::Rejection> {
        Ok(parts.extensions.get::<Visitor>().cloned())
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Visitor {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(parts
            .extensions
            .get::<Visitor>()
            .cloned()
            .unwrap_or(Visitor(None)))
    }
}

/// A signed-in user; anyone else is sent to `/login?next=<this page>`.
#[derive(Debug, Clone)]
pub struct SignedIn(pub Caller);

impl<S: Send + Sync> FromRequestParts<S> for SignedIn {
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, PageError> {
        match parts.extensions.get::<Visitor>() {
            Some(Visitor(Some(caller))) => Ok(SignedIn(caller.clone())),
            _ => Err(PageError::SignIn {
                next: parts
                    .uri
                    .path_and_query()
                    .map_or_else(|| "/".to_owned(), |pq| pq.as_str().to_owned()),
            }),
        }
    }
}
