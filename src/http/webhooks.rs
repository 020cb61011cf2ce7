//! `/api/webhooks`: the caller's outgoing webhook subscriptions (spec §6.2):
//! register, list, read, change, delete, rotate the secret, send a test
//! message, list deliveries and send one again. Each subscription belongs to
//! the account holder who made it; others get 404. Under v2 these routes
//! take an OAuth 2.0 access token only, not an API key (§9 rule 5).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use super::caller::AccountHolder;
use super::error::ApiError;
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::paging::Paging;
use super::routes::{RouteSpec, Routes};
use crate::webhooks::{Changes, DeliveryRow, SubscriptionRow, Webhooks, WebhooksError, WithSecret};
use crate::webhooks::{sign, url_form};
use agon_aggregates::webhook::WEBHOOK_EVENTS;

pub fn routes() -> Routes {
    Routes::new()
        .add(
            routes!(create_webhook, list_webhooks),
            RouteSpec::new().oauth_under_v2(),
        )
        .add(
            routes!(webhook_event_names),
            RouteSpec::new().oauth_under_v2(),
        )
        .add(
            routes!(read_webhook, update_webhook, delete_webhook),
            RouteSpec::new().oauth_under_v2(),
        )
        .add(
            routes!(rotate_webhook_secret),
            RouteSpec::new().oauth_under_v2(),
        )
        .add(routes!(test_webhook), RouteSpec::new().oauth_under_v2())
        .add(
            routes!(list_webhook_deliveries),
            RouteSpec::new().oauth_under_v2(),
        )
        .add(
            routes!(redeliver_webhook),
            RouteSpec::new().oauth_under_v2(),
        )
}

/// States in `doc` what a subscription's `url` may be (the form
/// [`url_form::check`] accepts), for registration and change alike; where
/// the host points is checked on top of it and refused with 422.
///
/// The other fields are stated as the Webhook aggregate and the signer
/// check them, with the description's bound from the settings.
pub fn fit_schema(doc: &mut Value, url_max_chars: usize, description_max_chars: usize) {
    for component in ["CreateWebhook", "UpdateWebhook"] {
        let pointer = format!("/components/schemas/{component}/properties");
        let Some(fields) = doc.pointer_mut(&pointer) else {
            continue;
        };
        let url = &mut fields["url"];
        url["format"] = json!("uri");
        url["pattern"] = json!(url_form::PATTERN);
        url["minLength"] = json!(url_form::MIN_CHARS);
        url["maxLength"] = json!(url_max_chars);
        let events = &mut fields["events"];
        events["items"] = json!({"type": "string", "enum": WEBHOOK_EVENTS});
        events["minItems"] = json!(1);
        events["maxItems"] = json!(WEBHOOK_EVENTS.len());
        events["uniqueItems"] = json!(true);
        fields["description"]["maxLength"] = json!(description_max_chars);
        if let Some(secret) = fields.get_mut("secret") {
            secret["pattern"] = json!(sign::SECRET_PATTERN);
        }
    }
}

impl From<WebhooksError> for ApiError {
    fn from(error: WebhooksError) -> Self {
        let field =
            |name: &str, message: String| ApiError::validation(message, json!({"field": name}));
        match error {
            WebhooksError::Refused(refusal) => {
                let name = match refusal.rule {
                    "WEBHOOK_EVENTS" => Some("events"),
                    "WEBHOOK_DESCRIPTION" => Some("description"),
                    _ => None,
                };
                ApiError::rejected(&refusal, name)
            }
            e @ WebhooksError::Target(_) => field("url", e.to_string()),
            e @ WebhooksError::BadSecret => field("secret", e.to_string()),
            e @ (WebhooksError::TooMany { .. } | WebhooksError::Contended) => {
                ApiError::Conflict(e.to_string())
            }
            WebhooksError::NotFound => ApiError::NotFound {
                resource_type: "webhook",
                resource_id: None,
            },
            WebhooksError::DeliveryNotFound => ApiError::NotFound {
                resource_type: "delivery",
                resource_id: None,
            },
            WebhooksError::Store(e) => e.into(),
            e @ WebhooksError::Client(_) => ApiError::Internal(Box::new(e)),
        }
    }
}

