//! Disaster recovery: drills that restore the newest backup into a scratch
//! store, replay and verify it, and record the measured recovery point (how
//! much the backup lacks) and time (how long until a verified, serving
//! state) as an event; the status and objectives read the drills back, and
//! `validate` checks the configuration a recovery depends on.

use std::time::Instant;

use agon_aggregates::CommandMeta;
use agon_aggregates::backup_drill::{
    BackupDrill, DrillCommand, DrillOutcome, Measured, Objectives,
};
use agon_projections::DrillHistory;
use agon_projections::backups::BackupDoc;
use serde::Serialize;

use super::ops::ms;
use super::{BackupError, Backups, Storage, restore};
use crate::projection::ListFilter;

/// One check of `validate`.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub detail: String,
}

/// The outcome of `validate`.
#[derive(Debug, Clone, Serialize)]
pub struct Validation {
    pub valid: bool,
    pub checks: Vec<Check>,
}

/// What the recovery status shows.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// The last drill succeeded and met both objectives, and the newest
    /// backup is recent enough.
    pub ready: bool,
    pub last_drill: Option<DrillOutcome>,
    pub newest_backup: Option<BackupDoc>,
    pub objectives: Objectives,
    pub issues: Vec<String>,
}

impl Backups {
    /// The objectives in force.
    pub fn objectives(&self) -> Objectives {
        let s = self.settings();
        Objectives {
            rpo_seconds: s.rpo.as_secs(),
            rpo_events: s.rpo_events,
            rto_seconds: s.rto.as_secs(),
        }
    }

    /// Runs a drill on the newest backup and records its outcome. A drill
    /// without a backup, or whose backup does not restore and verify, is
    /// recorded as failed.
    pub async fn drill(&self, actor: &str) -> Result<DrillOutcome, BackupError> {
        let started_at = self.inner.clock.now();
        let started = Instant::now();
        let live_events = self.live_events().await?;
        let mut measured = Measured {
            backup_id: None,
            rpo_events: None,
            rpo_seconds: None,
            rto_ms: None,
            events_restored: 0,
            verified: false,
            error: None,
            started_at,
            finished_at: started_at,
        };
        match self.newest().await? {
            None => measured.error = Some("no backup to restore".to_owned()),
            Some(doc) => {
                let backup = &doc.backup;
                measured.backup_id = Some(backup.backup_id.clone());
                measured.rpo_events = Some(live_events.saturating_sub(backup.events));
                measured.rpo_seconds = Some(
                    u64::try_from(
                        started_at
                            .signed_duration_since(backup.created_at)
                            .num_seconds(),
                    )
                    .unwrap_or_default(),
                );
                let mut trial = match self.trial(&doc).await {
                    Ok(trial) => Some(trial),
                    // A backup that cannot be read back is a failed drill.
                    Err(BackupError::Storage(e)) => {
                        measured.error = Some(e.to_string());
                        None
                    }
                    Err(e) => return Err(e),
                };
                measured.events_restored = trial.as_ref().map_or(0, |t| t.loaded.events);
                match trial.as_mut().map(|t| (t.scratch.take(), &t.verification)) {
                    None => {}
                    Some((None, verification)) => {
                        measured.error = Some(verification.problems.join("; "));
                    }
                    Some((Some(scratch), verification)) => {
                        let replayed = restore::replay(&scratch.log).await;
                        let serving = scratch.log.db().ping().await;
                        measured.rto_ms = Some(ms(started.elapsed()));
                        scratch.drop_store().await;
                        measured.verified = verification.valid && replayed.is_ok() && serving;
                        if let Err(e) = replayed {
                            measured.error = Some(e.to_string());
                        } else if !verification.valid {
                            measured.error = Some(verification.problems.join("; "));
                        }
                    }
                }
            }
        }
        measured.finished_at = self.inner.clock.now();
        let drill_id = format!("drill-{}", uuid::Uuid::now_v7().simple());
        let record = DrillCommand::Record {
            drill_id: drill_id.clone(),
            measured,
            objectives: self.objectives(),
        };
        let executed = self
            .inner
            .log
            .execute::<BackupDrill>(&drill_id, record, CommandMeta::by(actor))
            .await?;
        if self.inner.wait {
            self.inner
                .documents
                .wait_for_within::<DrillHistory>(
                    &drill_id,
                    self.inner.settings.catchup_timeout,
                    |_| true,
                )
                .await?;
        }
        let agon_aggregates::backup_drill::DrillEvent::DrillCompleted { drill } = executed
            .events
            .into_iter()
            .next()
            .ok_or_else(|| BackupError::Record("the drill recorded no event".to_owned()))?;
        Ok(drill)
    }

