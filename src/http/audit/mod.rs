//! The audit API (issue 25): `GET /api/audit/head` and
//! `GET /api/audit/consistency` (public: the newest seal, and the seals that
//! show one seal extends another, so outsiders can keep copies and detect a
//! cut or rewritten history), `POST /api/audit/verify` (admin: the whole
//! log or a range), `GET /api/audit/events`, `GET /api/audit/stats` and
//! `POST /api/audit/export` (every user's entries for admins, one's own
//! subjects otherwise; the SOC 2 package for admins only). The trails are
//! in [`trails`].

mod trails;
pub mod views;

use axum::Json;
use axum::extract::State;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{ApiJson, ApiQuery};
use super::ratelimit::Action;
use super::routes::{RouteSpec, Routes};
use crate::audit::entries::EntryFilter;
use crate::audit::export::{Exported, Format};
use crate::audit::{Audit, Viewer};
use crate::auth::Caller;
use crate::auth::rbac::Permission;
use crate::store::expect::SavedSeal;
use crate::store::verify::PositionRange;
use views::{AuditVerifyView, EntryView, ProblemView, SealView};

pub fn routes() -> Routes {
    let admin = || {
        RouteSpec::new()
            .action(Action::Admin)
            .requires(Permission::Admin)
    };
    Routes::new()
        .add(routes!(head), RouteSpec::new().public())
        .add(routes!(consistency), RouteSpec::new().public())
        .add(routes!(verify_log, verify_log_get), admin())
        .add(routes!(events), RouteSpec::new())
        .add(routes!(audit_stats), RouteSpec::new())
        .add(routes!(export), RouteSpec::new().action(Action::Export))
        .merge(trails::routes())
}

/// The newest seal and the key that signs every seal.
#[derive(Debug, Serialize, ToSchema)]
pub struct HeadView {
    /// Hex ed25519 public key of this log's seals.
    pub public_key: String,
    /// The newest seal; null before the first.
    pub seal: Option<SealView>,
}

/// The newest seal, for outsiders to keep: a later `GET /api/audit/consistency`
/// or `agon verify --expect-seal` shows the log still extends it.
#[utoipa::path(get, path = "/api/audit/head", tag = "audit",
    responses((status = 200, body = HeadView)))]
async fn head(State(audit): State<Audit>) -> Result<Json<HeadView>, ApiError> {
    let seal = audit.head().await?;
    Ok(Json(HeadView {
        public_key: audit.public_key().to_owned(),
        seal: seal.as_ref().map(Into::into),
    }))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ConsistencyQuery {
    /// The seal number the caller holds (0: the empty log).
    #[param(minimum = 0)]
    pub from: i64,
    /// A later seal number, at most the newest.
    #[param(minimum = 0)]
    pub to: i64,
}

/// Why seal `to` extends seal `from`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConsistencyView {
    pub from: i64,
    pub to: i64,
    /// True when every seal after `from` through `to` links to the one before.
    pub consistent: bool,
    /// Seal `from` as the log holds it now: compare it with your copy.
    pub from_seal: Option<SealView>,
    /// Seals `from + 1` to `to` in order: each body's `prev_seal_hash` is the
    /// `seal_hash` before it and its `from` the previous `to`.
    pub seals: Vec<SealView>,
    /// The first seal that does not extend the one before.
    pub problem: Option<ProblemView>,
    /// How the proof is built: seals cover disjoint ranges, each its own
    /// RFC 6962 tree, so the chain of seals is the proof.
    pub method: String,
}

/// The proof that seal `to` extends seal `from`.
#[utoipa::path(get, path = "/api/audit/consistency", tag = "audit", params(ConsistencyQuery),
    responses((status = 200, body = ConsistencyView),
        (status = 400, description = "A parameter is not a number"),
        (status = 404, description = "No such seal, or from is above to")))]
async fn consistency(
    State(audit): State<Audit>,
    ApiQuery(query): ApiQuery<ConsistencyQuery>,
) -> Result<Json<ConsistencyView>, ApiError> {
    let proof = audit.consistency(query.from, query.to).await?;
    Ok(Json(ConsistencyView {
        from: proof.from,
        to: proof.to,
        consistent: proof.problem.is_none(),
        from_seal: proof.from_seal.as_ref().map(Into::into),
        seals: proof.seals.iter().map(Into::into).collect(),
        problem: proof.problem.as_ref().map(Into::into),
        method: "chained-seals".to_owned(),
    }))
}

/// What to verify: the whole log unless a range is given.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyBody {
    /// First position to check.
    #[serde(default, deserialize_with = "crate::http::whole::optional")]
    #[schema(minimum = 0, maximum = 9007199254740991_i64)]
    pub from_position: Option<i64>,
    /// Last position to check.
    #[serde(default, deserialize_with = "crate::http::whole::optional")]
    #[schema(minimum = 0, maximum = 9007199254740991_i64)]
    pub to_position: Option<i64>,
    /// A seal kept earlier (`GET /api/audit/head`'s `seal`) that the log must
    /// still hold exactly.
    pub expect_seal: Option<views::SavedSealInput>,
}

