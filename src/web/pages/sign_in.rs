//! Signing in and out: `/login` (email and password, then a TOTP or backup
//! code when the account has MFA, the step token kept in an HttpOnly
//! cookie rather than in the page), `POST /logout`. The same accounts
//! commands as `POST /api/auth/login` and its second-factor step.

use std::net::SocketAddr;

use agon_aggregates::account::{Device, RevokeReason};
use askama::Template;
use axum::Extension;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::header::{SET_COOKIE, USER_AGENT};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::{Chrome, Fields, render, safe_next};
use crate::auth::login::LoginOutcome;
use crate::auth::{Auth, AuthError};
use crate::web::error::PageError;
use crate::web::session::{
    MFA, REFRESH, SESSION, Visitor, clear_cookie, cookie, pair_cookies, set_cookie,
};

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    chrome: Chrome,
    next: String,
    email: String,
    error: Option<String>,
    notice: Option<String>,
}

#[derive(Template)]
#[template(path = "login_code.html")]
struct CodePage {
    chrome: Chrome,
    next: String,
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct LoginQuery {
    next: Option<String>,
    notice: Option<String>,
}

/// What a notice code in the address says (never text from the address).
fn notice(code: Option<&str>) -> Option<String> {
    let text = match code? {
        "verified" => "Your email address is verified. Sign in to continue.",
        "registered" => "Account created. Sign in to continue.",
        "signed-out" => "You are signed out.",
        "again" => "Your sign-in step expired. Sign in again.",
        "password" => {
            "Your password is changed and every session signed out. Sign in with the new password."
        }
        _ => return None,
    };
    Some(text.to_owned())
}

/// `GET /login`.
pub async fn form(
    visitor: Visitor,
    Query(query): Query<LoginQuery>,
) -> Result<Response, PageError> {
    let next = safe_next(query.next.as_deref());
    if visitor.0.is_some() {
        return Ok(Redirect::to(&next).into_response());
    }
    render(&LoginPage {
        chrome: Chrome::for_caller(None, "login"),
        next,
        email: String::new(),
        error: None,
        notice: notice(query.notice.as_deref()),
    })
}

/// The device a sign-in comes from, as the accounts service records it.
fn device(headers: &HeaderMap, peer: Option<Extension<ConnectInfo<SocketAddr>>>) -> Device {
    let agent = headers.get(USER_AGENT).and_then(|v| v.to_str().ok());
    crate::auth::device::describe(agent, peer.map(|p| p.0.0.ip().to_string()))
}

/// What a refused sign-in tells the person, or the fault it was.
fn refusal(error: AuthError) -> Result<(StatusCode, String), PageError> {
    if error.is_fault() {
        return Err(PageError::internal(error));
    }
    let status = match &error {
        AuthError::Value(_) | AuthError::Invalid(_) => StatusCode::BAD_REQUEST,
        AuthError::Locked { .. } => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::UNAUTHORIZED,
    };
    let text = match &error {
        AuthError::Locked { remaining_seconds } => format!(
            "Account locked for {remaining_seconds} seconds. Try again in {remaining_seconds} seconds."
        ),
        other => other.to_string(),
    };
    Ok((status, text))
}

fn with_status(
    status: StatusCode,
    response: Result<Response, PageError>,
) -> Result<Response, PageError> {
    response.map(|r| (status, r).into_response())
}

/// A signed-in browser: the new session's cookies and the way on.
fn signed(pair: &crate::auth::tokens::TokenPair, next: &str) -> Response {
    let mut response = Redirect::to(next).into_response();
    let headers = response.headers_mut();
    for value in pair_cookies(pair) {
        headers.append(SET_COOKIE, value);
    }
    headers.append(SET_COOKIE, clear_cookie(MFA));
    response
}

/// `POST /login`: email and password.
pub async fn submit(
    State(auth): State<Auth>,
    headers: HeaderMap,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    body: Bytes,
) -> Result<Response, PageError> {
    let fields = Fields::parse(&body);
    let next = safe_next(fields.get("next"));
    let email = fields.get("email").unwrap_or_default().to_owned();
    match auth
        .login(&email, fields.raw("password"), device(&headers, peer))
        .await
    {
        Ok(LoginOutcome::Signed { tokens, .. }) => Ok(signed(&tokens, &next)),
        Ok(LoginOutcome::SecondFactorRequired { mfa_token }) => {
            let mut response = render(&CodePage {
                chrome: Chrome::anonymous(),
                next,
                error: None,
            })?;
            response
                .headers_mut()
                .append(SET_COOKIE, set_cookie(MFA, &mfa_token, None));
            Ok(response)
        }
        Err(error) => {
            let (status, text) = refusal(error)?;
            with_status(
                status,
                render(&LoginPage {
                    chrome: Chrome::anonymous(),
                    next,
                    email,
                    error: Some(text),
                    notice: None,
                }),
            )
        }
    }
}

/// `POST /login/code`: the TOTP or backup code of a pending sign-in.
pub async fn second_factor(
    State(auth): State<Auth>,
    headers: HeaderMap,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    body: Bytes,
) -> Result<Response, PageError> {
    let fields = Fields::parse(&body);
    let next = safe_next(fields.get("next"));
    let again = || {
        let mut response = Redirect::to(&format!(
            "/login?notice=again&next={}",
            super::encode(&next)
        ))
        .into_response();
        response.headers_mut().append(SET_COOKIE, clear_cookie(MFA));
        response
    };
    let Some(step) = cookie(&headers, MFA).map(str::to_owned) else {
        return Ok(again());
    };
    let code = fields.get("code").unwrap_or_default();
    match auth
        .login_second_factor(&step, code, device(&headers, peer))
        .await
    {
        Ok(LoginOutcome::Signed { tokens, .. }) => Ok(signed(&tokens, &next)),
        Ok(LoginOutcome::SecondFactorRequired { .. }) => Ok(again()),
        Err(AuthError::InvalidToken | AuthError::TokenExpired) => Ok(again()),
        Err(AuthError::InvalidCode) => with_status(
            StatusCode::UNAUTHORIZED,
            render(&CodePage {
                chrome: Chrome::anonymous(),
                next,
                error: Some(AuthError::InvalidCode.to_string()),
            }),
        ),
        Err(error) => {
            let (status, text) = refusal(error)?;
            let mut response = with_status(
                status,
                render(&LoginPage {
                    chrome: Chrome::anonymous(),
                    next,
                    email: String::new(),
                    error: Some(text),
                    notice: None,
                }),
            )?;
            response.headers_mut().append(SET_COOKIE, clear_cookie(MFA));
            Ok(response)
        }
    }
}

/// `POST /logout`: ends this browser's session and forgets its cookies.
pub async fn logout(State(auth): State<Auth>, visitor: Visitor) -> Result<Response, PageError> {
    if let Some(caller) = visitor.0
        && let Some(session_id) = caller.session_id().map(str::to_owned)
    {
        match auth
            .end_session(&caller, &session_id, RevokeReason::Logout)
            .await
        {
            Ok(()) | Err(AuthError::NotFound { .. }) => {}
            Err(e) if e.is_fault() => return Err(PageError::internal(e)),
            Err(_) => {}
        }
    }
    let mut response = Redirect::to("/login?notice=signed-out").into_response();
    for name in [SESSION, REFRESH, MFA] {
        response
            .headers_mut()
            .append(SET_COOKIE, clear_cookie(name));
    }
    Ok(response)
}
