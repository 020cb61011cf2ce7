//! Joining: `/register` (the self-service sign-up of
//! `POST /api/v1/auth/signup`, which mails a verification link),
//! `/verify-email?token=` and `/invite?token=` (the landings of the mails'
//! links; an invitation is accepted by the signed-in user or by signing up).

use askama::Template;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::{Chrome, Fields, encode, render};
use crate::auth::login::NewAccount;
use crate::auth::signup::InviteCheck;
use crate::auth::{Auth, AuthError, Credential};
use crate::web::error::PageError;
use crate::web::session::Visitor;

#[derive(Template)]
#[template(path = "register.html")]
struct RegisterPage {
    chrome: Chrome,
    email: String,
    name: String,
    error: Option<String>,
}

#[derive(Template)]
#[template(path = "notice.html")]
struct NoticePage {
    chrome: Chrome,
    title: &'static str,
    message: String,
    link: Option<(&'static str, &'static str)>,
}

#[derive(Template)]
#[template(path = "invite.html")]
struct InvitePage {
    chrome: Chrome,
    token: String,
    check: InviteCheck,
    signed_in: bool,
    login_link: String,
    name: String,
    error: Option<String>,
}

/// A refusal a person can act on, or the fault it was.
fn told(error: AuthError) -> Result<String, PageError> {
    if error.is_fault() {
        Err(PageError::internal(error))
    } else {
        Ok(error.to_string())
    }
}

/// `GET /register`.
pub async fn form(visitor: Visitor) -> Result<Response, PageError> {
    if visitor.0.is_some() {
        return Ok(Redirect::to("/").into_response());
    }
    render(&RegisterPage {
        chrome: Chrome::for_caller(None, "register"),
        email: String::new(),
        name: String::new(),
        error: None,
    })
}

/// `POST /register`: creates an unverified account and mails its link.
pub async fn submit(State(auth): State<Auth>, body: Bytes) -> Result<Response, PageError> {
    let fields = Fields::parse(&body);
    let (email, name) = (
        fields.get("email").unwrap_or_default(),
        fields.get("name").unwrap_or_default(),
    );
    let new = NewAccount {
        email,
        password: fields.raw("password"),
        name,
    };
    match auth.signup(new).await {
        Ok((_, sent)) => {
            let message = if sent {
                "We sent you a mail with a link to verify your address. You can sign in now."
            } else {
                "Your account exists, but the verification mail could not be sent. You can sign in now."
            };
            render(&NoticePage {
                chrome: Chrome::anonymous(),
                title: "Check your mail",
                message: message.to_owned(),
                link: Some(("/login?notice=registered", "Sign in")),
            })
        }
        Err(error) => {
            let status = match &error {
                AuthError::Conflict(_) => StatusCode::CONFLICT,
                _ => StatusCode::BAD_REQUEST,
            };
            let page = RegisterPage {
                chrome: Chrome::anonymous(),
                email: email.to_owned(),
                name: name.to_owned(),
                error: Some(told(error)?),
            };
            Ok((status, render(&page)?).into_response())
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct TokenQuery {
    token: Option<String>,
}

/// `GET /verify-email?token=`: the verification mail's landing.
pub async fn verify_email(
    State(auth): State<Auth>,
    visitor: Visitor,
    Query(query): Query<TokenQuery>,
) -> Result<Response, PageError> {
    let token = query.token.unwrap_or_default();
    let chrome = Chrome::of(&visitor, "");
    let (status, page) = match auth.verify_email(&token).await {
        Ok(_) => (
            StatusCode::OK,
            NoticePage {
                chrome,
                title: "Email verified",
                message: "Your email address is verified.".to_owned(),
                link: Some(if visitor.0.is_some() {
                    ("/", "Continue")
                } else {
                    ("/login?notice=verified", "Sign in")
                }),
            },
        ),
        Err(error) => {
            let status = match &error {
                AuthError::NotFound { .. } => StatusCode::NOT_FOUND,
                _ => StatusCode::CONFLICT,
            };
            let message = match told(error)? {
                m if status == StatusCode::NOT_FOUND => {
                    format!("{m}: the link is wrong or was replaced by a newer one.")
                }
                m => m,
            };
            (
                status,
                NoticePage {
                    chrome,
                    title: "This link cannot be used",
                    message,
                    link: None,
                },
            )
        }
    };
    Ok((status, render(&page)?).into_response())
}

/// `GET /invite?token=`: what the invitation offers, and how to accept it.
pub async fn invitation(
    State(auth): State<Auth>,
    visitor: Visitor,
    Query(query): Query<TokenQuery>,
) -> Result<Response, PageError> {
    let token = query.token.unwrap_or_default();
    invite_page(&auth, &visitor, token, String::new(), None).await
}

async fn invite_page(
    auth: &Auth,
    visitor: &Visitor,
    token: String,
    name: String,
    error: Option<String>,
) -> Result<Response, PageError> {
    let check = auth
        .check_invite(&token)
        .await
        .map_err(PageError::internal)?;
    let status = match (&error, check.valid) {
        (Some(_), _) => StatusCode::BAD_REQUEST,
        (None, true) => StatusCode::OK,
        (None, false) => StatusCode::NOT_FOUND,
    };
    let page = InvitePage {
        chrome: Chrome::of(visitor, ""),
        login_link: format!("/login?next={}", encode(&format!("/invite?token={token}"))),
        token,
        check,
        signed_in: visitor.0.is_some(),
        name,
        error,
    };
    Ok((status, render(&page)?).into_response())
}

/// `POST /invite`: accepts as the signed-in user, or signs up as the invitee.
pub async fn accept(
    State(auth): State<Auth>,
    visitor: Visitor,
    body: Bytes,
) -> Result<Response, PageError> {
    let fields = Fields::parse(&body);
    let token = fields.get("token").unwrap_or_default().to_owned();
    let caller = visitor
        .0
        .as_ref()
        .filter(|c| matches!(c.credential, Credential::Session { .. }));
    let name = fields.get("name").unwrap_or_default().to_owned();
    let new_account = caller
        .is_none()
        .then_some((name.as_str(), fields.raw("password")));
    match auth.accept_invite(&token, caller, new_account).await {
        Ok(membership) => {
            let (link, message) = if caller.is_some() {
                (
                    ("/", "Continue"),
                    format!("You joined {}.", membership.org_name),
                )
            } else {
                (
                    ("/login", "Sign in"),
                    format!(
                        "Your account is ready and you joined {}. Sign in with the password you chose.",
                        membership.org_name
                    ),
                )
            };
            render(&NoticePage {
                chrome: Chrome::of(&visitor, ""),
                title: "Invitation accepted",
                message,
                link: Some(link),
            })
        }
        Err(error) => {
            let text = told(error)?;
            invite_page(&auth, &visitor, token, name, Some(text)).await
        }
    }
}