/// A subscription; never its secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookView {
    pub id: String,
    /// The id again, under the name the upstream SDK reads.
    pub webhook_id: String,
    pub url: String,
    pub events: Vec<String>,
    pub description: Option<String>,
    /// Whether deliveries go out; false after sustained failure until the
    /// owner sets it again (`PATCH` with `active: true`).
    pub active: bool,
    /// `failing` (disabled by the service) or `owner`; null while active.
    pub disabled_reason: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<SubscriptionRow> for WebhookView {
    fn from(row: SubscriptionRow) -> Self {
        Self {
            events: row.event_names(),
            id: row.subscription_id.clone(),
            webhook_id: row.subscription_id,
            url: row.url,
            description: row.description,
            active: row.active == 1,
            disabled_reason: row.disabled_reason,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

/// A subscription with its signing secret, shown only in this response.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookWithSecret {
    #[serde(flatten)]
    pub webhook: WebhookView,
    /// `whsec_` and the base64 of the key: verify deliveries with it
    /// (Standard Webhooks). It is never shown again.
    pub secret: String,
}

impl From<WithSecret> for WebhookWithSecret {
    fn from(created: WithSecret) -> Self {
        Self {
            webhook: created.subscription.into(),
            secret: created.secret,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateWebhook {
    /// Where deliveries are posted: an absolute http or https URL with a
    /// host and no user information, at most `SERVICE_WEBHOOK_URL_MAX_CHARS`
    /// characters, whose host is a public address (or in an allowed network).
    pub url: String,
    /// Event names: `debate.completed`, `debate.verdict`, `debate.failed`.
    pub events: Vec<String>,
    pub description: Option<String>,
    /// A secret of your own (`whsec_` + base64 of 24 to 64 bytes); one is drawn when absent.
    pub secret: Option<String>,
}

/// Registers a subscription; the response carries its secret, once.
#[utoipa::path(post, path = "/api/webhooks", tag = "webhooks", request_body = CreateWebhook,
    responses((status = 201, body = WebhookWithSecret), (status = 422, description = "Bad url, events or secret")))]
async fn create_webhook(
    State(webhooks): State<Webhooks>,
    AccountHolder(caller): AccountHolder,
    ApiJson(body): ApiJson<CreateWebhook>,
) -> Result<(StatusCode, Json<WebhookWithSecret>), ApiError> {
    let created = webhooks
        .create(
            &caller.user_id,
            &body.url,
            body.events,
            body.description,
            body.secret,
        )
        .await?;
    Ok((StatusCode::CREATED, Json(created.into())))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only subscriptions that deliver now.
    pub active_only: Option<bool>,
    /// Page size, default 20, at most SERVICE_MAX_PAGE_SIZE (default 100).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    #[param(minimum = 0)]
    pub offset: Option<i32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookList {
    pub webhooks: Vec<WebhookView>,
    pub total: i64,
    pub limit: u32,
    pub offset: u32,
}

/// The caller's subscriptions, oldest first.
#[utoipa::path(get, path = "/api/webhooks", tag = "webhooks", params(ListQuery),
    responses((status = 200, body = WebhookList)))]
async fn list_webhooks(
    State(webhooks): State<Webhooks>,
    State(paging): State<Paging>,
    AccountHolder(caller): AccountHolder,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<WebhookList>, ApiError> {
    let limit = paging.limit(query.limit)?;
    let offset = Paging::offset(query.offset)?;
    let (rows, total) = webhooks
        .list(
            &caller.user_id,
            query.active_only.unwrap_or(false),
            i64::from(limit),
            i64::from(offset),
        )
        .await?;
    Ok(Json(WebhookList {
        webhooks: rows.into_iter().map(Into::into).collect(),
        total,
        limit,
        offset,
    }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EventNames {
    pub events: Vec<String>,
}

/// The event names a subscription may ask for.
#[utoipa::path(get, path = "/api/webhooks/events", tag = "webhooks",
    responses((status = 200, body = EventNames)))]
async fn webhook_event_names(_holder: AccountHolder) -> Json<EventNames> {
    Json(EventNames {
        events: WEBHOOK_EVENTS.iter().map(|e| (*e).to_owned()).collect(),
    })
}

#[utoipa::path(get, path = "/api/webhooks/{id}", tag = "webhooks", params(("id" = String, Path, description = "The subscription's id (a UUID)", pattern = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")),
    responses((status = 200, body = WebhookView), (status = 404, description = "No such webhook of the caller's")))]
async fn read_webhook(
    State(webhooks): State<Webhooks>,
    AccountHolder(caller): AccountHolder,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<WebhookView>, ApiError> {
    Ok(Json(webhooks.get(&caller.user_id, &id).await?.into()))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct UpdateWebhook {
    /// A new target, as at registration.
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    pub description: Option<String>,
    /// `true` enables a disabled subscription (its waiting deliveries go out).
    pub active: Option<bool>,
}

/// Changes the fields given.
#[utoipa::path(patch, path = "/api/webhooks/{id}", tag = "webhooks", params(("id" = String, Path, description = "The subscription's id (a UUID)", pattern = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")),
    request_body = UpdateWebhook,
    responses((status = 200, body = WebhookView), (status = 404, description = "No such webhook of the caller's")))]
async fn update_webhook(
    State(webhooks): State<Webhooks>,
    AccountHolder(caller): AccountHolder,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<UpdateWebhook>,
) -> Result<Json<WebhookView>, ApiError> {
    let changes = Changes {
        url: body.url,
        events: body.events,
        description: body.description,
        active: body.active,
    };
    Ok(Json(
        webhooks.update(&caller.user_id, &id, changes).await?.into(),
    ))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Deleted {
    pub deleted: bool,
    pub id: String,
}

/// Deletes the subscription; its deliveries are forgotten.
#[utoipa::path(delete, path = "/api/webhooks/{id}", tag = "webhooks", params(("id" = String, Path, description = "The subscription's id (a UUID)", pattern = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")),
    responses((status = 200, body = Deleted), (status = 404, description = "No such webhook of the caller's")))]
async fn delete_webhook(
    State(webhooks): State<Webhooks>,
    AccountHolder(caller): AccountHolder,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Deleted>, ApiError> {
    webhooks.delete(&caller.user_id, &id).await?;
    Ok(Json(Deleted { deleted: true, id }))
}

/// A new signing secret, shown once; the old one stops signing at once.
#[utoipa::path(post, path = "/api/webhooks/{id}/rotate-secret", tag = "webhooks",
    params(("id" = String, Path, description = "The subscription's id (a UUID)", pattern = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")),
    responses((status = 200, body = WebhookWithSecret), (status = 404, description = "No such webhook of the caller's")))]
async fn rotate_webhook_secret(
    State(webhooks): State<Webhooks>,
    AccountHolder(caller): AccountHolder,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<WebhookWithSecret>, ApiError> {
    Ok(Json(
        webhooks.rotate_secret(&caller.user_id, &id).await?.into(),
    ))
}

/// One delivery: what was sent and how it went.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryView {
    pub id: String,
    pub webhook_id: String,
    /// The `webhook-id` header: the event id, the receiver's idempotency key.
    pub message_id: String,
    pub event_type: String,
    /// `pending`, `delivered` or `failed` (given up).
    pub status: String,
    pub attempts: i64,
    /// The receiver's last status code; null when it never answered.
    pub response_code: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: Option<String>,
    pub last_attempt_at: Option<String>,
    /// When a pending delivery is tried next.
    pub next_attempt_at: Option<String>,
}

fn millis(ms: i64) -> Option<String> {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
}

impl From<DeliveryRow> for DeliveryView {
    fn from(row: DeliveryRow) -> Self {
        let pending = row.status == crate::webhooks::jobs::PENDING;
        Self {
            id: row.delivery_id,
            webhook_id: row.subscription_id,
            message_id: row.message_id,
            event_type: row.event_type,
            status: row.status,
            attempts: row.attempts,
            response_code: row.response_code,
            last_error: row.last_error,
            created_at: millis(row.created_at),
            last_attempt_at: row.last_attempt_at.and_then(millis),
            next_attempt_at: pending.then(|| millis(row.next_attempt_at)).flatten(),
        }
    }
}

/// Sends a signed `webhook.ping` now; answers how it went.
#[utoipa::path(post, path = "/api/webhooks/{id}/test", tag = "webhooks", params(("id" = String, Path, description = "The subscription's id (a UUID)", pattern = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")),
    responses((status = 200, body = DeliveryView), (status = 404, description = "No such webhook of the caller's")))]
