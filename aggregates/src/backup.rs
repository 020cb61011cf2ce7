//! The Backup aggregate: one stream per backup of the event log. It records
//! what a backup holds once its files are written, and its deletion (by an
//! operator or by the retention policy), so the backup list is a read model
//! of the log like everything else.

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::Decide;

/// What a written backup holds, as its manifest states it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupSummary {
    pub backup_id: String,
    /// `full` or `snapshot` (both a whole, consistent copy).
    pub backup_type: String,
    pub description: Option<String>,
    /// The back end it was copied from: `sqlite` or `postgres`.
    pub backend: String,
    pub events: u64,
    pub streams: u64,
    pub seals: u64,
    /// The log position of its newest event.
    pub head_position: Option<i64>,
    /// The number of its newest seal.
    pub head_seal: Option<i64>,
    pub size_bytes: u64,
    /// Hex SHA-256 of its manifest file.
    pub manifest_sha256: String,
    pub duration_ms: u64,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Backup {
    pub backup_id: String,
    pub deleted: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum BackupCommand {
    /// A backup's files are written; `summary` is what they hold.
    Record { summary: BackupSummary },
    /// Its files are removed; `reason` is `operator` or `retention`.
    Delete { reason: String, at: DateTime<Utc> },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum BackupEvent {
    BackupCreated { backup: BackupSummary },
    BackupDeleted { reason: String, at: DateTime<Utc> },
}

impl DomainEvent for BackupEvent {
    fn event_type(&self) -> String {
        match self {
            BackupEvent::BackupCreated { .. } => "BackupCreated",
            BackupEvent::BackupDeleted { .. } => "BackupDeleted",
        }
        .to_owned()
    }

    fn event_version(&self) -> String {
        crate::wire::current_version(<Backup as Aggregate>::TYPE, &self.event_type())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BackupError {
    #[error("backup not found")]
    NotFound,
    #[error("backup already recorded")]
    Exists,
}

crate::rejections!(BackupError {
    Self::NotFound => NotFound, "BACKUP_NOT_FOUND",
    Self::Exists => Conflict, "BACKUP_EXISTS",
});

impl Decide for Backup {
    fn decide(&self, command: BackupCommand) -> Result<Vec<BackupEvent>, BackupError> {
        match command {
            BackupCommand::Record { summary } => {
                if !self.backup_id.is_empty() {
                    return Err(BackupError::Exists);
                }
                Ok(vec![BackupEvent::BackupCreated { backup: summary }])
            }
            BackupCommand::Delete { reason, at } => {
                if self.backup_id.is_empty() || self.deleted {
                    return Err(BackupError::NotFound);
                }
                Ok(vec![BackupEvent::BackupDeleted { reason, at }])
            }
        }
    }
}

impl Aggregate for Backup {
    const TYPE: &'static str = "backup";
    type Command = BackupCommand;
    type Event = BackupEvent;
    type Error = BackupError;
    type Services = ();

    async fn handle(
        &mut self,
        command: BackupCommand,
        _services: &(),
        sink: &EventSink<Self>,
    ) -> Result<(), BackupError> {
        crate::record(self, command, sink).await
    }

    fn apply(&mut self, event: BackupEvent) {
        match event {
            BackupEvent::BackupCreated { backup } => self.backup_id = backup.backup_id,
            BackupEvent::BackupDeleted { .. } => self.deleted = true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use cqrs_es::test::TestFramework;

    fn summary() -> BackupSummary {
        BackupSummary {
            backup_id: "b1".to_owned(),
            backup_type: "full".to_owned(),
            description: None,
            backend: "sqlite".to_owned(),
            events: 3,
            streams: 1,
            seals: 1,
            head_position: Some(3),
            head_seal: Some(1),
            size_bytes: 100,
            manifest_sha256: "00".repeat(32),
            duration_ms: 1,
            created_at: Utc.with_ymd_and_hms(2027, 1, 15, 8, 0, 0).unwrap(),
        }
    }

    #[test]
    fn a_backup_is_recorded_once_and_deleted_once() {
        let created = BackupEvent::BackupCreated { backup: summary() };
        let at = summary().created_at;
        TestFramework::<Backup>::with(())
            .given_no_previous_events()
            .when(BackupCommand::Record { summary: summary() })
            .then_expect_events(vec![created.clone()]);
        TestFramework::<Backup>::with(())
            .given(vec![created.clone()])
            .when(BackupCommand::Record { summary: summary() })
            .then_expect_error(BackupError::Exists);
        let deleted = BackupEvent::BackupDeleted {
            reason: "operator".to_owned(),
            at,
        };
        TestFramework::<Backup>::with(())
            .given(vec![created.clone()])
            .when(BackupCommand::Delete {
                reason: "operator".to_owned(),
                at,
            })
            .then_expect_events(vec![deleted.clone()]);
        TestFramework::<Backup>::with(())
            .given(vec![created, deleted])
            .when(BackupCommand::Delete {
                reason: "retention".to_owned(),
                at,
            })
            .then_expect_error(BackupError::NotFound);
    }
}