    /// The newest drill, if any.
    pub async fn last_drill(&self) -> Result<Option<DrillOutcome>, BackupError> {
        let filter = ListFilter {
            owner: None,
            state: None,
        };
        let (drills, _) = self
            .inner
            .documents
            .list::<DrillHistory>(filter, 1, 0)
            .await?;
        Ok(drills.into_iter().next())
    }

    /// The last drill, the newest backup, and what keeps recovery from
    /// being ready.
    pub async fn status(&self) -> Result<Status, BackupError> {
        let last_drill = self.last_drill().await?;
        let newest_backup = self.newest().await?;
        let mut issues = Vec::new();
        match &last_drill {
            None => issues.push("no drill has been run".to_owned()),
            Some(d) if !d.success => issues.push(format!(
                "the last drill failed: {}",
                d.measured.error.as_deref().unwrap_or("unknown")
            )),
            Some(d) => {
                if !d.rpo_met {
                    issues.push("the last drill missed the recovery point objective".to_owned());
                }
                if !d.rto_met {
                    issues.push("the last drill missed the recovery time objective".to_owned());
                }
            }
        }
        if let Some(problem) = self.backup_age_problem(newest_backup.as_ref()) {
            issues.push(problem);
        }
        Ok(Status {
            ready: issues.is_empty(),
            last_drill,
            newest_backup,
            objectives: self.objectives(),
            issues,
        })
    }

    /// Why the newest backup does not do, if it does not.
    fn backup_age_problem(&self, newest: Option<&BackupDoc>) -> Option<String> {
        let Some(doc) = newest else {
            return Some("there is no backup".to_owned());
        };
        let age = self
            .inner
            .clock
            .now()
            .signed_duration_since(doc.backup.created_at)
            .to_std()
            .unwrap_or_default();
        (age > self.settings().max_age).then(|| {
            format!(
                "the newest backup is {} s old, more than SERVICE_BACKUP_MAX_AGE_HOURS allows",
                age.as_secs()
            )
        })
    }

    /// Checks what a recovery needs: a recent backup, a writable backup
    /// directory (the staging one, and a bucket that takes objects, with
    /// S3 storage), the store, and the seal key backups verify against.
    pub async fn validate(&self) -> Result<Validation, BackupError> {
        let mut checks = Vec::new();
        let newest = self.newest().await?;
        let problem = self.backup_age_problem(newest.as_ref());
        checks.push(Check {
            name: "backup_recent".to_owned(),
            ok: problem.is_none(),
            detail: problem.unwrap_or_else(|| {
                format!(
                    "newest backup {}",
                    newest.as_ref().map_or("", |d| d.backup.backup_id.as_str())
                )
            }),
        });
        let probe = self
            .dir()
            .join(format!(".probe-{}", uuid::Uuid::new_v4().simple()));
        let writable = async {
            tokio::fs::create_dir_all(self.dir()).await?;
            tokio::fs::write(&probe, b"probe").await?;
            tokio::fs::remove_file(&probe).await
        }
        .await;
        let local = Check {
            name: "storage_reachable".to_owned(),
            ok: writable.is_ok(),
            detail: match &writable {
                Ok(()) => "the backup directory takes files".to_owned(),
                Err(e) => format!("the backup directory does not take files: {e}"),
            },
        };
        match self.storage() {
            Storage::Local => checks.push(local),
            Storage::S3(bucket) => {
                // The directory is where backups are staged before upload.
                checks.push(Check {
                    name: "staging_writable".to_owned(),
                    detail: local
                        .detail
                        .replace("backup directory", "staging directory"),
                    ..local
                });
                let probed = bucket.probe().await;
                checks.push(Check {
                    name: "storage_reachable".to_owned(),
                    ok: probed.is_ok(),
                    detail: match probed {
                        Ok(()) => format!("the bucket {} takes objects", bucket.name()),
                        Err(e) => format!("the storage is unreachable: {e}"),
                    },
                });
            }
        }
        let store = self.inner.log.db().ping().await;
        checks.push(Check {
            name: "store_reachable".to_owned(),
            ok: store,
            detail: if store {
                "the store answers"
            } else {
                "the store does not answer"
            }
            .to_owned(),
        });
        let key = hex::decode(&self.inner.trusted_key).is_ok_and(|k| k.len() == 32);
        checks.push(Check {
            name: "seal_key_present".to_owned(),
            ok: key,
            detail: if key {
                "the seal key backups verify against is loaded"
            } else {
                "no seal key to verify backups against"
            }
            .to_owned(),
        });
        Ok(Validation {
            valid: checks.iter().all(|c| c.ok),
            checks,
        })
    }
}
