//! The durable consumer that turns debate events into delivery jobs.
//!
//! Per batch, in one transaction with its checkpoint: it keeps what it needs
//! of each debate (owner, topic, verdict: `webhook_debates`), and for every
//! `debate.verdict`, `debate.completed` and `debate.failed` writes one job
//! per subscription of the debate's owner that asked for it. Sending is the
//! delivery worker's ([`super::worker`]), so a receiver that fails for a day
//! never holds this consumer back. Jobs are keyed by subscription and event
//! id, so an event handled twice (a crash before the checkpoint, a second
//! replica, a retried dead letter) makes one job. It fails only when the
//! store does (the bus resumes it from its checkpoint) or on an event it
//! cannot decode (it stops there).

use std::sync::Arc;

use agon_aggregates::debate::DebateEvent;
use agon_projections::{Cursor, EventRecord};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tokio::sync::Notify;

use super::payload::{self, Verdict};
use crate::bus::{Consumer, ConsumerError};
use crate::projection::{IdleCheckpoint, checkpoint_name};
use crate::store::db::with_pool;
use crate::store::{EventLog, StoreError};

/// The consumer's name (its checkpoint is `projection.webhooks`).
pub const NAME: &str = "webhooks";

/// A checkpoint that never moves back (two replicas may share it).
const CHECKPOINT_FORWARD: &str = "INSERT INTO checkpoints (consumer, txid, position, updated_at) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (consumer) DO UPDATE SET txid = excluded.txid, \
     position = excluded.position, updated_at = excluded.updated_at \
     WHERE (checkpoints.txid, checkpoints.position) < (excluded.txid, excluded.position)";

/// The debate events it reads.
const RELEVANT: [&str; 4] = [
    "DebateCreated",
    "ConsensusComputed",
    "DebateCompleted",
    "DebateFailed",
];

/// The delivery consumer; wakes the worker after each batch with jobs.
pub struct Dispatcher {
    log: EventLog,
    wake: Arc<Notify>,
    idle: IdleCheckpoint,
}

impl Dispatcher {
    pub fn new(log: EventLog, wake: Arc<Notify>) -> Self {
        Self {
            log,
            wake,
            idle: IdleCheckpoint::default(),
        }
    }

