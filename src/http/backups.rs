//! `/api/v2/backups` (also `/api/backups`, `/api/v1/backups`): list, make,
//! read and delete backups of the event log, verify one (files, chains and
//! seals), verify it comprehensively (read models rebuilt from it against
//! the live ones), time a full restore of it, apply the retention policy,
//! and statistics. Operators only.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

mod checks;

use super::error::ApiError;
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::ratelimit::Action;
use super::routes::{RouteSpec, Routes};
use crate::auth::Caller;
use crate::auth::rbac::Permission;
use crate::backup::{BackupError, Backups, Cleanup, Stats};
use agon_projections::backups::BackupDoc;

/// Operators only, under the admin rate limit.
pub(super) fn admin() -> RouteSpec {
    RouteSpec::new()
        .action(Action::Admin)
        .requires(Permission::Admin)
}

pub fn routes() -> Routes {
    Routes::new()
        .add(routes!(list_backups, create_backup), admin())
        .add(routes!(backup_stats), admin())
        .add(routes!(cleanup_backups), admin())
        .add(routes!(get_backup, delete_backup), admin())
        .merge(checks::routes())
}

impl From<BackupError> for ApiError {
    fn from(error: BackupError) -> Self {
        match error {
            BackupError::NotFound(id) => ApiError::NotFound {
                resource_type: "backup",
                resource_id: Some(id),
            },
            e @ BackupError::UnsupportedType(_) => {
                ApiError::validation(e.to_string(), json!({"field": "backup_type"}))
            }
            BackupError::Store(e) => e.into(),
            BackupError::Storage(e) => {
                tracing::warn!(error = %e, "the backup storage failed");
                ApiError::Unavailable(format!(
                    "The backup storage (bucket {}) did not take the request; retry shortly",
                    e.bucket()
                ))
            }
            e => ApiError::Internal(Box::new(e)),
        }
    }
}

/// A JSON object body as `T`; anything else (an array, a wrong field) is
/// refused with the validation error.
fn object_body<T: serde::de::DeserializeOwned>(body: Value) -> Result<T, ApiError> {
    if !body.is_object() {
        return Err(ApiError::validation(
            "body: expected a JSON object",
            json!({"field": "body"}),
        ));
    }
    serde_json::from_value(body).map_err(|e| {
        let message = e.to_string();
        let field = message.split('`').nth(1).unwrap_or("body").to_owned();
        ApiError::validation(format!("{field}: {message}"), json!({"field": field}))
    })
}

/// A backup as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct BackupView {
    pub id: String,
    pub backup_id: String,
    /// `full` or `snapshot`: both a whole, consistent copy of the log.
    pub backup_type: String,
    /// `completed`, or `deleted` once its files are gone.
    pub status: String,
    pub description: Option<String>,
    /// The back end it was copied from.
    pub backend: String,
    /// Where the service keeps backups: `local` (files in
    /// `SERVICE_BACKUP_DIR`) or `s3` (objects in `SERVICE_BACKUP_S3_BUCKET`).
    pub storage: String,
    pub events: u64,
    pub streams: u64,
    pub seals: u64,
    pub head_position: Option<i64>,
    pub head_seal: Option<i64>,
    pub size_bytes: u64,
    pub manifest_sha256: String,
    pub duration_ms: u64,
    /// RFC 3339, UTC.
    pub created_at: String,
    pub deleted_at: Option<String>,
    pub deleted_reason: Option<String>,
}

impl BackupView {
    /// `doc` as shown by a service that keeps backups in `backups`' storage.
    pub fn kept_in(doc: BackupDoc, backups: &Backups) -> Self {
        Self {
            storage: backups.storage().name().to_owned(),
            ..doc.into()
        }
    }
}

