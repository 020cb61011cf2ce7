//! Backup and drill events against their schemas (`event-schemas/backup/`,
//! `event-schemas/backup_drill/`), as the aggregates record them.

use agon_aggregates::backup::{BackupEvent, BackupSummary};
use agon_aggregates::backup_drill::{DrillEvent, DrillOutcome, Measured, Objectives};

use super::{Sample, at, check_event_schemas};

fn backup_variant(event: &BackupEvent) -> &'static str {
    match event {
        BackupEvent::BackupCreated { .. } => "BackupCreated",
        BackupEvent::BackupDeleted { .. } => "BackupDeleted",
    }
}

fn drill_variant(event: &DrillEvent) -> &'static str {
    match event {
        DrillEvent::DrillCompleted { .. } => "DrillCompleted",
    }
}

fn summary(description: Option<&str>, head: Option<i64>) -> BackupSummary {
    BackupSummary {
        backup_id: "backup-20270115T080000000Z-1a2b3c4d".to_owned(),
        backup_type: "full".to_owned(),
        description: description.map(str::to_owned),
        backend: "sqlite".to_owned(),
        events: head.map_or(0, |h| h as u64),
        streams: 4,
        seals: head.map_or(0, |_| 1),
        head_position: head,
        head_seal: head.map(|_| 1),
        size_bytes: 1_024,
        manifest_sha256: "ab".repeat(32),
        duration_ms: 12,
        created_at: at(0),
    }
}

#[test]
fn every_backup_event_matches_its_schema() {
    let events = [
        BackupEvent::BackupCreated {
            backup: summary(Some("Before the upgrade"), Some(36)),
        },
        BackupEvent::BackupCreated {
            backup: summary(None, None),
        },
        BackupEvent::BackupDeleted {
            reason: "operator".to_owned(),
            at: at(1),
        },
    ];
    let samples: Vec<Sample> = events
        .iter()
        .map(|e| Sample::new("backup", backup_variant(e), e))
        .collect();
    check_event_schemas(&samples, &["backup"]);
}

#[test]
fn every_drill_event_matches_its_schema() {
    let objectives = Objectives {
        rpo_seconds: 3_600,
        rpo_events: 10_000,
        rto_seconds: 900,
    };
    let restored = Measured {
        backup_id: Some("backup-20270115T080000000Z-1a2b3c4d".to_owned()),
        rpo_events: Some(1),
        rpo_seconds: Some(60),
        rto_ms: Some(420),
        events_restored: 36,
        verified: true,
        error: None,
        started_at: at(2),
        finished_at: at(3),
    };
    let missing = Measured {
        backup_id: None,
        rpo_events: None,
        rpo_seconds: None,
        rto_ms: None,
        events_restored: 0,
        verified: false,
        error: Some("no backup to restore".to_owned()),
        started_at: at(4),
        finished_at: at(4),
    };
    let events = [
        DrillEvent::DrillCompleted {
            drill: DrillOutcome::judge("drill-1".to_owned(), restored, objectives),
        },
        DrillEvent::DrillCompleted {
            drill: DrillOutcome::judge("drill-2".to_owned(), missing, objectives),
        },
    ];
    let samples: Vec<Sample> = events
        .iter()
        .map(|e| Sample::new("backup_drill", drill_variant(e), e))
        .collect();
    check_event_schemas(&samples, &["backup_drill"]);
}
