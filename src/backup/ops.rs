//! What is done with a backup once it exists: verification, the
//! comprehensive check against the live read models, timed restore tests,
//! retention and statistics.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::archive::{self, Manifest};
use super::digest;
use super::restore::{self, Loaded, Scratch};
use super::{BackupError, Backups};
use agon_projections::backups::BackupDoc;

/// The outcome of `verify`: the files against their checksums, then the
/// restored chains and seals against the manifest.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyOutcome {
    pub backup_id: String,
    pub valid: bool,
    pub checksums_ok: bool,
    pub events_checked: u64,
    pub streams_checked: u64,
    pub seals_checked: u64,
    pub unsealed_events: u64,
    /// What is wrong; empty when valid.
    pub problems: Vec<String>,
}

/// One projection's read model in the restored store and the live one.
#[derive(Debug, Clone, Serialize)]
pub struct ProjectionMatch {
    pub projection: String,
    /// `live`: the service's own read model (no event after the backup's
    /// position concerns it); `live_log`: one replayed from the live log up
    /// to that position.
    pub compared_with: String,
    pub backup_digest: String,
    pub live_digest: String,
    pub identical: bool,
}

/// The outcome of `verify-comprehensive`.
#[derive(Debug, Clone, Serialize)]
pub struct ComprehensiveReport {
    pub verification: VerifyOutcome,
    /// Events replayed into the restored store's read models.
    pub replayed_events: u64,
    pub identical: bool,
    pub projections: Vec<ProjectionMatch>,
    pub valid: bool,
}

/// The outcome of `restore-test`: a full restore, timed.
#[derive(Debug, Clone, Serialize)]
pub struct RestoreTest {
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

/// What `cleanup` removed (or would remove, on a dry run).
#[derive(Debug, Clone, Serialize)]
pub struct Cleanup {
    pub dry_run: bool,
    pub deleted: Vec<String>,
    pub kept: u64,
    pub freed_bytes: u64,
}

/// Counts and sizes of the stored backups.
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    pub total_backups: u64,
    pub total_size_bytes: u64,
    pub newest_backup_id: Option<String>,
    pub newest_backup_at: Option<String>,
    pub newest_age_seconds: Option<i64>,
    pub oldest_backup_at: Option<String>,
    pub retention_count: u64,
    pub retention_days: u64,
}

pub(super) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A backup restored into a scratch store, with what was found on the way.
pub(super) struct Trial {
    pub manifest: Option<Manifest>,
    pub scratch: Option<Scratch>,
    pub verification: VerifyOutcome,
    pub loaded: Loaded,
    pub restore: Duration,
    pub verify: Duration,
}

impl Backups {
    /// Kept backup `id`, or [`BackupError::NotFound`].
    pub(super) async fn kept_doc(&self, id: &str) -> Result<BackupDoc, BackupError> {
        self.get(id)
            .await?
            .filter(|d| d.status == "completed")
            .ok_or_else(|| BackupError::NotFound(id.to_owned()))
    }

    pub(super) async fn scratch(&self) -> Result<Scratch, BackupError> {
        Scratch::create(
            self.inner.log.db(),
            self.inner.database_url.as_deref(),
            self.dir(),
        )
        .await
    }

    /// Checks the manifest and files of `doc`'s backup, restores them into
    /// a scratch store (kept in the trial when they restored) and verifies
    /// chains and seals there.
    pub(super) async fn trial(&self, doc: &BackupDoc) -> Result<Trial, BackupError> {
        let opened = self.open(&doc.backup.backup_id).await?;
        let trial = self.trial_in(doc, &opened.dir).await;
        opened.close().await;
        trial
    }