impl From<BackupDoc> for BackupView {
    fn from(doc: BackupDoc) -> Self {
        let b = doc.backup;
        let time = |t: chrono::DateTime<chrono::Utc>| {
            t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        };
        Self {
            id: b.backup_id.clone(),
            backup_id: b.backup_id,
            backup_type: b.backup_type,
            status: doc.status,
            description: b.description,
            backend: b.backend,
            storage: "local".to_owned(),
            events: b.events,
            streams: b.streams,
            seals: b.seals,
            head_position: b.head_position,
            head_seal: b.head_seal,
            size_bytes: b.size_bytes,
            manifest_sha256: b.manifest_sha256,
            duration_ms: b.duration_ms,
            created_at: time(b.created_at),
            deleted_at: doc.deleted_at.map(time),
            deleted_reason: doc.deleted_reason,
        }
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Page size, default 50; a larger one than `SERVICE_BACKUP_PAGE_MAX`
    /// (200) is served as that.
    #[param(minimum = 1)]
    pub limit: Option<i32>,
    #[param(minimum = 0)]
    pub offset: Option<i32>,
    /// Only backups of this type.
    #[param(inline)]
    pub backup_type: Option<KindName>,
    /// Only backups in this state.
    #[param(inline)]
    pub status: Option<BackupStatusName>,
}

/// The backup types this service makes.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum KindName {
    Full,
    Snapshot,
}

impl KindName {
    fn as_str(self) -> &'static str {
        match self {
            KindName::Full => "full",
            KindName::Snapshot => "snapshot",
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BackupStatusName {
    Completed,
    Deleted,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BackupList {
    pub backups: Vec<BackupView>,
    pub total: u64,
    pub limit: u32,
    pub offset: u32,
}

/// The backups, newest first.
#[utoipa::path(get, path = "/api/backups", tag = "backups", params(ListQuery),
    responses((status = 200, body = BackupList)))]
async fn list_backups(
    State(backups): State<Backups>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<BackupList>, ApiError> {
    let max = backups.settings().page_max;
    let limit = u32::try_from(query.limit.unwrap_or(50))
        .ok()
        .filter(|l| *l >= 1)
        .ok_or_else(|| ApiError::bad_request("limit must be at least 1"))?
        .min(max);
    let offset = u32::try_from(query.offset.unwrap_or(0))
        .map_err(|_| ApiError::bad_request("offset must not be negative"))?;
    let status = query.status.map(|s| match s {
        BackupStatusName::Completed => "completed",
        BackupStatusName::Deleted => "deleted",
    });
    let page = backups
        .list(
            status,
            query.backup_type.map(KindName::as_str),
            limit,
            u64::from(offset),
        )
        .await?;
    Ok(Json(BackupList {
        backups: page
            .backups
            .into_iter()
            .map(|d| BackupView::kept_in(d, &backups))
            .collect(),
        total: page.total,
        limit,
        offset,
    }))
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateBackup {
    /// Default `full`.
    pub backup_type: Option<KindName>,
    /// At most `SERVICE_BACKUP_DESCRIPTION_MAX_CHARS` (500) characters.
    pub description: Option<String>,
}

/// Copies the log and its seals, consistently, into a new backup.
#[utoipa::path(post, path = "/api/backups", tag = "backups", request_body = CreateBackup,
    responses((status = 201, body = BackupView), (status = 422, description = "Invalid request"),
        (status = 503, description = "The backup storage did not take the backup; nothing was recorded")))]
async fn create_backup(
    State(backups): State<Backups>,
    caller: Caller,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<BackupView>), ApiError> {
    let request: CreateBackup = object_body(body)?;
    let max = backups.settings().description_max_chars;
    if request
        .description
        .as_ref()
        .is_some_and(|d| d.chars().count() > max)
    {
        return Err(ApiError::validation(
            format!("description: at most {max} characters"),
            json!({"field": "description"}),
        ));
    }
    let kind = request.backup_type.unwrap_or(KindName::Full).as_str();
    let doc = backups
        .create(kind, request.description, caller.user_id.as_str())
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(BackupView::kept_in(doc, &backups)),
    ))
}

/// One kept backup (a deleted one is listed with `status=deleted`).
#[utoipa::path(get, path = "/api/backups/{backup_id}", tag = "backups",
    params(("backup_id" = String, Path)),
    responses((status = 200, body = BackupView), (status = 404, description = "No such backup")))]
