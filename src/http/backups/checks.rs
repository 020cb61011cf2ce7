//! The checks of one backup: `verify` (files, chains and seals),
//! `verify-comprehensive` (read models rebuilt from it against the live
//! ones) and `restore-test` (a full restore, timed).

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::admin;
use crate::backup::{Backups, ComprehensiveReport, ProjectionMatch, RestoreTest, VerifyOutcome};
use crate::http::error::ApiError;
use crate::http::extract::ApiPath;
use crate::http::routes::Routes;

pub fn routes() -> Routes {
    Routes::new()
        .add(routes!(verify_backup), admin())
        .add(routes!(verify_backup_comprehensive), admin())
        .add(routes!(restore_test_backup), admin())
}

/// The outcome of a verification.
#[derive(Debug, Serialize, ToSchema)]
pub struct BackupVerifyView {
    pub backup_id: String,
    pub valid: bool,
    pub checksums_ok: bool,
    pub events_checked: u64,
    pub streams_checked: u64,
    pub seals_checked: u64,
    pub unsealed_events: u64,
    pub problems: Vec<String>,
}

impl From<VerifyOutcome> for BackupVerifyView {
    fn from(v: VerifyOutcome) -> Self {
        Self {
            backup_id: v.backup_id,
            valid: v.valid,
            checksums_ok: v.checksums_ok,
            events_checked: v.events_checked,
            streams_checked: v.streams_checked,
            seals_checked: v.seals_checked,
            unsealed_events: v.unsealed_events,
            problems: v.problems,
        }
    }
}

/// Checks the backup's files against their checksums, then restores it
/// into a scratch store and checks every chain and seal and the manifest's
/// counts there.
#[utoipa::path(post, path = "/api/backups/{backup_id}/verify", tag = "backups",
    params(("backup_id" = String, Path)),
    responses((status = 200, body = BackupVerifyView), (status = 404, description = "No such kept backup"),
        (status = 503, description = "The backup storage did not answer")))]
async fn verify_backup(
    State(backups): State<Backups>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<BackupVerifyView>, ApiError> {
    Ok(Json(backups.verify(&id).await?.into()))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ProjectionMatchView {
    pub projection: String,
    /// `live` or `live_log` (replayed from the live log to the backup's position).
    pub compared_with: String,
    pub backup_digest: String,
    pub live_digest: String,
    pub identical: bool,
}

impl From<ProjectionMatch> for ProjectionMatchView {
    fn from(p: ProjectionMatch) -> Self {
        Self {
            projection: p.projection,
            compared_with: p.compared_with,
            backup_digest: p.backup_digest,
            live_digest: p.live_digest,
            identical: p.identical,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ComprehensiveView {
    pub backup_id: String,
    pub valid: bool,
    pub verification: BackupVerifyView,
    pub replayed_events: u64,
    pub identical: bool,
    pub projections: Vec<ProjectionMatchView>,
}

/// Verifies the backup, replays every projection from it in a scratch
/// store and compares each read model's digest with the live one at the
/// backup's position.
#[utoipa::path(post, path = "/api/backups/{backup_id}/verify-comprehensive", tag = "backups",
    params(("backup_id" = String, Path)),
    responses((status = 200, body = ComprehensiveView), (status = 404, description = "No such kept backup"),
        (status = 503, description = "The backup storage did not answer")))]
async fn verify_backup_comprehensive(
    State(backups): State<Backups>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<ComprehensiveView>, ApiError> {
    let ComprehensiveReport {
        verification,
        replayed_events,
        identical,
        projections,
        valid,
    } = backups.verify_comprehensive(&id).await?;
    Ok(Json(ComprehensiveView {
        backup_id: id,
        valid,
        verification: verification.into(),
        replayed_events,
        identical,
        projections: projections.into_iter().map(Into::into).collect(),
    }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RestoreTestView {
    pub backup_id: String,
    pub success: bool,
    pub events_restored: u64,
    pub seals_restored: u64,
    pub restore_ms: u64,
    pub replay_ms: u64,
    pub verify_ms: u64,
    pub total_ms: u64,
    pub problems: Vec<String>,
}

/// Restores the backup in full into a scratch store (never the live one),
/// verifies it and rebuilds every read model, timing each step.
#[utoipa::path(post, path = "/api/backups/{backup_id}/restore-test", tag = "backups",
    params(("backup_id" = String, Path)),
    responses((status = 200, body = RestoreTestView), (status = 404, description = "No such kept backup"),
        (status = 503, description = "The backup storage did not answer")))]
async fn restore_test_backup(
    State(backups): State<Backups>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<RestoreTestView>, ApiError> {
    let RestoreTest {
        backup_id,
        success,
        events_restored,
        seals_restored,
        restore_ms,
        replay_ms,
        verify_ms,
        total_ms,
        problems,
    } = backups.restore_test(&id).await?;
    Ok(Json(RestoreTestView {
        backup_id,
        success,
        events_restored,
        seals_restored,
        restore_ms,
        replay_ms,
        verify_ms,
        total_ms,
        problems,
    }))
}
