//! Dead letters: events a consumer gave up on, kept so that it can move on
//! without losing them, listed for admins and handed over again on request.
//!
//! One row per consumer and event: a second failure of the same event
//! updates the row (its reason, its attempts) rather than adding one.

use agon_projections::{Cursor, EventRecord};
use serde::Serialize;

use super::db::with_pool;
use super::rows::{EVENT_COLUMNS, StoredEvent};
use super::{EventLog, StoreError, now};

/// One dead letter as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct DeadLetter {
    pub id: String,
    /// The consumer that gave up (its `Consumer::name`).
    pub consumer: String,
    pub event_id: String,
    pub txid: i64,
    pub position: i64,
    /// The last failure, as the consumer told it.
    pub reason: String,
    /// Deliveries tried so far, across retries.
    pub attempts: i64,
    /// When it last failed (RFC 3339, UTC).
    pub failed_at: String,
    /// Set while an admin's retry waits for the consumer to take it.
    pub retry_requested_at: Option<String>,
}

impl DeadLetter {
    pub fn cursor(&self) -> Cursor {
        Cursor {
            txid: self.txid,
            position: self.position,
        }
    }
}

const COLUMNS: &str =
    "id, consumer, event_id, txid, position, reason, attempts, failed_at, retry_requested_at";

impl EventLog {
    /// Records that `consumer` gave up on `event` after `attempts` tries.
    /// A failure of an event already dead-lettered adds its attempts to the
    /// row and ends any retry request.
    pub async fn dead_letter(
        &self,
        consumer: &str,
        event: &EventRecord,
        reason: &str,
        attempts: u32,
    ) -> Result<(), StoreError> {
        let id = uuid::Uuid::now_v7().to_string();
        with_pool!(self.db().writer(), pool => {
            sqlx::query(
                "INSERT INTO dead_letters (id, consumer, event_id, txid, position, reason, attempts, failed_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
                 ON CONFLICT (consumer, event_id) DO UPDATE SET reason = excluded.reason, \
                 attempts = dead_letters.attempts + excluded.attempts, failed_at = excluded.failed_at, \
                 retry_requested_at = NULL",
            )
            .bind(id)
            .bind(consumer)
            .bind(&event.event_id)
            .bind(event.cursor.txid)
            .bind(event.cursor.position)
            .bind(reason)
            .bind(i64::from(attempts))
            .bind(now())
            .execute(pool)
            .await?;
        });
        Ok(())
    }

    /// Every dead letter, oldest event first.
    pub async fn dead_letters(&self) -> Result<Vec<DeadLetter>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM dead_letters ORDER BY txid, position, consumer");
        Ok(with_pool!(self.db().reader(), pool => {
            sqlx::query_as::<_, DeadLetter>(&sql).fetch_all(pool).await?
        }))
    }

    /// Asks for dead letter `id` to be handed to its consumer again; `None`
    /// when there is no such dead letter.
    pub async fn request_dead_letter_retry(
        &self,
        id: &str,
    ) -> Result<Option<DeadLetter>, StoreError> {
        let sql = format!(
            "UPDATE dead_letters SET retry_requested_at = $2 WHERE id = $1 RETURNING {COLUMNS}"
        );
        Ok(with_pool!(self.db().writer(), pool => {
            sqlx::query_as::<_, DeadLetter>(&sql)
                .bind(id)
                .bind(now())
                .fetch_optional(pool)
                .await?
        }))
    }

    /// The dead letters of `consumer` waiting for a retry, each with its
    /// event, oldest event first.
    pub async fn dead_letters_to_retry(
        &self,
        consumer: &str,
    ) -> Result<Vec<(DeadLetter, EventRecord)>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM dead_letters WHERE consumer = $1 \
             AND retry_requested_at IS NOT NULL ORDER BY txid, position"
        );
        let letters: Vec<DeadLetter> = with_pool!(self.db().reader(), pool => {
            sqlx::query_as::<_, DeadLetter>(&sql).bind(consumer).fetch_all(pool).await?
        });
        let mut found = Vec::with_capacity(letters.len());
        for letter in letters {
            if let Some(event) = self.event_by_id(&letter.event_id).await? {
                found.push((letter, event));
            }
        }
        Ok(found)
    }

    /// Removes dead letter `id`: its event was handled after all.
    pub async fn resolve_dead_letter(&self, id: &str) -> Result<(), StoreError> {
        with_pool!(self.db().writer(), pool => {
            sqlx::query("DELETE FROM dead_letters WHERE id = $1")
                .bind(id)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// One committed event by its id.
    async fn event_by_id(&self, event_id: &str) -> Result<Option<EventRecord>, StoreError> {
        let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE event_id = $1");
        let row: Option<StoredEvent> = with_pool!(self.db().reader(), pool => {
            sqlx::query_as::<_, StoredEvent>(&sql).bind(event_id).fetch_optional(pool).await?
        });
        row.map(StoredEvent::into_record).transpose()
    }
}
