//! The BackupDrill aggregate: one stream per disaster-recovery drill. A
//! drill restores the newest backup into a scratch store, replays and
//! verifies it; the aggregate records what was measured and decides, against
//! the objectives in force, whether the recovery point and time were met.

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::Decide;

/// The recovery objectives a drill is measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Objectives {
    /// The most age the restored backup may have, in seconds.
    pub rpo_seconds: u64,
    /// The most events the restored backup may lack.
    pub rpo_events: u64,
    /// The most time restore, replay and verification may take, in seconds.
    pub rto_seconds: u64,
}

/// What a drill measured. `backup_id` is `None` when there was no backup
/// to restore; `error` says why a drill failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Measured {
    pub backup_id: Option<String>,
    /// Events in the live log that the backup lacks.
    pub rpo_events: Option<u64>,
    /// The backup's age when the drill started, in seconds.
    pub rpo_seconds: Option<u64>,
    /// Restore, replay and verification, in milliseconds.
    pub rto_ms: Option<u64>,
    pub events_restored: u64,
    /// The restored log verified and every read model was rebuilt.
    pub verified: bool,
    pub error: Option<String>,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
}

/// A drill's outcome, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrillOutcome {
    pub drill_id: String,
    pub measured: Measured,
    pub objectives: Objectives,
    /// The drill restored, replayed and verified a backup.
    pub success: bool,
    pub rpo_met: bool,
    pub rto_met: bool,
}

impl DrillOutcome {
    /// Decides success and whether each objective was met.
    pub fn judge(drill_id: String, measured: Measured, objectives: Objectives) -> Self {
        let success = measured.verified && measured.error.is_none();
        let rpo_met = success
            && measured
                .rpo_events
                .is_some_and(|n| n <= objectives.rpo_events)
            && measured
                .rpo_seconds
                .is_some_and(|s| s <= objectives.rpo_seconds);
        let rto_met = success
            && measured
                .rto_ms
                .is_some_and(|ms| ms <= objectives.rto_seconds.saturating_mul(1000));
        Self {
            drill_id,
            measured,
            objectives,
            success,
            rpo_met,
            rto_met,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BackupDrill {
    pub drill_id: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DrillCommand {
    Record {
        drill_id: String,
        measured: Measured,
        objectives: Objectives,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DrillEvent {
    DrillCompleted { drill: DrillOutcome },
}

impl DomainEvent for DrillEvent {
    fn event_type(&self) -> String {
        match self {
            DrillEvent::DrillCompleted { .. } => "DrillCompleted",
        }
        .to_owned()
    }

    fn event_version(&self) -> String {
        crate::wire::current_version(<BackupDrill as Aggregate>::TYPE, &self.event_type())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DrillError {
    #[error("drill already recorded")]
    Exists,
}

crate::rejections!(DrillError {
    Self::Exists => Conflict, "DRILL_EXISTS",
});

impl Decide for BackupDrill {
    fn decide(&self, command: DrillCommand) -> Result<Vec<DrillEvent>, DrillError> {
        let DrillCommand::Record {
            drill_id,
            measured,
            objectives,
        } = command;
        if !self.drill_id.is_empty() {
            return Err(DrillError::Exists);
        }
        Ok(vec![DrillEvent::DrillCompleted {
            drill: DrillOutcome::judge(drill_id, measured, objectives),
        }])
    }
}

impl Aggregate for BackupDrill {
    const TYPE: &'static str = "backup_drill";
    type Command = DrillCommand;
    type Event = DrillEvent;
    type Error = DrillError;
    type Services = ();

    async fn handle(
        &mut self,
        command: DrillCommand,
        _services: &(),
        sink: &EventSink<Self>,
    ) -> Result<(), DrillError> {
        crate::record(self, command, sink).await
    }

    fn apply(&mut self, event: DrillEvent) {
        let DrillEvent::DrillCompleted { drill } = event;
        self.drill_id = drill.drill_id;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn measured(rpo_events: u64, rto_ms: u64) -> Measured {
        let at = Utc.with_ymd_and_hms(2027, 1, 15, 8, 0, 0).unwrap();
        Measured {
            backup_id: Some("b1".to_owned()),
            rpo_events: Some(rpo_events),
            rpo_seconds: Some(60),
            rto_ms: Some(rto_ms),
            events_restored: 10,
            verified: true,
            error: None,
            started_at: at,
            finished_at: at,
        }
    }

    const OBJECTIVES: Objectives = Objectives {
        rpo_seconds: 3600,
        rpo_events: 5,
        rto_seconds: 2,
    };

    #[test]
    fn objectives_are_met_only_within_their_bounds() {
        let met = DrillOutcome::judge("d".into(), measured(5, 2000), OBJECTIVES);
        assert!(met.success && met.rpo_met && met.rto_met);
        let late = DrillOutcome::judge("d".into(), measured(6, 2001), OBJECTIVES);
        assert!(late.success && !late.rpo_met && !late.rto_met);
    }

    #[test]
    fn a_drill_without_a_backup_fails_and_meets_nothing() {
        let mut m = measured(0, 0);
        m.backup_id = None;
        m.verified = false;
        m.error = Some("no backup to restore".to_owned());
        let failed = DrillOutcome::judge("d".into(), m, OBJECTIVES);
        assert!(!failed.success && !failed.rpo_met && !failed.rto_met);
    }
}
