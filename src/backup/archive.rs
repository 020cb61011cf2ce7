//! A backup on disk: the log's events and seals as JSON lines, copied in
//! one read transaction (a consistent snapshot on both back ends), and the
//! manifest that describes and checksums them.
//!
//! The copy is logical rather than a database file so that a backup of
//! either back end restores into either, with every position, transaction
//! order, hash and seal as stored.

use std::path::{Path, PathBuf};

use agon_projections::Cursor;
use futures::TryStreamExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};

use super::BackupError;
use crate::store::db::with_pool;
use crate::store::seal::StoredSeal;
use crate::store::{Backend, Db, StoredEvent};

/// The manifest's file name inside a backup directory.
pub const MANIFEST: &str = "manifest.json";
pub const EVENTS: &str = "events.jsonl";
pub const SEALS: &str = "seals.jsonl";
/// The wrapped per-user data keys (crypto-shredding): without them every
/// sealed personal field of a restored store would read as erased.
pub const SUBJECT_KEYS: &str = "subject_keys.jsonl";
/// The manifest format this code writes and reads.
pub const FORMAT: u32 = 1;

const EVENT_COLUMNS: &str = "position, txid, event_id, aggregate_type, aggregate_id, \
     sequence, event_type, event_version, payload, metadata, prev_hash, hash";
const SEAL_COLUMNS: &str = "seal_number, body, seal_hash, signature, to_txid, to_position";

/// What a backup holds, with the checksums `verify` recomputes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub backup_id: String,
    pub backup_type: String,
    pub description: Option<String>,
    /// RFC 3339, UTC.
    pub created_at: String,
    /// The back end it was copied from.
    pub backend: String,
    pub events: u64,
    pub streams: u64,
    pub seals: u64,
    /// Per-user data keys copied (still wrapped by the field cipher).
    #[serde(default)]
    pub subject_keys: u64,
    /// The largest feed cursor among the copied events.
    pub head: Option<Cursor>,
    pub head_seal: Option<HeadSeal>,
    pub files: Vec<FileSum>,
    pub size_bytes: u64,
    pub duration_ms: u64,
}

/// The newest seal the backup holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadSeal {
    pub seal_number: i64,
    /// Hex SHA-256 of its canonical body.
    pub seal_hash: String,
    pub to: Cursor,
}

/// One data file and its checksum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSum {
    pub name: String,
    pub bytes: u64,
    /// Hex SHA-256 of the file.
    pub sha256: String,
}

/// One event as a line of `events.jsonl`: the row, hashes in hex.
#[derive(Debug, Serialize, Deserialize)]
pub struct EventLine {
    pub position: i64,
    pub txid: i64,
    pub event_id: String,
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub sequence: i64,
    pub event_type: String,
    pub event_version: String,
    pub payload: String,
    pub metadata: String,
    pub prev_hash: String,
    pub hash: String,
}

/// One wrapped data key as a line of `subject_keys.jsonl`.
#[derive(Debug, Serialize, Deserialize, sqlx::FromRow)]
pub struct KeyLine {
    pub subject: String,
    pub wrapped_key: String,
    pub created_at: String,
}

/// One seal as a line of `seals.jsonl`.
#[derive(Debug, Serialize, Deserialize)]
pub struct SealLine {
    pub seal_number: i64,
    pub body: String,
    pub seal_hash: String,
    pub signature: String,
    pub to_txid: i64,
    pub to_position: i64,
}

impl From<StoredEvent> for EventLine {
    fn from(e: StoredEvent) -> Self {
        Self {
            position: e.position,
            txid: e.txid,
            event_id: e.event_id,
            aggregate_type: e.aggregate_type,
            aggregate_id: e.aggregate_id,
            sequence: e.sequence,
            event_type: e.event_type,
            event_version: e.event_version,
            payload: e.payload,
            metadata: e.metadata,
            prev_hash: hex::encode(e.prev_hash),
            hash: hex::encode(e.hash),
        }
    }
}

impl From<StoredSeal> for SealLine {
    fn from(s: StoredSeal) -> Self {
        Self {
            seal_number: s.seal_number,
            body: s.body,
            seal_hash: hex::encode(s.seal_hash),
            signature: hex::encode(s.signature),
            to_txid: s.to_txid,
            to_position: s.to_position,
        }
    }
}

/// A JSON-lines file being written, hashed as it goes.
struct LineWriter {
    name: &'static str,
    out: BufWriter<tokio::fs::File>,
    hasher: Sha256,
    bytes: u64,
}

impl LineWriter {
    async fn create(dir: &Path, name: &'static str) -> Result<Self, BackupError> {
        let file = tokio::fs::File::create(dir.join(name)).await?;
        Ok(Self {
            name,
            out: BufWriter::with_capacity(1 << 16, file),
            hasher: Sha256::new(),
            bytes: 0,
        })
    }

    async fn line<T: Serialize>(&mut self, value: &T) -> Result<(), BackupError> {
        let mut text = serde_json::to_vec(value)?;
        text.push(b'\n');
        self.hasher.update(&text);
        self.bytes += text.len() as u64;
        self.out.write_all(&text).await?;
        Ok(())
    }

    /// Flushes and syncs the file; its checksum.
    async fn finish(mut self) -> Result<FileSum, BackupError> {
        self.out.flush().await?;
        self.out.get_ref().sync_all().await?;
        Ok(FileSum {
            name: self.name.to_owned(),
            bytes: self.bytes,
            sha256: hex::encode(self.hasher.finalize()),
        })
    }
}

