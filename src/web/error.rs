//! What a page answers when it cannot do what was asked: a typed error
//! mapped to an HTML page with the right status (never a bare 500 for a
//! bad request), or to the sign-in page for an anonymous visitor.

use askama::Template;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use thiserror::Error;

use super::pages::Chrome;

#[derive(Debug, Error)]
pub enum PageError {
    /// The page needs a signed-in user; `next` is where to return.
    #[error("sign-in required")]
    SignIn { next: String },
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("not found")]
    NotFound,
    #[error("bad request: {0}")]
    BadRequest(String),
    #[error("unavailable: {0}")]
    Unavailable(String),
    #[error("internal: {0}")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl PageError {
    pub fn internal(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Internal(Box::new(e))
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    chrome: Chrome,
    status: u16,
    title: &'static str,
    message: String,
}

/// The HTML page for `status` with `message`.
pub fn error_page(status: StatusCode, title: &'static str, message: String) -> Response {
    let page = ErrorPage {
        chrome: Chrome::anonymous(),
        status: status.as_u16(),
        title,
        message,
    };
    match page.render() {
        Ok(html) => (status, Html(html)).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "the error page did not render");
            (
                status,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                title,
            )
                .into_response()
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        match self {
            PageError::SignIn { next } => {
                Redirect::to(&format!("/login?next={}", super::pages::encode(&next)))
                    .into_response()
            }
            PageError::Forbidden(message) => {
                error_page(StatusCode::FORBIDDEN, "Not allowed", message)
            }
            PageError::NotFound => error_page(
                StatusCode::NOT_FOUND,
                "Page not found",
                "There is nothing at this address, or you may not see it.".to_owned(),
            ),
            PageError::BadRequest(message) => {
                error_page(StatusCode::BAD_REQUEST, "Bad request", message)
            }
            PageError::Unavailable(message) => error_page(
                StatusCode::SERVICE_UNAVAILABLE,
                "Try again shortly",
                message,
            ),
            PageError::Internal(cause) => {
                tracing::error!(cause = %cause, "page failed");
                error_page(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Something went wrong",
                    "The service could not answer. Try again shortly.".to_owned(),
                )
            }
        }
    }
}