    /// [`Self::trial`] on the backup's files in `dir`.
    async fn trial_in(&self, doc: &BackupDoc, dir: &Path) -> Result<Trial, BackupError> {
        let mut verification = VerifyOutcome {
            backup_id: doc.backup.backup_id.clone(),
            valid: false,
            checksums_ok: false,
            events_checked: 0,
            streams_checked: 0,
            seals_checked: 0,
            unsealed_events: 0,
            problems: Vec::new(),
        };
        let mut trial = Trial {
            manifest: None,
            scratch: None,
            verification: verification.clone(),
            loaded: Loaded::default(),
            restore: Duration::ZERO,
            verify: Duration::ZERO,
        };
        let manifest = match self.stored_manifest(doc, dir).await {
            Ok(manifest) => manifest,
            Err(problem) => {
                verification.problems.push(problem);
                trial.verification = verification;
                return Ok(trial);
            }
        };
        let problem = archive::check_files(dir, &manifest).await?;
        trial.manifest = Some(manifest);
        if let Some(problem) = problem {
            verification.problems.push(problem);
            trial.verification = verification;
            return Ok(trial);
        }
        verification.checksums_ok = true;
        let scratch = self.scratch().await?;
        let started = Instant::now();
        let loaded =
            match restore::load(scratch.log.db(), dir, self.inner.settings.batch_rows).await {
                Ok(loaded) => loaded,
                Err(BackupError::Corrupt(problem)) => {
                    scratch.drop_store().await;
                    verification.problems.push(problem);
                    trial.verification = verification;
                    return Ok(trial);
                }
                Err(e) => {
                    scratch.drop_store().await;
                    return Err(e);
                }
            };
        trial.restore = started.elapsed();
        trial.loaded = loaded;
        let started = Instant::now();
        let checked = match &trial.manifest {
            Some(manifest) => {
                self.check_restored(&scratch, manifest, &mut verification)
                    .await
            }
            None => Ok(()),
        };
        if let Err(e) = checked {
            scratch.drop_store().await;
            return Err(e);
        }
        trial.verify = started.elapsed();
        verification.valid = verification.problems.is_empty();
        trial.verification = verification;
        trial.scratch = Some(scratch);
        Ok(trial)
    }

    /// Verifies the restored log's chains and seals and compares what it
    /// holds with `manifest`, adding what is wrong to `verification`.
    async fn check_restored(
        &self,
        scratch: &Scratch,
        manifest: &Manifest,
        verification: &mut VerifyOutcome,
    ) -> Result<(), BackupError> {
        let report = scratch.log.verify(&self.inner.trusted_key).await?;
        verification.events_checked = report.events_checked;
        verification.streams_checked = report.streams_checked;
        verification.seals_checked = report.seals_checked;
        verification.unsealed_events = report.unsealed_events;
        if let Some(problem) = &report.problem {
            verification.problems.push(problem.to_string());
        }
        for (what, found, stated) in [
            ("events", report.events_checked, manifest.events),
            ("streams", report.streams_checked, manifest.streams),
            ("seals", report.seals_checked, manifest.seals),
        ] {
            if found != stated {
                verification.problems.push(format!(
                    "{found} {what} restored, the manifest says {stated}"
                ));
            }
        }
        let last = scratch.log.last_seal().await?;
        if last.map(|s| (s.seal_number, hex::encode(s.seal_hash)))
            != manifest
                .head_seal
                .as_ref()
                .map(|h| (h.seal_number, h.seal_hash.clone()))
        {
            verification
                .problems
                .push("the newest seal differs from the manifest's head seal".to_owned());
        }
        Ok(())
    }

    /// Checks backup `id`'s checksums, chains and seals.
    pub async fn verify(&self, id: &str) -> Result<VerifyOutcome, BackupError> {
        let mut trial = self.trial(&self.kept_doc(id).await?).await?;
        if let Some(scratch) = trial.scratch.take() {
            scratch.drop_store().await;
        }
        Ok(trial.verification)
    }

    /// Verifies backup `id`, replays every projection from it and compares
    /// each read model's digest with the live one at the backup's position.
    pub async fn verify_comprehensive(&self, id: &str) -> Result<ComprehensiveReport, BackupError> {
        let mut trial = self.trial(&self.kept_doc(id).await?).await?;
        let mut report = ComprehensiveReport {
            verification: trial.verification.clone(),
            replayed_events: 0,
            identical: false,
            projections: Vec::new(),
            valid: false,
        };
        let Some(scratch) = trial.scratch.take() else {
            return Ok(report);
        };
        let restored = async {
            let replayed = restore::replay(&scratch.log).await?;
            Ok::<_, BackupError>((replayed, digest::digests(&scratch.log).await?))
        }
        .await;
        scratch.drop_store().await;
        let (replayed, ours) = restored?;
        report.replayed_events = replayed;
        let Some(manifest) = &trial.manifest else {
            return Ok(report);
        };
        let theirs = self.live_digests(manifest).await?;
        report.projections = ours
            .into_iter()
            .map(|(projection, backup_digest)| {
                let (with, live_digest) = theirs.get(&projection).cloned().unwrap_or_default();
                ProjectionMatch {
                    identical: live_digest == backup_digest,
                    projection,
                    compared_with: with.to_owned(),
                    backup_digest,
                    live_digest,
                }
            })
            .collect();
        report.identical = report.projections.iter().all(|p| p.identical);
        report.valid = report.verification.valid && report.identical;
        Ok(report)
    }

