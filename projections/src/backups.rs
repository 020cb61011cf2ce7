//! `backups` and `backup_drills`: one document per backup (what it holds,
//! and whether it was deleted) and one per disaster-recovery drill, listed
//! newest first, so the backup list and the recovery status are read models
//! of the log.

use agon_aggregates::backup::{BackupEvent, BackupSummary};
use agon_aggregates::backup_drill::{DrillEvent, DrillOutcome};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{DecodeError, DocumentProjection, EventRecord};

pub const BACKUP_AGGREGATE: &str = "backup";
pub const DRILL_AGGREGATE: &str = "backup_drill";

/// A backup as the list shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupDoc {
    #[serde(flatten)]
    pub backup: BackupSummary,
    /// `completed`, or `deleted` once its files are gone.
    pub status: String,
    pub deleted_at: Option<DateTime<Utc>>,
    pub deleted_reason: Option<String>,
}

pub struct BackupCatalog;

impl DocumentProjection for BackupCatalog {
    const NAME: &'static str = "backups";
    type Doc = BackupDoc;

    fn key(event: &EventRecord) -> Result<Option<String>, DecodeError> {
        Ok((event.aggregate_type == BACKUP_AGGREGATE).then(|| event.aggregate_id.clone()))
    }

    fn apply(
        doc: Option<BackupDoc>,
        event: &EventRecord,
    ) -> Result<Option<BackupDoc>, DecodeError> {
        Ok(match (doc, event.decode::<BackupEvent>()?) {
            (_, BackupEvent::BackupCreated { backup }) => Some(BackupDoc {
                backup,
                status: "completed".to_owned(),
                deleted_at: None,
                deleted_reason: None,
            }),
            (Some(mut doc), BackupEvent::BackupDeleted { reason, at }) => {
                doc.status = "deleted".to_owned();
                doc.deleted_at = Some(at);
                doc.deleted_reason = Some(reason);
                Some(doc)
            }
            (None, BackupEvent::BackupDeleted { .. }) => None,
        })
    }

    fn owner(_doc: &BackupDoc) -> Option<String> {
        None
    }

    fn state(doc: &BackupDoc) -> Option<String> {
        Some(doc.status.clone())
    }

    fn sort_key(doc: &BackupDoc) -> Option<String> {
        Some(
            doc.backup
                .created_at
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        )
    }
}

pub struct DrillHistory;

impl DocumentProjection for DrillHistory {
    const NAME: &'static str = "backup_drills";
    type Doc = DrillOutcome;

    fn key(event: &EventRecord) -> Result<Option<String>, DecodeError> {
        Ok((event.aggregate_type == DRILL_AGGREGATE).then(|| event.aggregate_id.clone()))
    }

    fn apply(
        _doc: Option<DrillOutcome>,
        event: &EventRecord,
    ) -> Result<Option<DrillOutcome>, DecodeError> {
        let DrillEvent::DrillCompleted { drill } = event.decode()?;
        Ok(Some(drill))
    }

    fn owner(_doc: &DrillOutcome) -> Option<String> {
        None
    }

    fn sort_key(doc: &DrillOutcome) -> Option<String> {
        Some(
            doc.measured
                .finished_at
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        )
    }
}
