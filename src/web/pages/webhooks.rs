//! The developer portal's webhooks (§4.3): create one (its secret shown
//! once), send a test ping, rotate the secret, and a subscription's
//! deliveries with a redeliver button. The same `Webhooks` calls as
//! `/api/webhooks…`; the list itself is on `/developer`
//! ([`super::developer`]).

use askama::Template;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use super::developer::{Extras, HookForm, Part, page};
use super::{Chrome, Fields, render};
use crate::auth::Auth;
use crate::web::error::PageError;
use crate::web::session::SignedIn;
use crate::webhooks::jobs::DeliveryRow;
use crate::webhooks::{Webhooks, WebhooksError};

/// The caller's mistake in words for the page, or the error page for the rest.
fn refusal(error: WebhooksError) -> Result<String, PageError> {
    match error {
        WebhooksError::NotFound | WebhooksError::DeliveryNotFound => Err(PageError::NotFound),
        WebhooksError::Store(e) => Err(PageError::internal(e)),
        WebhooksError::Client(e) => Err(PageError::internal(e)),
        WebhooksError::Contended => Err(PageError::Unavailable(error.to_string())),
        refused => Ok(refused.to_string()),
    }
}

/// The error page for what is not the caller's to change.
fn page_error(error: WebhooksError) -> PageError {
    match refusal(error) {
        Ok(message) => PageError::BadRequest(message),
        Err(e) => e,
    }
}

/// `POST /developer/webhooks`: a new subscription; the list shows its secret
/// once, or the form comes back with the refusal.
pub async fn create(
    State(auth): State<Auth>,
    State(webhooks): State<Webhooks>,
    SignedIn(caller): SignedIn,
    body: Bytes,
) -> Result<Response, PageError> {
    let form = Fields::parse(&body);
    let sent = HookForm {
        url: form.get("url").unwrap_or_default().to_owned(),
        description: form.get("description").unwrap_or_default().to_owned(),
        events: form.all("events"),
    };
    let description = Some(sent.description.clone()).filter(|d| !d.is_empty());
    let owner = caller.user_id.as_str();
    let created = webhooks
        .create(owner, &sent.url, sent.events.clone(), description, None)
        .await;
    let (part, extras) = match created {
        Ok(made) => (
            Part::Webhooks,
            Extras {
                secret: Some((made.subscription.url, made.secret)),
                ..Extras::default()
            },
        ),
        Err(e) => (
            Part::NewWebhook,
            Extras {
                error: Some(refusal(e)?),
                form: Some(sent),
                ..Extras::default()
            },
        ),
    };
    let mut response = page(&auth, &webhooks, caller, part, extras).await?;
    if part == Part::NewWebhook {
        *response.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
    }
    Ok(response)
}

/// `POST /developer/webhooks/{id}/rotate`: a new secret, shown once.
pub async fn rotate(
    State(auth): State<Auth>,
    State(webhooks): State<Webhooks>,
    SignedIn(caller): SignedIn,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let owner = caller.user_id.as_str();
    webhooks.get(owner, &id).await.map_err(page_error)?;
    let made = webhooks
        .rotate_secret(owner, &id)
        .await
        .map_err(page_error)?;
    let extras = Extras {
        secret: Some((made.subscription.url, made.secret)),
        ..Extras::default()
    };
    page(&auth, &webhooks, caller, Part::Webhooks, extras).await
}

/// `POST /developer/webhooks/{id}/ping`: a signed test message now; its
/// delivery is the first on the deliveries page.
pub async fn ping(
    State(webhooks): State<Webhooks>,
    SignedIn(caller): SignedIn,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    webhooks
        .ping(caller.user_id.as_str(), &id)
        .await
        .map_err(page_error)?;
    Ok(Redirect::to(&format!("/developer/webhooks/{id}")).into_response())
}

/// A delivery as the page lists it.
#[derive(Debug)]
struct Delivery {
    id: String,
    event: String,
    status: String,
    attempts: i64,
    code: Option<i64>,
    error: String,
    created: String,
}

impl From<DeliveryRow> for Delivery {
    fn from(row: DeliveryRow) -> Self {
        let created = chrono::DateTime::from_timestamp_millis(row.created_at)
            .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
            .unwrap_or_default();
        Self {
            id: row.delivery_id,
            event: row.event_type,
            status: row.status,
            attempts: row.attempts,
            code: row.response_code,
            error: row.last_error.unwrap_or_default(),
            created,
        }
    }
}

#[derive(Template)]
#[template(path = "webhook_deliveries.html")]
struct DeliveriesPage {
    chrome: Chrome,
    id: String,
    url: String,
    total: i64,
    deliveries: Vec<Delivery>,
}

/// `GET /developer/webhooks/{id}`: the subscription's deliveries, newest first.
pub async fn deliveries(
    State(webhooks): State<Webhooks>,
    State(settings): State<crate::config::WebSettings>,
    SignedIn(caller): SignedIn,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let owner = caller.user_id.as_str();
    let row = webhooks.get(owner, &id).await.map_err(page_error)?;
    let (rows, total) = webhooks
        .deliveries(owner, &id, i64::from(settings.page_size), 0)
        .await
        .map_err(page_error)?;
    render(&DeliveriesPage {
        chrome: Chrome::for_caller(Some(&caller), "developer"),
        id,
        url: row.url,
        total,
        deliveries: rows.into_iter().map(Delivery::from).collect(),
    })
}

/// `POST /developer/webhooks/{id}/deliveries/{delivery}/redeliver`.
pub async fn redeliver(
    State(webhooks): State<Webhooks>,
    SignedIn(caller): SignedIn,
    Path((id, delivery)): Path<(String, String)>,
) -> Result<Response, PageError> {
    webhooks
        .redeliver(caller.user_id.as_str(), &id, &delivery)
        .await
        .map_err(page_error)?;
    Ok(Redirect::to(&format!("/developer/webhooks/{id}")).into_response())
}
