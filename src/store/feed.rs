//! The ordered feed of committed events, and consumers' checkpoints.
//!
//! Guarantee: reading repeatedly from the last returned cursor yields every
//! committed event exactly once, in an order that keeps each stream's
//! sequence order. On PostgreSQL an identity column alone cannot give this:
//! a transaction that took position 7 may commit after one that took 8, and a
//! reader that passed 8 would never see 7. So the feed orders by `txid`, the
//! writing transaction's id plus the database's order shift, and returns
//! only transactions older than the oldest one still in flight
//! (`pg_snapshot_xmin`, plus the same shift); every later commit lands
//! behind the cursor. A later event of a stream is written only after its
//! predecessor committed, so it always has the larger transaction id. SQLite
//! has a single writer, so position order is commit order.
//!
//! The shift (migration 0005) keeps the order across a move to another
//! cluster (`pg_dump`/`pg_restore`, a logical replica), whose transaction ids
//! start low again: it is 0 until a session finds the database in another
//! cluster with the stored order above its oldest running transaction, and is
//! then raised once so that new events sort after all stored ones. Each
//! connection settles it on its first event insert or feed read (the
//! `agon_event_order_shift()` in the column default and in [`PG_HORIZON`]),
//! so a restored database needs no step of its own, and stored rows, seals
//! and checkpoints keep their values.

use std::collections::HashMap;

use agon_projections::Cursor;
use chrono::{SecondsFormat, Utc};

use super::chain::{Hash, hash_from_slice};
use super::db::{Db, with_pool};
use super::rows::{EVENT_COLUMNS, StoredEvent};
use super::{EventLog, StoreError};

impl EventLog {
    /// Up to `limit` committed events after `after`, in feed order.
    pub async fn read_feed(
        &self,
        after: Cursor,
        limit: i64,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        self.read_feed_columns(EVENT_COLUMNS, after, limit).await
    }

    /// Cursors and hashes of up to `limit` feed events after `after`: what
    /// sealing needs, without reading payloads.
    pub async fn read_feed_hashes(
        &self,
        after: Cursor,
        limit: i64,
    ) -> Result<Vec<FeedHash>, StoreError> {
        self.read_feed_columns("txid, position, hash", after, limit)
            .await
    }

    async fn read_feed_columns<T>(
        &self,
        columns: &str,
        after: Cursor,
        limit: i64,
    ) -> Result<Vec<T>, StoreError>
    where
        T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
            + for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
            + Send
            + Unpin,
    {
        let rows = match self.db() {
            Db::Postgres(pool) => {
                let sql = format!(
                    "SELECT {columns} FROM events \
                     WHERE (txid, position) > ($1, $2) AND txid < {PG_HORIZON} \
                     ORDER BY txid, position LIMIT $3"
                );
                sqlx::query_as(&sql)
                    .bind(after.txid)
                    .bind(after.position)
                    .bind(limit)
                    .fetch_all(pool)
                    .await?
            }
            Db::Sqlite { reader, .. } => {
                let sql = format!(
                    "SELECT {columns} FROM events WHERE position > $1 ORDER BY position LIMIT $2"
                );
                sqlx::query_as(&sql)
                    .bind(after.position)
                    .bind(limit)
                    .fetch_all(reader)
                    .await?
            }
        };
        Ok(rows)
    }

    /// The cursor of the newest event the feed returns now (the start when empty).
    pub async fn feed_head(&self) -> Result<Cursor, StoreError> {
        let row: Option<(i64, i64)> = match self.db() {
            Db::Postgres(pool) => {
                sqlx::query_as(&format!(
                    "SELECT txid, position FROM events WHERE txid < {PG_HORIZON} \
                     ORDER BY txid DESC, position DESC LIMIT 1"
                ))
                .fetch_optional(pool)
                .await?
            }
            Db::Sqlite { reader, .. } => {
                sqlx::query_as("SELECT txid, position FROM events ORDER BY position DESC LIMIT 1")
                    .fetch_optional(reader)
                    .await?
            }
        };
        Ok(row.map_or(Cursor::START, |(txid, position)| Cursor { txid, position }))
    }