/// The largest position a request names (2^53 - 1, exact in every JSON client).
const MAX_POSITION: i64 = 9_007_199_254_740_991;

async fn run_verify(audit: &Audit, body: VerifyBody) -> Result<Json<AuditVerifyView>, ApiError> {
    let mut numbers = vec![
        ("from_position", body.from_position),
        ("to_position", body.to_position),
    ];
    if let Some(seal) = &body.expect_seal {
        numbers.extend(seal.numbers().map(|(field, n)| (field, Some(n))));
    }
    for (field, value) in numbers {
        if value.is_some_and(|v| !(0..=MAX_POSITION).contains(&v)) {
            return Err(ApiError::field(
                field,
                format!("must be between 0 and {MAX_POSITION}"),
            ));
        }
    }
    let range =
        PositionRange::between(body.from_position, body.to_position).unwrap_or(PositionRange::ALL);
    let saved: Option<SavedSeal> = body.expect_seal.map(Into::into);
    let report = audit.verify(range, saved.as_ref()).await?;
    Ok(Json((&report).into()))
}

/// Verifies the log's chains and seals (or a range): the same check as
/// `agon verify`, naming the first broken event or seal and its check.
#[utoipa::path(post, path = "/api/audit/verify", tag = "audit", request_body = VerifyBody,
    responses((status = 200, body = AuditVerifyView),
        (status = 400, description = "The body is not JSON"),
        (status = 422, description = "expect_seal is not a saved seal")))]
async fn verify_log(
    State(audit): State<Audit>,
    ApiJson(body): ApiJson<VerifyBody>,
) -> Result<Json<AuditVerifyView>, ApiError> {
    run_verify(&audit, body).await
}

/// The same verification, for clients that read it with GET.
#[utoipa::path(get, path = "/api/audit/verify", tag = "audit",
    params(RangeQuery),
    responses((status = 200, body = AuditVerifyView),
        (status = 400, description = "A parameter is not a number")))]
async fn verify_log_get(
    State(audit): State<Audit>,
    ApiQuery(range): ApiQuery<RangeQuery>,
) -> Result<Json<AuditVerifyView>, ApiError> {
    let body = VerifyBody {
        from_position: range.from_position,
        to_position: range.to_position,
        expect_seal: None,
    };
    run_verify(&audit, body).await
}

/// The positions to verify; the whole log without them.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RangeQuery {
    #[param(minimum = 0, maximum = 9007199254740991_i64)]
    pub from_position: Option<i64>,
    #[param(minimum = 0, maximum = 9007199254740991_i64)]
    pub to_position: Option<i64>,
}

/// Filters of the audit entries.
#[derive(Debug, Default, Deserialize, IntoParams, ToSchema)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Who caused the event (a user id, `system`, `service-api-token`).
    pub actor: Option<String>,
    /// A trail id: `<subject_type>:<subject_id>`.
    pub subject: Option<String>,
    /// debate, account, organization, webhook, review, …
    pub subject_type: Option<String>,
    /// The event type, e.g. `DebateCreated`.
    #[serde(rename = "type")]
    #[param(rename = "type")]
    #[schema(rename = "type")]
    pub event_type: Option<String>,
    /// Entries recorded at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Entries recorded at or before this time.
    pub until: Option<DateTime<Utc>>,
    /// The previous page's `next_cursor`.
    #[param(pattern = "^[0-9]{1,18}$")]
    #[schema(pattern = "^[0-9]{1,18}$")]
    pub cursor: Option<String>,
    /// Page size, default 50; above SERVICE_AUDIT_PAGE_MAX (default 500) it is reduced to it.
    #[param(minimum = 1)]
    #[schema(minimum = 1)]
    pub limit: Option<i32>,
}

impl EventsQuery {
    fn filter(&self) -> Result<EntryFilter, ApiError> {
        let after = self
            .cursor
            .as_deref()
            .map(|c| {
                c.parse::<i64>()
                    .map_err(|_| ApiError::bad_request("cursor is not one this service gave"))
            })
            .transpose()?;
        Ok(EntryFilter {
            actor: self.actor.clone(),
            subject: self.subject.clone(),
            subject_type: self.subject_type.clone(),
            event_type: self.event_type.clone(),
            since: self.since,
            until: self.until,
            after,
        })
    }

    fn limit(&self, max: u32) -> Result<u32, ApiError> {
        page_limit(self.limit, 50, max)
    }
}

/// A page size: `default` when not given, at least 1, reduced to `max`.
fn page_limit(limit: Option<i32>, default: u32, max: u32) -> Result<u32, ApiError> {
    match limit.map(u32::try_from) {
        None => Ok(default.min(max)),
        Some(Ok(limit)) if limit >= 1 => Ok(limit.min(max)),
        Some(_) => Err(ApiError::bad_request("limit must be at least 1")),
    }
}

