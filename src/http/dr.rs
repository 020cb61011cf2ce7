//! `/api/v2/dr` (also `/api/dr`, `/api/v1/dr`): disaster recovery. The
//! status (last drill, newest backup, whether the objectives are met), a
//! drill on the newest backup, the objectives in force, and a check of the
//! configuration a recovery needs. Operators only.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::backups::{BackupView, admin};
use super::error::ApiError;
use super::routes::Routes;
use crate::auth::Caller;
use crate::backup::Backups;
use agon_aggregates::backup_drill::{DrillOutcome, Objectives};

pub fn routes() -> Routes {
    Routes::new()
        .add(routes!(dr_status), admin())
        .add(routes!(dr_drill), admin())
        .add(routes!(dr_objectives), admin())
        .add(routes!(dr_validate), admin())
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ObjectivesView {
    /// `SERVICE_DR_RPO_SECONDS`: the most age the restored backup may have.
    pub rpo_seconds: u64,
    /// `SERVICE_DR_RPO_EVENTS`: the most events it may lack.
    pub rpo_events: u64,
    /// `SERVICE_DR_RTO_SECONDS`: the most time restore, replay and verification may take.
    pub rto_seconds: u64,
}

impl From<Objectives> for ObjectivesView {
    fn from(o: Objectives) -> Self {
        Self {
            rpo_seconds: o.rpo_seconds,
            rpo_events: o.rpo_events,
            rto_seconds: o.rto_seconds,
        }
    }
}

/// A drill's outcome.
#[derive(Debug, Serialize, ToSchema)]
pub struct DrillView {
    pub drill_id: String,
    /// `completed` or `failed`.
    pub status: String,
    pub success: bool,
    pub backup_id: Option<String>,
    /// Events in the live log that the backup lacks.
    pub rpo_events: Option<u64>,
    /// The backup's age when the drill started.
    pub rpo_seconds: Option<u64>,
    /// Restore, replay and verification, until a serving state.
    pub rto_ms: Option<u64>,
    pub events_restored: u64,
    pub verified: bool,
    pub rpo_met: bool,
    pub rto_met: bool,
    pub objectives: ObjectivesView,
    pub error: Option<String>,
    pub started_at: String,
    pub finished_at: String,
}

impl From<DrillOutcome> for DrillView {
    fn from(d: DrillOutcome) -> Self {
        let time = |t: chrono::DateTime<chrono::Utc>| {
            t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        };
        let m = d.measured;
        Self {
            drill_id: d.drill_id,
            status: if d.success { "completed" } else { "failed" }.to_owned(),
            success: d.success,
            backup_id: m.backup_id,
            rpo_events: m.rpo_events,
            rpo_seconds: m.rpo_seconds,
            rto_ms: m.rto_ms,
            events_restored: m.events_restored,
            verified: m.verified,
            rpo_met: d.rpo_met,
            rto_met: d.rto_met,
            objectives: d.objectives.into(),
            error: m.error,
            started_at: time(m.started_at),
            finished_at: time(m.finished_at),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StatusView {
    /// The last drill succeeded within both objectives and the newest
    /// backup is recent enough.
    pub ready: bool,
    /// `healthy` when ready, else `degraded`.
    pub overall_health: String,
    pub last_drill: Option<DrillView>,
    pub newest_backup: Option<BackupView>,
    pub objectives: ObjectivesView,
    pub issues: Vec<String>,
}

/// The last drill, the newest backup and what keeps recovery from being ready.
#[utoipa::path(get, path = "/api/dr/status", tag = "disaster recovery",
    responses((status = 200, body = StatusView)))]
async fn dr_status(State(backups): State<Backups>) -> Result<Json<StatusView>, ApiError> {
    let status = backups.status().await?;
    Ok(Json(StatusView {
        ready: status.ready,
        overall_health: if status.ready { "healthy" } else { "degraded" }.to_owned(),
        last_drill: status.last_drill.map(Into::into),
        newest_backup: status
            .newest_backup
            .map(|d| BackupView::kept_in(d, &backups)),
        objectives: status.objectives.into(),
        issues: status.issues,
    }))
}

/// Restores the newest backup into a scratch store, replays and verifies
/// it, and records the measured recovery point and time as an event. A
/// drill without a backup to restore is recorded as failed.
#[utoipa::path(post, path = "/api/dr/drill", tag = "disaster recovery",
    responses((status = 200, body = DrillView)))]
async fn dr_drill(
    State(backups): State<Backups>,
    caller: Caller,
) -> Result<Json<DrillView>, ApiError> {
    Ok(Json(backups.drill(caller.user_id.as_str()).await?.into()))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ObjectivesStatus {
    #[serde(flatten)]
    pub objectives: ObjectivesView,
    /// The last drill met the recovery point objective.
    pub rpo_compliant: bool,
    /// The last drill met the recovery time objective.
    pub rto_compliant: bool,
    pub last_drill: Option<DrillView>,
}

/// The objectives in force and whether the last drill met them.
#[utoipa::path(get, path = "/api/dr/objectives", tag = "disaster recovery",
    responses((status = 200, body = ObjectivesStatus)))]
async fn dr_objectives(State(backups): State<Backups>) -> Result<Json<ObjectivesStatus>, ApiError> {
    let last = backups.last_drill().await?;
    Ok(Json(ObjectivesStatus {
        objectives: backups.objectives().into(),
        rpo_compliant: last.as_ref().is_some_and(|d| d.rpo_met),
        rto_compliant: last.as_ref().is_some_and(|d| d.rto_met),
        last_drill: last.map(Into::into),
    }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CheckView {
    /// `backup_recent`, `storage_reachable` (the backup directory, or the
    /// bucket with S3 storage), `staging_writable` (S3 storage only),
    /// `store_reachable` or `seal_key_present`.
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ValidationView {
    pub valid: bool,
    pub checks: Vec<CheckView>,
}

/// Checks the configuration a recovery needs: a recent backup, a backup
/// directory that takes files, the store, and the seal key.
#[utoipa::path(post, path = "/api/dr/validate", tag = "disaster recovery",
    responses((status = 200, body = ValidationView)))]
async fn dr_validate(State(backups): State<Backups>) -> Result<Json<ValidationView>, ApiError> {
    let validation = backups.validate().await?;
    Ok(Json(ValidationView {
        valid: validation.valid,
        checks: validation
            .checks
            .into_iter()
            .map(|c| CheckView {
                name: c.name,
                ok: c.ok,
                detail: c.detail,
            })
            .collect(),
    }))
}