    pub(super) async fn live_events(&self) -> Result<u64, BackupError> {
        let count: i64 = crate::store::db::with_pool!(self.inner.log.db().reader(), pool => {
            sqlx::query_scalar("SELECT COUNT(*) FROM events").fetch_one(pool).await?
        });
        Ok(u64::try_from(count).unwrap_or_default())
    }

    /// Restores backup `id` in full into a scratch store, rebuilds every
    /// read model and verifies the log, timing each step.
    pub async fn restore_test(&self, id: &str) -> Result<RestoreTest, BackupError> {
        let started = Instant::now();
        let mut trial = self.trial(&self.kept_doc(id).await?).await?;
        let mut test = RestoreTest {
            backup_id: id.to_owned(),
            success: false,
            events_restored: trial.loaded.events,
            seals_restored: trial.loaded.seals,
            restore_ms: ms(trial.restore),
            replay_ms: 0,
            verify_ms: ms(trial.verify),
            total_ms: 0,
            problems: trial.verification.problems.clone(),
        };
        if let Some(scratch) = trial.scratch.take() {
            let replay = Instant::now();
            let replayed = restore::replay(&scratch.log).await;
            test.replay_ms = ms(replay.elapsed());
            scratch.drop_store().await;
            replayed?;
        }
        test.total_ms = ms(started.elapsed());
        test.success = trial.verification.valid;
        Ok(test)
    }

    /// Removes backups past the retention policy (the newest
    /// `SERVICE_BACKUP_RETENTION_COUNT` always stay; older ones go after
    /// `SERVICE_BACKUP_RETENTION_DAYS`); a dry run only names them.
    pub async fn cleanup(&self, dry_run: bool, actor: &str) -> Result<Cleanup, BackupError> {
        let now = self.inner.clock.now();
        let settings = &self.inner.settings;
        let mut out = Cleanup {
            dry_run,
            deleted: Vec::new(),
            kept: 0,
            freed_bytes: 0,
        };
        for (index, doc) in self.kept().await?.into_iter().enumerate() {
            let backup = doc.backup;
            let age = now
                .signed_duration_since(backup.created_at)
                .to_std()
                .unwrap_or_default();
            if index < settings.retention_count || age <= settings.retention {
                out.kept += 1;
                continue;
            }
            if !dry_run {
                self.delete(&backup.backup_id, "retention", actor).await?;
            }
            out.freed_bytes += backup.size_bytes;
            out.deleted.push(backup.backup_id);
        }
        Ok(out)
    }

    /// Counts, sizes and ages of the stored backups.
    pub async fn stats(&self) -> Result<Stats, BackupError> {
        let all = self.kept().await?;
        let now = self.inner.clock.now();
        let newest = all.first().map(|d| &d.backup);
        let at = |b: &agon_aggregates::backup::BackupSummary| {
            b.created_at
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        };
        Ok(Stats {
            total_backups: all.len() as u64,
            total_size_bytes: all.iter().map(|d| d.backup.size_bytes).sum(),
            newest_backup_id: newest.map(|b| b.backup_id.clone()),
            newest_backup_at: newest.map(at),
            newest_age_seconds: newest
                .map(|b| now.signed_duration_since(b.created_at).num_seconds()),
            oldest_backup_at: all.last().map(|d| at(&d.backup)),
            retention_count: self.inner.settings.retention_count as u64,
            retention_days: self.inner.settings.retention.as_secs() / 86_400,
        })
    }
}