/// A page of audit entries, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventsPage {
    pub events: Vec<EntryView>,
    /// Pass as `cursor` for the next page; null on the last.
    pub next_cursor: Option<String>,
    pub limit: u32,
}

/// Audit entries, filtered by actor, subject, type and time, paged by cursor.
#[utoipa::path(get, path = "/api/audit/events", tag = "audit", params(EventsQuery),
    responses((status = 200, body = EventsPage),
        (status = 400, description = "A parameter is malformed")))]
async fn events(
    State(audit): State<Audit>,
    caller: Caller,
    ApiQuery(query): ApiQuery<EventsQuery>,
) -> Result<Json<EventsPage>, ApiError> {
    let limit = query.limit(audit.settings().page_max)?;
    let page = audit
        .entries(&Viewer::of(&caller), &query.filter()?, limit)
        .await?;
    Ok(Json(EventsPage {
        events: page.entries.into_iter().map(Into::into).collect(),
        next_cursor: page.next_cursor.map(|c| c.to_string()),
        limit,
    }))
}

/// Counts of one name.
#[derive(Debug, Serialize, ToSchema)]
pub struct Count {
    pub name: String,
    pub count: i64,
}

/// What the audit log holds (of the caller's subjects, unless an admin).
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditStatsView {
    pub total_events: i64,
    pub trails: i64,
    pub by_event_type: Vec<Count>,
    pub by_subject_type: Vec<Count>,
    pub first_recorded_at: Option<String>,
    pub last_recorded_at: Option<String>,
    /// The newest seal's number (0 before the first).
    pub last_seal_number: i64,
}

/// Counts of the audit entries, and the newest seal.
#[utoipa::path(get, path = "/api/audit/stats", tag = "audit",
    responses((status = 200, body = AuditStatsView)))]
async fn audit_stats(
    State(audit): State<Audit>,
    caller: Caller,
) -> Result<Json<AuditStatsView>, ApiError> {
    let stats = audit.entry_stats(&Viewer::of(&caller)).await?;
    let counts = |rows: Vec<(String, i64)>| {
        rows.into_iter()
            .map(|(name, count)| Count { name, count })
            .collect()
    };
    let last_seal_number = audit.head().await?.map_or(0, |s| s.body.seal_number);
    Ok(Json(AuditStatsView {
        total_events: stats.total_entries,
        trails: stats.trails,
        by_event_type: counts(stats.by_event_type),
        by_subject_type: counts(stats.by_subject_type),
        first_recorded_at: stats.first_recorded_at,
        last_recorded_at: stats.last_recorded_at,
        last_seal_number,
    }))
}

/// An export's format.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AuditExportFormat {
    #[default]
    Json,
    Csv,
    /// The SOC 2 evidence package (zip; `event-schemas/AUDIT.md`), admins only.
    Soc2,
}

/// What to export: the entries matching the filters, in a format.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportBody {
    /// json (default), csv or soc2.
    #[schema(inline)]
    pub format: Option<AuditExportFormat>,
    /// The filters of `GET /api/audit/events`.
    pub actor: Option<String>,
    pub subject: Option<String>,
    pub subject_type: Option<String>,
    #[serde(rename = "type")]
    #[schema(rename = "type")]
    pub event_type: Option<String>,
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    #[schema(pattern = "^[0-9]{1,18}$")]
    pub cursor: Option<String>,
}

/// Audit entries as JSON or CSV (at most SERVICE_AUDIT_EXPORT_MAX_EVENTS;
/// JSON names where to continue), or the SOC 2 evidence package.
#[utoipa::path(post, path = "/api/audit/export", tag = "audit", request_body = ExportBody,
    responses((status = 200, description = "The export",
        content(("application/json"), ("text/csv"), ("application/zip"))),
        (status = 400, description = "A filter is malformed, or the log is too long for one package"),
        (status = 403, description = "The SOC 2 package is for admins")))]
async fn export(
    State(audit): State<Audit>,
    caller: Caller,
    ApiJson(body): ApiJson<ExportBody>,
) -> Result<Response, ApiError> {
    let f = body;
    let query = EventsQuery {
        actor: f.actor,
        subject: f.subject,
        subject_type: f.subject_type,
        event_type: f.event_type,
        since: f.since,
        until: f.until,
        cursor: f.cursor,
        limit: None,
    };
    let format = match f.format.unwrap_or_default() {
        AuditExportFormat::Json => Format::Json,
        AuditExportFormat::Csv => Format::Csv,
        AuditExportFormat::Soc2 => Format::Soc2,
    };
    let max = audit.settings().export_max_events;
    let exported = audit
        .export_entries(&Viewer::of(&caller), &query.filter()?, format, max)
        .await?;
    Ok(file(exported))
}

/// An export as a download.
fn file(exported: Exported) -> Response {
    let disposition = format!("attachment; filename=\"{}\"", exported.filename);
    (
        [
            (CONTENT_TYPE, exported.content_type.to_owned()),
            (CONTENT_DISPOSITION, disposition),
        ],
        exported.body,
    )
        .into_response()
}