    /// The feed cursor of the event at log `position` (a resume point a
    /// client holds), `None` when no event has it.
    pub async fn cursor_at(&self, position: i64) -> Result<Option<Cursor>, StoreError> {
        let row: Option<(i64, i64)> = with_pool!(self.db().reader(), pool => {
            sqlx::query_as("SELECT txid, position FROM events WHERE position = $1")
                .bind(position)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.map(|(txid, position)| Cursor { txid, position }))
    }

    /// The last cursor `consumer` finished, or the start.
    pub async fn load_checkpoint(&self, consumer: &str) -> Result<Cursor, StoreError> {
        let row: Option<(i64, i64)> = with_pool!(self.db().reader(), pool => {
            sqlx::query_as("SELECT txid, position FROM checkpoints WHERE consumer = $1")
                .bind(consumer)
                .fetch_optional(pool)
                .await?
        });
        Ok(row.map_or(Cursor::START, |(txid, position)| Cursor { txid, position }))
    }

    /// Every consumer's last finished cursor, by name, in one read (a
    /// consumer missing from it is at the start).
    pub async fn load_checkpoints(&self) -> Result<HashMap<String, Cursor>, StoreError> {
        let rows: Vec<(String, i64, i64)> = with_pool!(self.db().reader(), pool => {
            sqlx::query_as("SELECT consumer, txid, position FROM checkpoints")
                .fetch_all(pool)
                .await?
        });
        Ok(rows
            .into_iter()
            .map(|(consumer, txid, position)| (consumer, Cursor { txid, position }))
            .collect())
    }

    /// Records that `consumer` has handled everything up to `cursor`.
    pub async fn save_checkpoint(&self, consumer: &str, cursor: Cursor) -> Result<(), StoreError> {
        with_pool!(self.db().writer(), pool => {
            sqlx::query(&checkpoint_upsert(1))
                .bind(consumer)
                .bind(cursor.txid)
                .bind(cursor.position)
                .bind(now())
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Forgets `consumer`'s checkpoint, so it starts again from the first event.
    pub async fn reset_checkpoint(&self, consumer: &str) -> Result<(), StoreError> {
        with_pool!(self.db().writer(), pool => {
            sqlx::query("DELETE FROM checkpoints WHERE consumer = $1")
                .bind(consumer)
                .execute(pool)
                .await?;
        });
        Ok(())
    }
}

/// The feed's horizon on PostgreSQL: the order the oldest transaction still
/// in flight writes at, below which nothing can commit any more. A scalar
/// subquery, so it is computed once per statement, from the statement's own
/// snapshot, and bounds the index scan.
const PG_HORIZON: &str = "(SELECT agon_event_order_shift() \
     + pg_snapshot_xmin(pg_current_snapshot())::text::bigint)";

/// Upserts `rows` checkpoint rows, each `consumer, txid, position, updated_at`.
pub(crate) fn checkpoint_upsert(rows: usize) -> String {
    format!(
        "INSERT INTO checkpoints (consumer, txid, position, updated_at) VALUES {} \
         ON CONFLICT (consumer) DO UPDATE SET txid = excluded.txid, position = excluded.position, \
         updated_at = excluded.updated_at",
        value_rows(rows, 4)
    )
}

/// `($1, $2), ($3, $4)`: the `VALUES` of a multi-row statement, `rows` rows
/// of `width` parameters each.
pub(crate) fn value_rows(rows: usize, width: usize) -> String {
    (0..rows)
        .map(|row| {
            let params: Vec<String> = (1..=width)
                .map(|i| format!("${}", row * width + i))
                .collect();
            format!("({})", params.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A feed event's place and hash.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct FeedHash {
    pub txid: i64,
    pub position: i64,
    pub hash: Vec<u8>,
}

impl FeedHash {
    pub fn cursor(&self) -> Cursor {
        Cursor {
            txid: self.txid,
            position: self.position,
        }
    }

    pub fn stored_hash(&self) -> Result<Hash, StoreError> {
        hash_from_slice(&self.hash).ok_or(StoreError::Malformed {
            position: self.position,
            what: "hash is not 32 bytes",
        })
    }
}

pub(crate) fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true)
}
