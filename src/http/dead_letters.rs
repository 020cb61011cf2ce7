//! `GET /api/admin/dead-letters` and `POST /api/admin/dead-letters/{id}/retry`:
//! the events consumers gave up on, and handing one to its consumer again.
//! Admin only.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::ApiPath;
use super::ratelimit::Action;
use super::routes::{RouteSpec, Routes};
use crate::auth::rbac::Permission;
use crate::ops::Ops;
use crate::store::dead_letters::DeadLetter;

pub fn routes() -> Routes {
    let admin = || {
        RouteSpec::new()
            .action(Action::Admin)
            .requires(Permission::Admin)
    };
    Routes::new()
        .add(routes!(list), admin())
        .add(routes!(retry), admin())
}

/// One event a consumer gave up on.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeadLetterView {
    pub id: String,
    /// The consumer that gave up.
    pub consumer: String,
    pub event_id: String,
    /// The event's place in the feed.
    pub position: i64,
    pub txid: i64,
    /// The last failure.
    pub reason: String,
    pub attempts: i64,
    /// When it last failed (RFC 3339, UTC).
    pub failed_at: String,
    /// Set while a retry waits for the consumer.
    pub retry_requested_at: Option<String>,
}

impl From<DeadLetter> for DeadLetterView {
    fn from(letter: DeadLetter) -> Self {
        Self {
            id: letter.id,
            consumer: letter.consumer,
            event_id: letter.event_id,
            position: letter.position,
            txid: letter.txid,
            reason: letter.reason,
            attempts: letter.attempts,
            failed_at: letter.failed_at,
            retry_requested_at: letter.retry_requested_at,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeadLetters {
    pub dead_letters: Vec<DeadLetterView>,
}

/// Every dead letter, oldest event first.
#[utoipa::path(get, path = "/api/admin/dead-letters", tag = "operations",
    responses((status = 200, body = DeadLetters)))]
async fn list(State(ops): State<Ops>) -> Result<Json<DeadLetters>, ApiError> {
    let letters = ops.dead_letters().await?;
    Ok(Json(DeadLetters {
        dead_letters: letters.into_iter().map(Into::into).collect(),
    }))
}

/// Hands the dead letter's event to its consumer again; the dead letter
/// goes away when it succeeds, and records the failure when it does not.
#[utoipa::path(post, path = "/api/admin/dead-letters/{id}/retry", tag = "operations",
    params(("id" = String, Path)),
    responses((status = 202, body = DeadLetterView), (status = 404, description = "No such dead letter")))]
async fn retry(
    State(ops): State<Ops>,
    ApiPath(id): ApiPath<String>,
) -> Result<(axum::http::StatusCode, Json<DeadLetterView>), ApiError> {
    match ops.retry_dead_letter(&id).await? {
        Some(letter) => Ok((axum::http::StatusCode::ACCEPTED, Json(letter.into()))),
        None => Err(ApiError::NotFound {
            resource_type: "dead letter",
            resource_id: Some(id),
        }),
    }
}
