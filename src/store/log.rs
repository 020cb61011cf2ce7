//! Appending to and loading streams of the event log.
//!
//! An append is atomic: every event of one command goes in together (one
//! multi-row INSERT, or one transaction when a snapshot rides along; on
//! SQLite appends waiting together share one commit, see `group`),
//! each linked to its predecessor by the hash chain, and the unique key on
//! `(aggregate_type, aggregate_id, sequence)` lets exactly one of two
//! concurrent writers win. Each row's place in the feed order (`txid`) is
//! the column default's: on PostgreSQL the transaction id plus the
//! database's order shift, which the connection settled once and cached
//! (see `feed`), so an append stays one statement.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use cqrs_es::persist::SerializedEvent;
use serde_json::Value;
use tokio::sync::watch;
use uuid::Uuid;

use super::StoreError;
use super::chain::{ChainedFields, GENESIS, Hash, canonical_text, hash_from_slice};
use super::db::{Backend, Db, PoolRef, with_pool};
use super::group::GroupCommit;
use super::rows::{EVENT_COLUMNS, StoredEvent};

/// How many stream heads the hash cache keeps before it starts afresh. A
/// stream is appended to in bursts (a debate's few commands within seconds),
/// so a few thousand cover every stream in use; 65 536 held about 15 MiB
/// once that many debates had been created, memory that grew with the
/// debates stored.
const HEAD_CACHE_LIMIT: usize = 4_096;
/// Rows per `INSERT` statement: 10 parameters each stays under SQLite's limit.
const MAX_ROWS_PER_INSERT: usize = 1_000;
/// Parameters of one event row in an `INSERT`.
const EVENT_PARAMS: usize = 10;

type StreamKey = (String, String);

/// The event log: the one place that writes events.
#[derive(Debug, Clone)]
pub struct EventLog {
    db: Db,
    /// Last known `(sequence, hash)` of recently used streams. A committed
    /// event's hash never changes, so a hit saves the read of the predecessor;
    /// a stale entry can only name an older sequence, which the unique key
    /// then rejects as a conflict.
    heads: Arc<Mutex<HashMap<StreamKey, (i64, Hash)>>>,
    /// Counts local commits so the relay wakes at once instead of polling.
    commits: Arc<watch::Sender<u64>>,
    /// SQLite appends waiting for the one writer share its next commit.
    group: Arc<GroupCommit>,
    /// Counts read-model commits of this process, for requests that wait
    /// until their effect is readable.
    read_models: Arc<watch::Sender<u64>>,
    /// How long a command waits for its effect to be readable.
    read_model_wait: Duration,
}

/// `SERVICE_READ_MODEL_WAIT_MS`'s default.
const READ_MODEL_WAIT: Duration = Duration::from_secs(5);

/// An event ready to be inserted.
pub(super) struct Row {
    event_id: String,
    sequence: i64,
    event_type: String,
    event_version: String,
    payload: String,
    metadata: String,
    prev_hash: Hash,
    hash: Hash,
}

impl EventLog {
    pub fn new(db: Db) -> Self {
        Self {
            db,
            heads: Arc::default(),
            commits: Arc::new(watch::channel(0).0),
            group: Arc::default(),
            read_models: Arc::new(watch::channel(0).0),
            read_model_wait: READ_MODEL_WAIT,
        }
    }

    /// Sets how long commands wait for their effect to be readable.
    #[must_use]
    pub fn with_read_model_wait(mut self, wait: Duration) -> Self {
        self.read_model_wait = wait;
        self
    }

