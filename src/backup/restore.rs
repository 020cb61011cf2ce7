//! Restoring a backup: its rows into an empty store with every position,
//! order, hash and seal as copied, then every read model rebuilt from them.
//! Also the scratch stores that verification and drills restore into.

use std::path::{Path, PathBuf};

use sqlx::QueryBuilder;

use super::BackupError;
use super::archive::{EVENTS, EventLine, KeyLine, LineReader, SEALS, SUBJECT_KEYS, SealLine};
use crate::projection;
use crate::store::db::with_pool;
use crate::store::{Backend, Db, EventLog};

/// What a restore loaded.
#[derive(Debug, Clone, Copy, Default)]
pub struct Loaded {
    pub events: u64,
    pub seals: u64,
    pub subject_keys: u64,
}

fn hex_field(text: &str, what: &str, line: u64) -> Result<Vec<u8>, BackupError> {
    hex::decode(text).map_err(|_| BackupError::Corrupt(format!("{what} of line {line} is not hex")))
}

const INSERT_EVENTS: &str = "INSERT INTO events (position, txid, event_id, aggregate_type, \
     aggregate_id, sequence, event_type, event_version, payload, metadata, prev_hash, hash)";

/// Loads the backup in `dir` into `db`, which must hold no events, in
/// statements of `batch` rows. On PostgreSQL the identity of `position`
/// continues after the restored rows, and the event order's shift
/// (migration 0005) puts every later event after them.
pub async fn load(db: &Db, dir: &Path, batch: usize) -> Result<Loaded, BackupError> {
    let existing: i64 = with_pool!(db.reader(), pool => {
        sqlx::query_scalar("SELECT COUNT(*) FROM events").fetch_one(pool).await?
    });
    if existing > 0 {
        return Err(BackupError::TargetNotEmpty);
    }
    let overriding = match db.backend() {
        Backend::Postgres => " OVERRIDING SYSTEM VALUE ",
        Backend::Sqlite => "",
    };
    let mut loaded = Loaded::default();
    let mut reader = LineReader::open(dir, EVENTS).await?;
    let mut rows: Vec<(EventLine, Vec<u8>, Vec<u8>)> = Vec::with_capacity(batch);
    loop {
        let next: Option<EventLine> = reader.next().await?;
        let done = next.is_none();
        if let Some(line) = next {
            let prev = hex_field(&line.prev_hash, "prev_hash", reader.line)?;
            let hash = hex_field(&line.hash, "hash", reader.line)?;
            rows.push((line, prev, hash));
        }
        if rows.len() >= batch || (done && !rows.is_empty()) {
            with_pool!(db.writer(), pool => {
                let mut query = QueryBuilder::new(INSERT_EVENTS);
                query.push(overriding);
                query.push_values(rows.drain(..), |mut b, (e, prev, hash)| {
                    b.push_bind(e.position)
                        .push_bind(e.txid)
                        .push_bind(e.event_id)
                        .push_bind(e.aggregate_type)
                        .push_bind(e.aggregate_id)
                        .push_bind(e.sequence)
                        .push_bind(e.event_type)
                        .push_bind(e.event_version)
                        .push_bind(e.payload)
                        .push_bind(e.metadata)
                        .push_bind(prev)
                        .push_bind(hash);
                    loaded.events += 1;
                });
                query.build().execute(pool).await?;
            });
        }
        if done {
            break;
        }
    }
    let mut reader = LineReader::open(dir, SEALS).await?;
    while let Some(seal) = reader.next::<SealLine>().await? {
        let hash = hex_field(&seal.seal_hash, "seal_hash", reader.line)?;
        let signature = hex_field(&seal.signature, "signature", reader.line)?;
        with_pool!(db.writer(), pool => {
            sqlx::query(
                "INSERT INTO seals (seal_number, body, seal_hash, signature, to_txid, to_position) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(seal.seal_number)
            .bind(seal.body)
            .bind(hash)
            .bind(signature)
            .bind(seal.to_txid)
            .bind(seal.to_position)
            .execute(pool)
            .await?;
        });
        loaded.seals += 1;
    }
    loaded.subject_keys = load_keys(db, dir).await?;
    if let Db::Postgres(pool) = db {
        sqlx::query(
            "SELECT setval(pg_get_serial_sequence('events', 'position'), \
             GREATEST((SELECT MAX(position) FROM events), 1))",
        )
        .execute(pool)
        .await?;
    }
    db.sync_log().await?;
    Ok(loaded)
}

/// Loads the backup's wrapped data keys (a backup made before keys were
/// backed up has none), except those of users the restored log erased: a
/// backup taken between an erasure and its key's deletion must not bring
/// the key back.
async fn load_keys(db: &Db, dir: &Path) -> Result<u64, BackupError> {
    if !tokio::fs::try_exists(dir.join(SUBJECT_KEYS)).await? {
        return Ok(0);
    }
    let mut loaded = 0;
    let mut reader = LineReader::open(dir, SUBJECT_KEYS).await?;
    while let Some(key) = reader.next::<KeyLine>().await? {
        with_pool!(db.writer(), pool => {
            sqlx::query(
                "INSERT INTO subject_keys (subject, wrapped_key, created_at) VALUES ($1, $2, $3)",
            )
            .bind(key.subject)
            .bind(key.wrapped_key)
            .bind(key.created_at)
            .execute(pool)
            .await?;
        });
        loaded += 1;
    }
    let erased: u64 = with_pool!(db.writer(), pool => {
        sqlx::query(
            "DELETE FROM subject_keys WHERE subject IN (SELECT aggregate_id FROM events \
             WHERE aggregate_type = 'account' AND event_type = 'Erased')",
        )
        .execute(pool)
        .await?
        .rows_affected()
    });
    Ok(loaded - erased)
}

/// Rebuilds every registered read model of `log` from its events, in one
/// pass; the number of events replayed.
pub async fn replay(log: &EventLog) -> Result<u64, BackupError> {
    projection::rebuild_all(log)
        .await
        .map_err(|e| BackupError::Replay(e.to_string()))
}

/// A throwaway store of the same back end as the live one: a SQLite file in
/// a directory of its own, or a PostgreSQL schema of its own in the live
/// database. [`Scratch::drop_store`] removes it.
pub struct Scratch {
    pub log: EventLog,
    place: Place,
}

enum Place {
    Dir(PathBuf),
    Schema { name: String, live: Db },
}

impl Scratch {
    /// A new empty store under `root` (SQLite) or beside `live` (PostgreSQL
    /// at `url`, the live database's address).
    pub async fn create(live: &Db, url: Option<&str>, root: &Path) -> Result<Self, BackupError> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        match (live, url) {
            (Db::Postgres(pool), Some(url)) => {
                let name = format!("agon_scratch_{id}");
                sqlx::query(&format!("CREATE SCHEMA {name}"))
                    .execute(pool)
                    .await?;
                let mut address = url::Url::parse(url)
                    .map_err(|e| BackupError::Scratch(format!("DATABASE_URL: {e}")))?;
                address
                    .query_pairs_mut()
                    .append_pair("options", &format!("-c search_path={name}"));
                let db = match Db::connect_postgres(address.as_str(), 4).await {
                    Ok(db) => db,
                    Err(e) => {
                        let _ = sqlx::query(&format!("DROP SCHEMA {name} CASCADE"))
                            .execute(pool)
                            .await;
                        return Err(e.into());
                    }
                };
                Ok(Self {
                    log: EventLog::new(db),
                    place: Place::Schema {
                        name,
                        live: live.clone(),
                    },
                })
            }
            _ => {
                let dir = root.join(".scratch").join(id);
                let db = Db::open_sqlite(&dir).await?;
                Ok(Self {
                    log: EventLog::new(db),
                    place: Place::Dir(dir),
                })
            }
        }
    }

    /// Closes and deletes the store.
    pub async fn drop_store(self) {
        self.log.db().close().await;
        match self.place {
            Place::Dir(dir) => {
                if let Err(e) = tokio::fs::remove_dir_all(&dir).await {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot remove a scratch store");
                }
            }
            Place::Schema { name, live } => {
                if let Db::Postgres(pool) = live
                    && let Err(e) = sqlx::query(&format!("DROP SCHEMA {name} CASCADE"))
                        .execute(&pool)
                        .await
                {
                    tracing::warn!(schema = name, error = %e, "cannot drop a scratch schema");
                }
            }
        }
    }
}
