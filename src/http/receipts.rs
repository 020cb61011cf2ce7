//! `/api/v1/receipts` (spec §4.5 Audit): the caller's decision receipts, one
//! receipt as its canonical bytes (or its bare ODR view), and a verification
//! that names each check. Receipts belong to their debate's creator; admins
//! see every one, and another user's receipt is not found.

use axum::Json;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{ApiPath, ApiQuery};
use super::paging::Paging;
use super::ratelimit::Action;
use super::routes::{RouteSpec, Routes};
use crate::auth::Caller;
use crate::auth::rbac::Permission;
use crate::receipts::check::{self, Report};
use crate::receipts::document::Receipt;
use crate::receipts::retention::RetentionStatus;
use crate::receipts::{ReceiptError, ReceiptSummary, Receipts};
use crate::store::canonical;

pub fn routes() -> Routes {
    Routes::new()
        .add(routes!(list_receipts), RouteSpec::new())
        .add(routes!(get_receipt), RouteSpec::new().raw())
        .add(routes!(verify_receipt), RouteSpec::new())
        .add(routes!(retention_status), admin())
        .add(routes!(retention_cleanup), admin())
}

fn admin() -> RouteSpec {
    RouteSpec::new()
        .action(Action::Admin)
        .requires(Permission::Admin)
}

/// Which finished debates to list receipts of.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptStatus {
    #[default]
    Completed,
    Failed,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListReceiptsQuery {
    /// Receipts of completed (default) or failed debates.
    #[param(inline)]
    pub status: Option<ReceiptStatus>,
    /// Page size, default 20, at most SERVICE_MAX_PAGE_SIZE (default 100).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    #[param(minimum = 0)]
    pub offset: Option<i32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReceiptList {
    pub receipts: Vec<ReceiptSummary>,
    /// How many receipts the filter matches in all.
    pub total: u64,
    pub limit: u32,
    pub offset: u32,
}

/// The caller's receipts (every receipt for admins), newest debate first.
#[utoipa::path(get, path = "/api/v1/receipts", tag = "receipts", params(ListReceiptsQuery),
    responses((status = 200, body = ReceiptList)))]
async fn list_receipts(
    State(receipts): State<Receipts>,
    State(paging): State<Paging>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ListReceiptsQuery>,
) -> Result<Json<ReceiptList>, ApiError> {
    let limit = paging.limit(query.limit)?;
    let offset = Paging::offset(query.offset)?;
    let status = match query.status.unwrap_or_default() {
        ReceiptStatus::Completed => "completed",
        ReceiptStatus::Failed => "failed",
    };
    let (items, total) = receipts
        .list(&caller, status, limit, u64::from(offset))
        .await
        .map_err(mapped)?;
    Ok(Json(ReceiptList {
        receipts: items,
        total,
        limit,
        offset,
    }))
}

/// The whole receipt, or only its signed ODR v0.2 view.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptFormat {
    #[default]
    Json,
    Odr,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ReceiptQuery {
    /// `json` (default): the receipt (`event-schemas/RECEIPT.md`); `odr`: its
    /// Open Decision Receipt v0.2 document alone, for `aragora-verify`.
    #[param(inline)]
    pub format: Option<ReceiptFormat>,
}

/// A receipt as its RFC 8785 canonical bytes, every one of which the
/// verifiers check.
#[utoipa::path(get, path = "/api/v1/receipts/{receipt_id}", tag = "receipts",
    params(("receipt_id" = String, Path), ReceiptQuery),
    responses((status = 200, description = "The receipt (event-schemas/receipts/Receipt.v1.json) or its ODR view, canonical JSON",
        content(("application/json"))),
        (status = 404, description = "No such receipt, or not the caller's"),
        (status = 409, description = "The debate has not finished"),
        (status = 503, description = "The debate's events could not be sealed yet")))]
async fn get_receipt(
    State(receipts): State<Receipts>,
    caller: Caller,
    ApiPath(receipt_id): ApiPath<String>,
    ApiQuery(query): ApiQuery<ReceiptQuery>,
) -> Result<Response, ApiError> {
    let receipt = find(&receipts, &caller, receipt_id).await?;
    let body = match query.format.unwrap_or_default() {
        ReceiptFormat::Json => Receipts::text(&receipt),
        ReceiptFormat::Odr => canonical::to_string(&receipt.odr),
    };
    Ok(([(CONTENT_TYPE, "application/json")], body).into_response())
}

/// Verifies the receipt the log gives now, with the seal public key alone:
/// each check in order and the first that fails.
#[utoipa::path(post, path = "/api/v1/receipts/{receipt_id}/verify", tag = "receipts",
    params(("receipt_id" = String, Path)),
    responses((status = 200, body = Report),
        (status = 404, description = "No such receipt, or not the caller's"),
        (status = 409, description = "The debate has not finished"),
        (status = 503, description = "The debate's events could not be sealed yet")))]
async fn verify_receipt(
    State(receipts): State<Receipts>,
    caller: Caller,
    ApiPath(receipt_id): ApiPath<String>,
) -> Result<Json<Report>, ApiError> {
    let receipt = find(&receipts, &caller, receipt_id).await?;
    let bytes = Receipts::text(&receipt).into_bytes();
    Ok(Json(check::verify(&bytes, &receipts.public_key())))
}

/// The receipt-retention scheduler (spec §2.3). Admin only.
#[utoipa::path(get, path = "/api/admin/schedulers/receipt-retention/status", tag = "operations",
    responses((status = 200, body = RetentionStatus)))]
async fn retention_status(State(receipts): State<Receipts>) -> Json<RetentionStatus> {
    Json(receipts.retention_status())
}

/// What a cleanup run did.
#[derive(Debug, Serialize, ToSchema)]
pub struct CleanupResult {
    /// Receipts expired by this run (each a `ReceiptExpired` event).
    pub receipts_deleted: u64,
    pub status: RetentionStatus,
}

/// Expires every receipt past `SERVICE_RECEIPT_RETENTION_DAYS` now, rather
/// than at the next interval. Admin only.
#[utoipa::path(post, path = "/api/admin/schedulers/receipt-retention/cleanup", tag = "operations",
    responses((status = 200, body = CleanupResult)))]
async fn retention_cleanup(
    State(receipts): State<Receipts>,
) -> Result<Json<CleanupResult>, ApiError> {
    let receipts_deleted = receipts.cleanup().await.map_err(mapped)?;
    Ok(Json(CleanupResult {
        receipts_deleted,
        status: receipts.retention_status(),
    }))
}

async fn find(receipts: &Receipts, caller: &Caller, id: String) -> Result<Receipt, ApiError> {
    match receipts.get(caller, &id).await.map_err(mapped)? {
        Some(receipt) => Ok(receipt),
        None => Err(ApiError::NotFound {
            resource_type: "receipt",
            resource_id: Some(id),
        }),
    }
}

fn mapped(e: ReceiptError) -> ApiError {
    match e {
        ReceiptError::Store(e) => e.into(),
        ReceiptError::NotFinished => ApiError::Conflict(e.to_string()),
        ReceiptError::NotSealed => ApiError::Unavailable(e.to_string()),
        other => ApiError::Internal(Box::new(other)),
    }
}