async fn test_webhook(
    State(webhooks): State<Webhooks>,
    AccountHolder(caller): AccountHolder,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<DeliveryView>, ApiError> {
    Ok(Json(webhooks.ping(&caller.user_id, &id).await?.into()))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Page size, default 20, at most SERVICE_MAX_PAGE_SIZE (default 100).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    #[param(minimum = 0)]
    pub offset: Option<i32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryList {
    pub deliveries: Vec<DeliveryView>,
    pub total: i64,
    pub limit: u32,
    pub offset: u32,
}

/// The subscription's deliveries, newest first.
#[utoipa::path(get, path = "/api/webhooks/{id}/deliveries", tag = "webhooks",
    params(("id" = String, Path, description = "The subscription's id (a UUID)", pattern = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"), PageQuery),
    responses((status = 200, body = DeliveryList), (status = 404, description = "No such webhook of the caller's")))]
async fn list_webhook_deliveries(
    State(webhooks): State<Webhooks>,
    State(paging): State<Paging>,
    AccountHolder(caller): AccountHolder,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<DeliveryList>, ApiError> {
    let limit = paging.limit(query.limit)?;
    let offset = Paging::offset(query.offset)?;
    let (rows, total) = webhooks
        .deliveries(&caller.user_id, &id, i64::from(limit), i64::from(offset))
        .await?;
    Ok(Json(DeliveryList {
        deliveries: rows.into_iter().map(Into::into).collect(),
        total,
        limit,
        offset,
    }))
}

/// Queues the delivery again (same `webhook-id`); it goes out in its turn.
#[utoipa::path(post, path = "/api/webhooks/{id}/deliveries/{delivery_id}/redeliver", tag = "webhooks",
    params(("id" = String, Path, description = "The subscription's id (a UUID)", pattern = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"), ("delivery_id" = String, Path)),
    responses((status = 202, body = DeliveryView), (status = 404, description = "No such webhook or delivery")))]
async fn redeliver_webhook(
    State(webhooks): State<Webhooks>,
    AccountHolder(caller): AccountHolder,
    ApiPath((id, delivery_id)): ApiPath<(String, String)>,
) -> Result<(StatusCode, Json<DeliveryView>), ApiError> {
    let row = webhooks
        .redeliver(&caller.user_id, &id, &delivery_id)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(row.into())))
}