    /// How long a command waits for its effect to be readable
    /// (`SERVICE_READ_MODEL_WAIT_MS`).
    pub fn read_model_wait(&self) -> Duration {
        self.read_model_wait
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    pub fn backend(&self) -> Backend {
        self.db.backend()
    }

    /// A receiver that changes whenever this process commits events.
    pub fn subscribe_commits(&self) -> watch::Receiver<u64> {
        self.commits.subscribe()
    }

    /// A receiver that changes whenever a projection of this process commits.
    pub fn subscribe_read_models(&self) -> watch::Receiver<u64> {
        self.read_models.subscribe()
    }

    /// How many read-model commits this process has seen.
    pub(crate) fn read_models_version(&self) -> u64 {
        *self.read_models.borrow()
    }

    /// Tells the waiting requests that a read model moved.
    pub(crate) fn read_models_moved(&self) {
        self.read_models.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Appends the events of one command to one stream, atomically.
    ///
    /// The store stamps `event_id` and `recorded_at` into each event's
    /// metadata unless the caller supplied them.
    pub async fn append(&self, events: &[SerializedEvent]) -> Result<(), StoreError> {
        self.append_with_snapshot(events, None).await
    }

    pub(super) async fn append_with_snapshot(
        &self,
        events: &[SerializedEvent],
        snapshot: Option<(Value, i64)>,
    ) -> Result<(), StoreError> {
        let Some(first) = events.first() else {
            return Ok(());
        };
        let aggregate_type = first.aggregate_type.as_str();
        let aggregate_id = first.aggregate_id.as_str();
        let first_sequence = to_i64(first.sequence);
        let contiguous = events.iter().enumerate().all(|(i, e)| {
            e.aggregate_type == aggregate_type
                && e.aggregate_id == aggregate_id
                && to_i64(e.sequence) == first_sequence + to_i64(i)
        });
        if !contiguous || first_sequence < 1 {
            return Err(StoreError::NonContiguousAppend);
        }
        let key = (aggregate_type.to_owned(), aggregate_id.to_owned());
        let cached = self.cached_head(&key, first_sequence - 1);
        let conflict = || StoreError::Conflict {
            aggregate_type: aggregate_type.to_owned(),
            aggregate_id: aggregate_id.to_owned(),
            sequence: first_sequence,
        };

        let mut prev_hash = match (first_sequence, cached) {
            (1, _) => GENESIS,
            (_, Some(hash)) => hash,
            // A committed hash never changes, so it may be read outside the
            // insert; if the predecessor is missing the caller is out of date.
            _ => self
                .stored_hash(aggregate_type, aggregate_id, first_sequence - 1)
                .await?
                .ok_or_else(conflict)?,
        };
        let mut rows = Vec::with_capacity(events.len());
        for event in events {
            let row = chain_row(event, prev_hash)?;
            prev_hash = row.hash;
            rows.push(row);
        }
        let inserted = self
            .insert(Append {
                aggregate_type: aggregate_type.to_owned(),
                aggregate_id: aggregate_id.to_owned(),
                rows,
                snapshot,
            })
            .await;
        match inserted {
            Err(e) if e.is_unique_violation() => return Err(conflict()),
            other => other?,
        }
        let last_sequence = first_sequence + to_i64(events.len()) - 1;
        self.remember_head(key, last_sequence, prev_hash);
        self.commits.send_modify(|n| *n = n.wrapping_add(1));
        Ok(())
    }

    /// Inserts the rows of one append atomically: on SQLite through the
    /// group commit, on PostgreSQL (whose many connections commit side by
    /// side) as one multi-row `INSERT`, or one transaction when a snapshot
    /// rides along.
    async fn insert(&self, append: Append) -> Result<(), StoreError> {
        let pool = match self.db.writer() {
            PoolRef::Sqlite(_) => return self.group.submit(&self.db, append).await,
            PoolRef::Postgres(pool) => pool,
        };
        if append.is_one_statement() {
            let mut connection = pool.acquire().await?;
            return write_append::<sqlx::Postgres>(&mut *connection, &append).await;
        }
        let mut tx = pool.begin().await?;
        write_append::<sqlx::Postgres>(&mut *tx, &append).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The stored hash of one event, if it exists.
    async fn stored_hash(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        sequence: i64,
    ) -> Result<Option<Hash>, StoreError> {
        let stored: Option<Vec<u8>> = with_pool!(self.db.writer(), pool => {
            sqlx::query_scalar(
                "SELECT hash FROM events \
                 WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence = $3",
            )
            .bind(aggregate_type)
            .bind(aggregate_id)
            .bind(sequence)
            .fetch_optional(pool)
            .await?
        });
        Ok(stored.as_deref().and_then(hash_from_slice))
    }

    /// Every event of one stream, by sequence, after `after_sequence`.
    pub async fn load_stream(
        &self,
        aggregate_type: &str,
        aggregate_id: &str,
        after_sequence: i64,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM events \
             WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence > $3 ORDER BY sequence"
        );
        let rows: Vec<StoredEvent> = with_pool!(self.db.reader(), pool => {
            sqlx::query_as(&sql)
                .bind(aggregate_type)
                .bind(aggregate_id)
                .bind(after_sequence)
                .fetch_all(pool)
                .await?
        });
        if let Some((last, hash)) = rows
            .last()
            .and_then(|r| Some((r, hash_from_slice(&r.hash)?)))
        {
            let key = (aggregate_type.to_owned(), aggregate_id.to_owned());
            self.remember_head(key, last.sequence, hash);
        }
        Ok(rows)
    }

    /// Ids of `aggregate_type` streams with no event of `closing_types`
    /// (unfinished debates), oldest stream first.
    pub async fn open_streams(
        &self,
        aggregate_type: &str,
        closing_types: &[&str],
    ) -> Result<Vec<String>, StoreError> {
        let closing = closing_types
            .iter()
            .map(|t| format!("'{}'", t.replace('\'', "")))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT aggregate_id FROM events WHERE aggregate_type = $1 GROUP BY aggregate_id \
             HAVING SUM(CASE WHEN event_type IN ({closing}) THEN 1 ELSE 0 END) = 0 \
             ORDER BY MIN(position)"
        );
        Ok(with_pool!(self.db.reader(), pool => {
            sqlx::query_scalar(&sql).bind(aggregate_type).fetch_all(pool).await?
        }))
    }

    fn cached_head(&self, key: &StreamKey, sequence: i64) -> Option<Hash> {
        let heads = self.heads.lock().unwrap_or_else(PoisonError::into_inner);
        match heads.get(key) {
            Some((cached_sequence, hash)) if *cached_sequence == sequence => Some(*hash),
            _ => None,
        }
    }

    fn remember_head(&self, key: StreamKey, sequence: i64, hash: Hash) {
        let mut heads = self.heads.lock().unwrap_or_else(PoisonError::into_inner);
        if heads.len() >= HEAD_CACHE_LIMIT && !heads.contains_key(&key) {
            heads.clear();
        }
        let newer = heads.get(&key).is_none_or(|(known, _)| *known < sequence);
        if newer {
            heads.insert(key, (sequence, hash));
        }
    }
}

/// The events of one command for one stream, ready to insert.
pub(super) struct Append {
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub rows: Vec<Row>,
    pub snapshot: Option<(Value, i64)>,
}

impl std::fmt::Debug for Append {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Append")
            .field("aggregate_type", &self.aggregate_type)
            .field("aggregate_id", &self.aggregate_id)
            .field("rows", &self.rows.len())
            .finish_non_exhaustive()
    }
}