async fn get_backup(
    State(backups): State<Backups>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<BackupView>, ApiError> {
    let doc = backups
        .get(&id)
        .await?
        .filter(|d| d.status == "completed")
        .ok_or(BackupError::NotFound(id))?;
    Ok(Json(BackupView::kept_in(doc, &backups)))
}

/// Removes a backup's files and records its deletion.
#[utoipa::path(delete, path = "/api/backups/{backup_id}", tag = "backups",
    params(("backup_id" = String, Path)),
    responses((status = 200, body = BackupView), (status = 404, description = "No such kept backup"),
        (status = 503, description = "The backup storage did not answer; the backup is kept")))]
async fn delete_backup(
    State(backups): State<Backups>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<BackupView>, ApiError> {
    let doc = backups
        .delete(&id, "operator", caller.user_id.as_str())
        .await?
        .ok_or(BackupError::NotFound(id))?;
    Ok(Json(BackupView::kept_in(doc, &backups)))
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CleanupRequest {
    /// Only name what would go. Default true.
    pub dry_run: Option<bool>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CleanupView {
    pub dry_run: bool,
    pub deleted: Vec<String>,
    pub kept: u64,
    pub freed_bytes: u64,
}

/// Applies the retention policy: the newest `SERVICE_BACKUP_RETENTION_COUNT`
/// backups stay, older ones go after `SERVICE_BACKUP_RETENTION_DAYS`. The
/// body is optional; without one it is a dry run.
#[utoipa::path(post, path = "/api/backups/cleanup", tag = "backups",
    request_body(content = Option<CleanupRequest>, content_type = "application/json"),
    responses((status = 200, body = CleanupView), (status = 400, description = "Not JSON"),
        (status = 422, description = "Not a cleanup request"),
        (status = 503, description = "The backup storage did not answer")))]
async fn cleanup_backups(
    State(backups): State<Backups>,
    caller: Caller,
    body: Bytes,
) -> Result<Json<CleanupView>, ApiError> {
    let request: CleanupRequest = if body.iter().all(u8::is_ascii_whitespace) {
        CleanupRequest::default()
    } else {
        let value: Value = serde_json::from_slice(&body).map_err(|e| ApiError::BadRequest {
            message: "The body is not valid JSON".to_owned(),
            details: json!({"reason": e.to_string()}),
        })?;
        if value.is_null() {
            CleanupRequest::default()
        } else {
            object_body(value)?
        }
    };
    let Cleanup {
        dry_run,
        deleted,
        kept,
        freed_bytes,
    } = backups
        .cleanup(request.dry_run.unwrap_or(true), caller.user_id.as_str())
        .await?;
    Ok(Json(CleanupView {
        dry_run,
        deleted,
        kept,
        freed_bytes,
    }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StatsView {
    pub total_backups: u64,
    pub total_size_bytes: u64,
    pub newest_backup_id: Option<String>,
    pub newest_backup_at: Option<String>,
    pub newest_age_seconds: Option<i64>,
    pub oldest_backup_at: Option<String>,
    pub retention_count: u64,
    pub retention_days: u64,
}

/// Counts, sizes and ages of the kept backups, and the retention policy.
#[utoipa::path(get, path = "/api/backups/stats", tag = "backups",
    responses((status = 200, body = StatsView)))]
async fn backup_stats(State(backups): State<Backups>) -> Result<Json<StatsView>, ApiError> {
    let Stats {
        total_backups,
        total_size_bytes,
        newest_backup_id,
        newest_backup_at,
        newest_age_seconds,
        oldest_backup_at,
        retention_count,
        retention_days,
    } = backups.stats().await?;
    Ok(Json(StatsView {
        total_backups,
        total_size_bytes,
        newest_backup_id,
        newest_backup_at,
        newest_age_seconds,
        oldest_backup_at,
        retention_count,
        retention_days,
    }))
}