/// What [`export`] copied.
pub struct Copied {
    pub events: u64,
    pub streams: u64,
    pub seals: u64,
    pub subject_keys: u64,
    pub head: Option<Cursor>,
    pub head_seal: Option<HeadSeal>,
    pub files: Vec<FileSum>,
}

/// Copies the log of `db` (its events up to `up_to` when given) into `dir`,
/// in one read-only transaction that sees one committed state of the log.
pub async fn export(db: &Db, dir: &Path, up_to: Option<Cursor>) -> Result<Copied, BackupError> {
    let mut events = LineWriter::create(dir, EVENTS).await?;
    let mut seals = LineWriter::create(dir, SEALS).await?;
    let mut keys = LineWriter::create(dir, SUBJECT_KEYS).await?;
    let bound = match up_to {
        Some(_) => "WHERE (txid, position) <= ($1, $2)",
        None => "WHERE $1 = $1 AND $2 = $2",
    };
    let event_sql = format!("SELECT {EVENT_COLUMNS} FROM events {bound} ORDER BY position");
    let seal_sql = format!("SELECT {SEAL_COLUMNS} FROM seals ORDER BY seal_number");
    let at = up_to.unwrap_or_default();
    let mut copied = Copied {
        events: 0,
        streams: 0,
        seals: 0,
        subject_keys: 0,
        head: None,
        head_seal: None,
        files: Vec::new(),
    };
    let mut streams = std::collections::HashSet::new();
    let snapshot = (db.backend() == Backend::Postgres)
        .then_some("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY");
    with_pool!(db.reader(), pool => {
        let mut tx = pool.begin().await?;
        if let Some(sql) = snapshot {
            sqlx::query(sql).execute(&mut *tx).await?;
        }
        {
            let mut rows = sqlx::query_as::<_, StoredEvent>(&event_sql)
                .bind(at.txid)
                .bind(at.position)
                .fetch(&mut *tx);
            while let Some(row) = rows.try_next().await? {
                let cursor = row.cursor();
                copied.head = Some(copied.head.map_or(cursor, |h| h.max(cursor)));
                copied.events += 1;
                if row.sequence == 1 {
                    streams.insert((row.aggregate_type.clone(), row.aggregate_id.clone()));
                }
                events.line(&EventLine::from(row)).await?;
            }
        }
        let rows: Vec<StoredSeal> = sqlx::query_as(&seal_sql).fetch_all(&mut *tx).await?;
        for seal in rows {
            if up_to.is_some_and(|to| Cursor { txid: seal.to_txid, position: seal.to_position } > to) {
                break;
            }
            copied.seals += 1;
            copied.head_seal = Some(HeadSeal {
                seal_number: seal.seal_number,
                seal_hash: hex::encode(&seal.seal_hash),
                to: Cursor { txid: seal.to_txid, position: seal.to_position },
            });
            seals.line(&SealLine::from(seal)).await?;
        }
        let rows: Vec<KeyLine> = sqlx::query_as(
            "SELECT subject, wrapped_key, created_at FROM subject_keys ORDER BY subject",
        )
        .fetch_all(&mut *tx)
        .await?;
        for key in rows {
            copied.subject_keys += 1;
            keys.line(&key).await?;
        }
        tx.commit().await?;
    });
    copied.streams = streams.len() as u64;
    copied.files = vec![
        events.finish().await?,
        seals.finish().await?,
        keys.finish().await?,
    ];
    Ok(copied)
}

/// Reads a JSON-lines file of a backup, one parsed line at a time.
pub struct LineReader {
    lines: tokio::io::Lines<BufReader<tokio::fs::File>>,
    pub path: PathBuf,
    pub line: u64,
}

impl LineReader {
    pub async fn open(dir: &Path, name: &str) -> Result<Self, BackupError> {
        let path = dir.join(name);
        let file = tokio::fs::File::open(&path).await?;
        Ok(Self {
            lines: BufReader::with_capacity(1 << 16, file).lines(),
            path,
            line: 0,
        })
    }

    pub async fn next<T: for<'de> Deserialize<'de>>(&mut self) -> Result<Option<T>, BackupError> {
        let Some(text) = self.lines.next_line().await? else {
            return Ok(None);
        };
        self.line += 1;
        serde_json::from_str(&text).map(Some).map_err(|e| {
            BackupError::Corrupt(format!("{} line {}: {e}", self.path.display(), self.line))
        })
    }
}

/// Recomputes the checksum of every file the manifest names; the first
/// that differs, as a problem.
pub async fn check_files(dir: &Path, manifest: &Manifest) -> Result<Option<String>, BackupError> {
    for file in &manifest.files {
        let path = dir.join(&file.name);
        let Ok(handle) = tokio::fs::File::open(&path).await else {
            return Ok(Some(format!("{} is missing", file.name)));
        };
        let mut reader = BufReader::with_capacity(1 << 16, handle);
        let mut hasher = Sha256::new();
        let mut bytes = 0u64;
        loop {
            let chunk = reader.fill_buf().await?;
            if chunk.is_empty() {
                break;
            }
            hasher.update(chunk);
            let n = chunk.len();
            bytes += n as u64;
            reader.consume(n);
        }
        if bytes != file.bytes || hex::encode(hasher.finalize()) != file.sha256 {
            return Ok(Some(format!("{} does not match its checksum", file.name)));
        }
    }
    Ok(None)
}