impl Append {
    /// Whether [`write_append`] runs a single statement (atomic by itself).
    pub(super) fn is_one_statement(&self) -> bool {
        self.rows.len() <= MAX_ROWS_PER_INSERT && self.snapshot.is_none()
    }
}

/// Writes the events of `append`, then its snapshot, on `connection`. More
/// than one statement is atomic only inside the caller's transaction or
/// savepoint ([`Append::is_one_statement`] tells).
pub(super) async fn write_append<DB>(
    connection: &mut DB::Connection,
    append: &Append,
) -> Result<(), StoreError>
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> &'q [u8]: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    i64: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    String: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let (kind, id) = (append.aggregate_type.as_str(), append.aggregate_id.as_str());
    for chunk in append.rows.chunks(MAX_ROWS_PER_INSERT) {
        let sql = insert_sql(chunk.len());
        let mut query = sqlx::query(&sql);
        for row in chunk {
            query = query
                .bind(row.event_id.as_str())
                .bind(kind)
                .bind(id)
                .bind(row.sequence)
                .bind(row.event_type.as_str())
                .bind(row.event_version.as_str())
                .bind(row.payload.as_str())
                .bind(row.metadata.as_str())
                .bind(&row.prev_hash[..])
                .bind(&row.hash[..]);
        }
        query.execute(&mut *connection).await?;
    }
    if let Some((aggregate, version)) = &append.snapshot {
        let last_sequence = append.rows.last().map_or(0, |r| r.sequence);
        sqlx::query(SNAPSHOT_UPSERT)
            .bind(kind)
            .bind(id)
            .bind(last_sequence)
            .bind(*version)
            .bind(canonical_text(aggregate)?)
            .execute(&mut *connection)
            .await?;
    }
    Ok(())
}

