//! `/api/v1/audit-trails`: one subject's ordered, chain-linked history (a
//! debate, an account, an organization, …): the list, one trail (also as of
//! a past position or time, with the debate as it was shown then), its
//! export as JSON, CSV or Markdown, and its verification. Trails of subjects
//! the caller does not own are not found, unless the caller is an admin.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use super::file;
use super::views::{AuditVerifyView, TrailEntryView, TrailSummaryView};
use crate::audit::export::Format;
use crate::audit::{Audit, Viewer};
use crate::auth::Caller;
use crate::http::as_of::AsOfQuery;
use crate::http::error::ApiError;
use crate::http::extract::{ApiPath, ApiQuery};
use crate::http::ratelimit::Action;
use crate::http::routes::{RouteSpec, Routes};
use crate::views::debates::DebateDetail;

pub fn routes() -> Routes {
    Routes::new()
        .add(routes!(list_trails), RouteSpec::new())
        .add(routes!(read_trail), RouteSpec::new())
        .add(
            routes!(export_trail),
            RouteSpec::new().action(Action::Export),
        )
        .add(routes!(verify_trail), RouteSpec::new())
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TrailListQuery {
    /// Page size, default 20; above SERVICE_AUDIT_PAGE_MAX (default 500) it is reduced to it.
    #[param(minimum = 1)]
    pub limit: Option<i32>,
    #[param(minimum = 0)]
    pub offset: Option<i32>,
}

/// Trails, most recently changed first.
#[derive(Debug, Serialize, ToSchema)]
pub struct TrailList {
    pub trails: Vec<TrailSummaryView>,
    pub total: i64,
    pub limit: u32,
    pub offset: u32,
}

/// The trails of the caller's subjects (every trail for admins).
#[utoipa::path(get, path = "/api/audit-trails", tag = "audit", params(TrailListQuery),
    responses((status = 200, body = TrailList), (status = 400, description = "limit is 0")))]
async fn list_trails(
    State(audit): State<Audit>,
    caller: Caller,
    ApiQuery(query): ApiQuery<TrailListQuery>,
) -> Result<Json<TrailList>, ApiError> {
    let limit = super::page_limit(query.limit, 20, audit.settings().page_max)?;
    let offset = u32::try_from(query.offset.unwrap_or(0))
        .map_err(|_| ApiError::bad_request("offset must not be negative"))?;
    let (trails, total) = audit
        .trails(&Viewer::of(&caller), limit, u64::from(offset))
        .await?;
    Ok(Json(TrailList {
        trails: trails.into_iter().map(Into::into).collect(),
        total,
        limit,
        offset,
    }))
}

/// A trail, in log order.
#[derive(Debug, Serialize, ToSchema)]
pub struct TrailView {
    #[serde(flatten)]
    pub summary: TrailSummaryView,
    /// The `as_of` the trail was read up to, when one was given.
    pub as_of: Option<String>,
    pub events: Vec<TrailEntryView>,
    /// For a debate: the detail exactly as the service showed it at
    /// `as_of` (or now), rebuilt from the log by the live read's fold.
    pub state: Option<DebateDetail>,
}

/// One trail, now or as of a position or time.
#[utoipa::path(get, path = "/api/audit-trails/{trail_id}", tag = "audit",
    params(("trail_id" = String, Path, description = "`<subject_type>:<subject_id>`"), AsOfQuery),
    responses((status = 200, body = TrailView),
        (status = 400, description = "as_of is neither a position nor an RFC 3339 time"),
        (status = 404, description = "No such trail, or not the caller's")))]
async fn read_trail(
    State(audit): State<Audit>,
    caller: Caller,
    ApiPath(trail_id): ApiPath<String>,
    ApiQuery(query): ApiQuery<AsOfQuery>,
) -> Result<Json<TrailView>, ApiError> {
    let as_of = query.parsed()?;
    let trail = audit.trail(&Viewer::of(&caller), &trail_id, as_of).await?;
    Ok(Json(TrailView {
        summary: trail.summary.into(),
        as_of: query.as_of,
        events: trail.entries.into_iter().map(Into::into).collect(),
        state: trail.state,
    }))
}

/// json (with the verification report), csv or md.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TrailFormat {
    #[default]
    Json,
    Csv,
    Md,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TrailExportQuery {
    #[param(inline)]
    pub format: Option<TrailFormat>,
}

/// The trail as a file: JSON (every entry with its hashes, and the
/// verification report; `verify_trail_export.py` rechecks it), CSV or Markdown.
#[utoipa::path(get, path = "/api/audit-trails/{trail_id}/export", tag = "audit",
    params(("trail_id" = String, Path), TrailExportQuery),
    responses((status = 200, description = "The trail",
        content(("application/json"), ("text/csv"), ("text/markdown"))),
        (status = 400, description = "Unknown format"),
        (status = 404, description = "No such trail, or not the caller's")))]
async fn export_trail(
    State(audit): State<Audit>,
    caller: Caller,
    ApiPath(trail_id): ApiPath<String>,
    ApiQuery(query): ApiQuery<TrailExportQuery>,
) -> Result<axum::response::Response, ApiError> {
    let format = match query.format.unwrap_or_default() {
        TrailFormat::Json => Format::Json,
        TrailFormat::Csv => Format::Csv,
        TrailFormat::Md => Format::Markdown,
    };
    let exported = audit
        .export_trail(&Viewer::of(&caller), &trail_id, format)
        .await?;
    Ok(file(exported))
}

/// Re-checks the trail's chain and every seal over its events.
#[utoipa::path(post, path = "/api/audit-trails/{trail_id}/verify", tag = "audit",
    params(("trail_id" = String, Path)),
    responses((status = 200, body = AuditVerifyView),
        (status = 404, description = "No such trail, or not the caller's")))]
async fn verify_trail(
    State(audit): State<Audit>,
    caller: Caller,
    ApiPath(trail_id): ApiPath<String>,
) -> Result<Json<AuditVerifyView>, ApiError> {
    let report = audit.verify_trail(&Viewer::of(&caller), &trail_id).await?;
    Ok(Json((&report).into()))
}
