//! Settings of backups and disaster recovery (`SERVICE_BACKUP_*`, `SERVICE_DR_*`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::values::{ConfigError, Vars};

/// Where backups go, how long they are kept, and the recovery objectives
/// drills are measured against.
#[derive(Debug, Clone)]
pub struct BackupSettings {
    /// `SERVICE_BACKUP_DIR`: the directory backups are written to. Default
    /// `SERVICE_DATA_DIR/backups`.
    pub dir: PathBuf,
    /// `SERVICE_BACKUP_RETENTION_COUNT`: `cleanup` keeps at least the newest
    /// this many backups. Default 7.
    pub retention_count: usize,
    /// `SERVICE_BACKUP_RETENTION_DAYS`: `cleanup` removes backups older than
    /// this (beyond the kept count). Default 30.
    pub retention: Duration,
    /// `SERVICE_BACKUP_MAX_AGE_HOURS`: `dr/validate` calls the newest backup
    /// stale past this age. Default 24.
    pub max_age: Duration,
    /// `SERVICE_BACKUP_PAGE_MAX`: the largest `limit` of the backup list. Default 200.
    pub page_max: u32,
    /// `SERVICE_BACKUP_BATCH_ROWS`: rows per statement when a backup is
    /// restored. Default 500.
    pub batch_rows: usize,
    /// `SERVICE_BACKUP_CATCHUP_TIMEOUT_MS`: how long `verify-comprehensive`
    /// waits for the live read models to reach the backup's position.
    /// Default 10000.
    pub catchup_timeout: Duration,
    /// `SERVICE_BACKUP_COMPARE_WINDOW_EVENTS`: up to this many events written
    /// after a backup, `verify-comprehensive` compares with the live read
    /// models those events do not concern; past it, with read models
    /// replayed from the live log. Default 10000.
    pub compare_window: i64,
    /// `SERVICE_BACKUP_DESCRIPTION_MAX_CHARS`: the longest description a
    /// backup takes. Default 500.
    pub description_max_chars: usize,
    /// `SERVICE_DR_RPO_SECONDS`: the recovery point objective, as the age of
    /// the newest backup a drill restores. Default 3600.
    pub rpo: Duration,
    /// `SERVICE_DR_RPO_EVENTS`: the recovery point objective in events the
    /// newest backup lacks. Default 10000.
    pub rpo_events: u64,
    /// `SERVICE_DR_RTO_SECONDS`: the recovery time objective: restore,
    /// replay and verification of the newest backup. Default 900.
    pub rto: Duration,
}

impl BackupSettings {
    pub(super) fn read<F: Fn(&str) -> Option<String>>(
        vars: &Vars<F>,
        data_dir: &Path,
    ) -> Result<Self, ConfigError> {
        let secs = |variable, min, max, default| {
            vars.within(variable, min, max, default)
                .map(Duration::from_secs)
        };
        Ok(Self {
            dir: vars
                .get("SERVICE_BACKUP_DIR")
                .map_or_else(|| data_dir.join("backups"), PathBuf::from),
            retention_count: vars.within_u32("SERVICE_BACKUP_RETENTION_COUNT", 1, 100_000, 7)?
                as usize,
            retention: Duration::from_secs(
                vars.within("SERVICE_BACKUP_RETENTION_DAYS", 1, 36_500, 30)? * 86_400,
            ),
            max_age: Duration::from_secs(
                vars.within("SERVICE_BACKUP_MAX_AGE_HOURS", 1, 87_600, 24)? * 3_600,
            ),
            page_max: vars.within_u32("SERVICE_BACKUP_PAGE_MAX", 1, 10_000, 200)?,
            batch_rows: vars.within_u32("SERVICE_BACKUP_BATCH_ROWS", 1, 2_000, 500)? as usize,
            catchup_timeout: Duration::from_millis(vars.within(
                "SERVICE_BACKUP_CATCHUP_TIMEOUT_MS",
                0,
                3_600_000,
                10_000,
            )?),
            compare_window: i64::from(vars.within_u32(
                "SERVICE_BACKUP_COMPARE_WINDOW_EVENTS",
                1,
                1_000_000,
                10_000,
            )?),
            description_max_chars: vars.within_u32(
                "SERVICE_BACKUP_DESCRIPTION_MAX_CHARS",
                0,
                100_000,
                500,
            )? as usize,
            rpo: secs("SERVICE_DR_RPO_SECONDS", 1, 31_536_000, 3_600)?,
            rpo_events: vars.within("SERVICE_DR_RPO_EVENTS", 0, u64::MAX >> 1, 10_000)?,
            rto: secs("SERVICE_DR_RTO_SECONDS", 1, 31_536_000, 900)?,
        })
    }
}