    /// Applies `events` (decoded) and, when given, saves the checkpoint, in
    /// one transaction. Returns how many jobs it wrote.
    async fn apply(
        &self,
        events: &[(&EventRecord, DebateEvent)],
        checkpoint: Option<Cursor>,
    ) -> Result<u64, StoreError> {
        let mut jobs = 0;
        with_pool!(self.log.db().writer(), pool => {
            // Jobs are not rebuilt from the log: this commit waits for the disk.
            let mut tx = pool.begin().await?;
            for (record, event) in events {
                let debate_id = record.aggregate_id.as_str();
                // (kind, when, body data) of the message this event makes.
                let message = match event {
                    DebateEvent::DebateCreated { topic, created_by, .. } => {
                        sqlx::query(
                            "INSERT INTO webhook_debates (debate_id, owner, topic, verdict) \
                             VALUES ($1, $2, $3, NULL) ON CONFLICT (debate_id) DO NOTHING",
                        )
                        .bind(debate_id)
                        .bind(created_by)
                        .bind(topic)
                        .execute(&mut *tx)
                        .await?;
                        None
                    }
                    other => {
                        let row: Option<(Option<String>, String, Option<String>)> =
                            sqlx::query_as(
                                "SELECT owner, topic, verdict FROM webhook_debates \
                                 WHERE debate_id = $1",
                            )
                            .bind(debate_id)
                            .fetch_optional(&mut *tx)
                            .await?;
                        // Unknown: a debate that ended before (handled twice).
                        let Some((owner, topic, stored)) = row else { continue };
                        let stored: Option<Verdict> =
                            stored.and_then(|v| serde_json::from_str(&v).ok());
                        let id = debate_id.to_owned();
                        let made = payload::message_of(other, id, topic, stored);
                        match other {
                            DebateEvent::ConsensusComputed { result, .. } => {
                                let verdict = serde_json::to_string(&Verdict::from(result))
                                    .unwrap_or_default();
                                sqlx::query(
                                    "UPDATE webhook_debates SET verdict = $2 WHERE debate_id = $1",
                                )
                                .bind(debate_id)
                                .bind(verdict)
                                .execute(&mut *tx)
                                .await?;
                            }
                            _ => {
                                sqlx::query("DELETE FROM webhook_debates WHERE debate_id = $1")
                                    .bind(debate_id)
                                    .execute(&mut *tx)
                                    .await?;
                            }
                        }
                        owner.zip(made)
                    }
                };
                let Some((owner, (kind, at, body))) = message else { continue };
                let subscriptions: Vec<(String, String, String)> = sqlx::query_as(
                    "SELECT subscription_id, events, created_at FROM webhook_subscriptions \
                     WHERE owner = $1 AND (active = 1 OR disabled_reason = 'failing')",
                )
                .bind(&owner)
                .fetch_all(&mut *tx)
                .await?;
                let now = Utc::now().timestamp_millis();
                for (subscription_id, wanted, created_at) in subscriptions {
                    let wants = serde_json::from_str::<Vec<String>>(&wanted)
                        .is_ok_and(|list| list.iter().any(|e| e == kind));
                    // Events from before the subscription are not its business.
                    let newer = DateTime::parse_from_rfc3339(&created_at)
                        .is_ok_and(|created| at >= created);
                    if !wants || !newer {
                        continue;
                    }
                    jobs += sqlx::query(
                        "INSERT INTO webhook_deliveries (delivery_id, subscription_id, \
                         message_id, event_type, body, feed_txid, feed_position, status, \
                         attempts, failures, next_attempt_at, lease_until, created_at) \
                         VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', 0, 0, $8, 0, $8) \
                         ON CONFLICT (subscription_id, message_id) DO NOTHING",
                    )
                    .bind(uuid::Uuid::new_v4().to_string())
                    .bind(&subscription_id)
                    .bind(&record.event_id)
                    .bind(kind)
                    .bind(&body)
                    .bind(record.cursor.txid)
                    .bind(record.cursor.position)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                }
            }
            if let Some(cursor) = checkpoint {
                sqlx::query(CHECKPOINT_FORWARD)
                    .bind(checkpoint_name(NAME))
                    .bind(cursor.txid)
                    .bind(cursor.position)
                    .bind(crate::store::feed::now())
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
        });
        if jobs > 0 {
            self.wake.notify_one();
        }
        Ok(jobs)
    }
}

fn relevant(event: &EventRecord) -> bool {
    event.aggregate_type == agon_projections::debates::DEBATE_AGGREGATE
        && RELEVANT.contains(&event.event_type.as_str())
}

#[async_trait]
impl Consumer for Dispatcher {
    fn name(&self) -> &str {
        NAME
    }

    async fn checkpoint(&self) -> Result<Cursor, StoreError> {
        self.log.load_checkpoint(&checkpoint_name(NAME)).await
    }

    async fn handle(&self, batch: &[EventRecord]) -> Result<(), ConsumerError> {
        let Some(last) = batch.last() else {
            return Ok(());
        };
        let mut decoded = Vec::new();
        for record in batch.iter().filter(|e| relevant(e)) {
            match record.decode::<DebateEvent>() {
                Ok(event) => decoded.push((record, event)),
                Err(source) => {
                    // Everything before it is done; stop at it.
                    let done = batch
                        .iter()
                        .take_while(|e| e.cursor < record.cursor)
                        .last()
                        .map(|e| e.cursor);
                    self.apply(&decoded, done).await?;
                    return Err(ConsumerError::undecodable(record, source));
                }
            }
        }
        if decoded.is_empty() {
            if self.idle.due() {
                self.log
                    .save_checkpoint(&checkpoint_name(NAME), last.cursor)
                    .await?;
            }
            return Ok(());
        }
        self.apply(&decoded, Some(last.cursor)).await?;
        Ok(())
    }

    async fn pass(&self, event: &EventRecord) -> Result<(), StoreError> {
        self.apply(&[], Some(event.cursor)).await.map(|_| ())
    }

    async fn retry(&self, event: &EventRecord) -> Result<(), ConsumerError> {
        let decoded = event
            .decode::<DebateEvent>()
            .map_err(|e| ConsumerError::undecodable(event, e))?;
        self.apply(&[(event, decoded)], None).await?;
        Ok(())
    }
}