/// Upserts a stream's snapshot: `$1` type, `$2` id, `$3` last sequence,
/// `$4` snapshot version, `$5` canonical payload.
const SNAPSHOT_UPSERT: &str = "INSERT INTO snapshots (aggregate_type, aggregate_id, \
     last_sequence, snapshot_version, payload) VALUES ($1, $2, $3, $4, $5) \
     ON CONFLICT (aggregate_type, aggregate_id) DO UPDATE SET \
     last_sequence = excluded.last_sequence, \
     snapshot_version = excluded.snapshot_version, payload = excluded.payload";

/// A multi-row `INSERT` of `rows` events, ten parameters each.
fn insert_sql(rows: usize) -> String {
    let values: Vec<String> = (0..rows)
        .map(|row| {
            let params: Vec<String> = (1..=EVENT_PARAMS)
                .map(|column| format!("${}", row * EVENT_PARAMS + column))
                .collect();
            format!("({})", params.join(", "))
        })
        .collect();
    format!(
        "INSERT INTO events (event_id, aggregate_type, aggregate_id, sequence, event_type, \
         event_version, payload, metadata, prev_hash, hash) VALUES {}",
        values.join(", ")
    )
}

/// Stamps the store's metadata, canonicalises and hashes one event.
fn chain_row(event: &SerializedEvent, prev_hash: Hash) -> Result<Row, StoreError> {
    let mut metadata = match &event.metadata {
        Value::Object(map) => map.clone(),
        Value::Null => serde_json::Map::new(),
        other => serde_json::Map::from_iter([("value".to_owned(), other.clone())]),
    };
    let event_id = match metadata.get("event_id") {
        Some(Value::String(id)) => id.clone(),
        _ => Uuid::now_v7().to_string(),
    };
    metadata.insert("event_id".to_owned(), Value::String(event_id.clone()));
    metadata
        .entry("recorded_at")
        .or_insert_with(|| Value::String(Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true)));
    let payload = canonical_text(&event.payload)?;
    let metadata = canonical_text(&Value::Object(metadata))?;
    let sequence = to_i64(event.sequence);
    let fields = ChainedFields {
        aggregate_type: &event.aggregate_type,
        aggregate_id: &event.aggregate_id,
        sequence,
        event_type: &event.event_type,
        event_version: &event.event_version,
        payload: &payload,
        metadata: &metadata,
    };
    let hash = fields.hash(&prev_hash)?;
    Ok(Row {
        event_id,
        sequence,
        event_type: event.event_type.clone(),
        event_version: event.event_version.clone(),
        payload,
        metadata,
        prev_hash,
        hash,
    })
}

/// Sequences and counts fit an `i64` long before they could fill a disk.
fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
