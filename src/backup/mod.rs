//! Backups and disaster recovery, a service: consistent copies of the event
//! log and its seals in a backup directory, their verification (checksums,
//! chains and seals, and read models rebuilt from them), timed restores,
//! retention, and drills measured against the recovery objectives (`dr`).
//! Finished backups stay in the backup directory or go to an S3-compatible
//! bucket (`storage`).

pub mod archive;
mod compare;
pub mod digest;
pub mod dr;
mod ops;
pub mod restore;
pub mod storage;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;

pub use archive::Manifest;
pub use ops::{Cleanup, ComprehensiveReport, ProjectionMatch, RestoreTest, Stats, VerifyOutcome};
pub use storage::{Storage, StorageError};

use agon_aggregates::CommandMeta;
use agon_aggregates::backup::{Backup, BackupCommand, BackupSummary};
use agon_projections::BackupCatalog;
use agon_projections::backups::BackupDoc;
use sha2::{Digest, Sha256};

use crate::clock::Clock;
use crate::config::BackupSettings;
use crate::projection::{Documents, ListFilter};
use crate::store::{CommandError, EventLog, StoreError};

/// What can go wrong with a backup.
#[derive(Debug, Error)]
pub enum BackupError {
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// A backup file that cannot be read as written.
    #[error("backup is corrupt: {0}")]
    Corrupt(String),
    /// A restore needs an empty store.
    #[error("the target store already holds events; restore only into an empty store")]
    TargetNotEmpty,
    #[error("read models could not be rebuilt: {0}")]
    Replay(String),
    #[error("cannot create a scratch store: {0}")]
    Scratch(String),
    /// A backup type this service does not make.
    #[error("backup_type {0:?} is not supported; use full or snapshot")]
    UnsupportedType(String),
    /// No backup to work with.
    #[error("no backup {0}")]
    NotFound(String),
    /// The log refused or failed to record what was done.
    #[error("cannot record it in the log: {0}")]
    Record(String),
    /// The bucket backups are kept in did not answer or refused.
    #[error("{0}")]
    Storage(#[from] StorageError),
    /// The bucket's client cannot be set up from the settings.
    #[error("cannot set up the backup storage: {0}")]
    StorageSetup(#[source] Box<object_store::Error>),
}

impl<E: std::error::Error> From<CommandError<E>> for BackupError {
    fn from(e: CommandError<E>) -> Self {
        match e {
            CommandError::Store(e) => BackupError::Store(e),
            other => BackupError::Record(other.to_string()),
        }
    }
}

impl From<sqlx::Error> for BackupError {
    fn from(e: sqlx::Error) -> Self {
        BackupError::Store(e.into())
    }
}

/// The backups service; cheap to clone.
#[derive(Debug, Clone)]
pub struct Backups {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    log: EventLog,
    documents: Documents,
    settings: BackupSettings,
    storage: Storage,
    /// PostgreSQL's address, for scratch schemas beside the live tables.
    database_url: Option<String>,
    /// Hex public key the seals of a backup must verify against.
    trusted_key: String,
    clock: Clock,
    /// Whether commands wait for their read model (the service runs the
    /// projections; the command line does not).
    wait: bool,
}

/// A page of the backup list.
#[derive(Debug, Clone)]
pub struct Page {
    pub backups: Vec<BackupDoc>,
    pub total: u64,
}

/// Whether `id` could name a backup (its directory and its objects' folder).
pub fn is_backup_name(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 80
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Backups {
    pub fn new(
        log: EventLog,
        settings: BackupSettings,
        database_url: Option<String>,
        trusted_key: String,
        clock: Clock,
    ) -> Result<Self, BackupError> {
        Ok(Self {
            inner: Arc::new(Inner {
                documents: Documents::new(log.clone()),
                storage: Storage::new(&settings).map_err(BackupError::StorageSetup)?,
                log,
                settings,
                database_url,
                trusted_key,
                clock,
                wait: true,
            }),
        })
    }

    /// The same service for a process without read models (the command
    /// line): commands do not wait for them.
    pub fn offline(
        log: EventLog,
        settings: BackupSettings,
        database_url: Option<String>,
        trusted_key: String,
        clock: Clock,
    ) -> Result<Self, BackupError> {
        let mut this = Self::new(log, settings, database_url, trusted_key, clock)?;
        if let Some(inner) = Arc::get_mut(&mut this.inner) {
            inner.wait = false;
        }
        Ok(this)
    }

    pub fn settings(&self) -> &BackupSettings {
        &self.inner.settings
    }

    /// Where backups are kept.
    pub fn storage(&self) -> &Storage {
        &self.inner.storage
    }

    fn dir(&self) -> &Path {
        &self.inner.settings.dir
    }

    /// The directory of backup `id`, when `id` could name one.
    fn path_of(&self, id: &str) -> Option<PathBuf> {
        is_backup_name(id).then(|| self.dir().join(id))
    }

    /// Waits (bounded) until backup `id`'s document satisfies `done`.
    async fn settle(&self, id: &str, done: impl Fn(&BackupDoc) -> bool) -> Result<(), BackupError> {
        if self.inner.wait {
            self.inner
                .documents
                .wait_for_within::<BackupCatalog>(id, self.inner.settings.catchup_timeout, done)
                .await?;
        }
        Ok(())
    }

    /// Copies the log and its seals into a new backup, records it in the
    /// log, and returns it as recorded.
    pub async fn create(
        &self,
        backup_type: &str,
        description: Option<String>,
        actor: &str,
    ) -> Result<BackupDoc, BackupError> {
        if !matches!(backup_type, "full" | "snapshot") {
            return Err(BackupError::UnsupportedType(backup_type.to_owned()));
        }
        let started = std::time::Instant::now();
        let now = self.inner.clock.now();
        let id = format!(
            "backup-{}-{}",
            now.format("%Y%m%dT%H%M%S%3fZ"),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let partial = self.dir().join(format!("{id}.partial"));
        tokio::fs::create_dir_all(&partial).await?;
        let copied = match archive::export(self.inner.log.db(), &partial, None).await {
            Ok(copied) => copied,
            Err(e) => {
                let _ = tokio::fs::remove_dir_all(&partial).await;
                return Err(e);
            }
        };
        let manifest = Manifest {
            format: archive::FORMAT,
            backup_id: id.clone(),
            backup_type: backup_type.to_owned(),
            description,
            created_at: now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            backend: self.inner.log.backend().name().to_owned(),
            events: copied.events,
            streams: copied.streams,
            seals: copied.seals,
            subject_keys: copied.subject_keys,
            head: copied.head,
            head_seal: copied.head_seal,
            size_bytes: copied.files.iter().map(|f| f.bytes).sum(),
            files: copied.files,
            duration_ms: ops::ms(started.elapsed()),
        };
        let text = serde_json::to_vec_pretty(&manifest)?;
        tokio::fs::write(partial.join(archive::MANIFEST), &text).await?;
        self.keep_staged(&id, &partial).await?;
        let summary = BackupSummary {
            backup_id: id.clone(),
            backup_type: manifest.backup_type.clone(),
            description: manifest.description.clone(),
            backend: manifest.backend.clone(),
            events: manifest.events,
            streams: manifest.streams,
            seals: manifest.seals,
            head_position: manifest.head.map(|h| h.position),
            head_seal: manifest.head_seal.as_ref().map(|s| s.seal_number),
            size_bytes: manifest.size_bytes,
            manifest_sha256: hex::encode(Sha256::digest(&text)),
            duration_ms: manifest.duration_ms,
            created_at: now,
        };
        let record = BackupCommand::Record {
            summary: summary.clone(),
        };
        self.inner
            .log
            .execute::<Backup>(&id, record, CommandMeta::by(actor))
            .await?;
        self.settle(&id, |_| true).await?;
        Ok(BackupDoc {
            backup: summary,
            status: "completed".to_owned(),
            deleted_at: None,
            deleted_reason: None,
        })
    }

    /// A page of the backups, newest first; `status` (`completed` or
    /// `deleted`) and `backup_type` filter when given.
    pub async fn list(
        &self,
        status: Option<&str>,
        backup_type: Option<&str>,
        limit: u32,
        offset: u64,
    ) -> Result<Page, BackupError> {
        let filter = ListFilter {
            owner: None,
            state: status,
        };
        let Some(kind) = backup_type else {
            let (backups, total) = self
                .inner
                .documents
                .list::<BackupCatalog>(filter, limit, offset)
                .await?;
            return Ok(Page { backups, total });
        };
        // Few backups exist at a time, so a type filter reads them all.
        let (all, _) = self
            .inner
            .documents
            .list::<BackupCatalog>(filter, u32::MAX, 0)
            .await?;
        let matching: Vec<BackupDoc> = all
            .into_iter()
            .filter(|d| d.backup.backup_type == kind)
            .collect();
        let total = matching.len() as u64;
        let backups = matching
            .into_iter()
            .skip(usize::try_from(offset).unwrap_or(usize::MAX))
            .take(limit as usize)
            .collect();
        Ok(Page { backups, total })
    }

    /// The backups whose files are kept, newest first.
    pub async fn kept(&self) -> Result<Vec<BackupDoc>, BackupError> {
        Ok(self
            .list(Some("completed"), None, u32::MAX, 0)
            .await?
            .backups)
    }

    /// Backup `id` as recorded (deleted ones too); `None` when there is none.
    pub async fn get(&self, id: &str) -> Result<Option<BackupDoc>, BackupError> {
        if self.path_of(id).is_none() {
            return Ok(None);
        }
        Ok(self.inner.documents.get::<BackupCatalog>(id).await?)
    }

    /// The manifest of kept backup `id` as stored beside its files: `Err`
    /// with what is wrong when it is missing, unreadable or not the one
    /// recorded.
    async fn stored_manifest(&self, doc: &BackupDoc, dir: &Path) -> Result<Manifest, String> {
        let bytes = tokio::fs::read(dir.join(archive::MANIFEST))
            .await
            .map_err(|e| format!("the manifest cannot be read: {e}"))?;
        if hex::encode(Sha256::digest(&bytes)) != doc.backup.manifest_sha256 {
            return Err("the manifest is not the one recorded when the backup was made".to_owned());
        }
        serde_json::from_slice(&bytes).map_err(|e| format!("the manifest is not valid: {e}"))
    }

    /// Removes backup `id`'s files and records its deletion (`reason`:
    /// `operator` or `retention`); `None` when there is no such kept backup.
    pub async fn delete(
        &self,
        id: &str,
        reason: &str,
        actor: &str,
    ) -> Result<Option<BackupDoc>, BackupError> {
        let Some(doc) = self.get(id).await?.filter(|d| d.status == "completed") else {
            return Ok(None);
        };
        if let Storage::S3(bucket) = self.storage() {
            bucket.remove(id).await?;
        }
        if let Some(dir) = self.path_of(id) {
            match tokio::fs::remove_dir_all(dir).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        let delete = BackupCommand::Delete {
            reason: reason.to_owned(),
            at: self.inner.clock.now(),
        };
        self.inner
            .log
            .execute::<Backup>(id, delete, CommandMeta::by(actor))
            .await?;
        self.settle(id, |d| d.status == "deleted").await?;
        Ok(self.get(id).await?.or(Some(doc)))
    }

    /// The newest kept backup, if any.
    pub async fn newest(&self) -> Result<Option<BackupDoc>, BackupError> {
        Ok(self
            .list(Some("completed"), None, 1, 0)
            .await?
            .backups
            .into_iter()
            .next())
    }
}
