//! Runs the pure projections of `agon-projections` against the database.
//!
//! Per batch, in one transaction: lock and load the view, skip every event
//! whose stream already reached that sequence (the guard, keyed by stream and
//! sequence, makes re-delivery harmless), fold the rest in, save the view and
//! the checkpoint. Several replicas may run the same projection; the row lock
//! makes them take turns and the guard makes the loser's batch a no-op.
//!
//! An event a projection cannot decode is never skipped: the batch is
//! committed up to the event before it and the runner answers
//! [`ConsumerError::Undecodable`], so the projection stops there (the bus
//! reports the stall) until a fixed build or `agon replay` gets past it.

use std::marker::PhantomData;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agon_projections::{Cursor, DecodeError, EventRecord, Projection};
use async_trait::async_trait;

mod documents;
mod guards;
pub mod reads;
pub mod registry;
mod tables;
pub use documents::{DocumentRunner, Documents, ListFilter};
pub(crate) use documents::{count_sql, page_sql, wait_until};
pub use registry::{REGISTRY, reset_changed};
pub use tables::TableRunner;

use crate::bus::{Consumer, ConsumerError};
use crate::store::db::{PoolRef, rebuildable_commit_sql, with_pool};
use crate::store::{EventLog, StoreError};

/// How often a projection that sees only events it ignores saves its checkpoint.
const IDLE_CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Batches with nothing for a projection skip the database; their
/// checkpoint is saved at most once per [`IDLE_CHECKPOINT_EVERY`] (one that
/// lags only means re-reading ignored events after a restart). This keeps
/// the embedded store's single writer for work that changes something.
#[derive(Debug, Default)]
pub(crate) struct IdleCheckpoint {
    last_saved: Mutex<Option<Instant>>,
}

impl IdleCheckpoint {
    pub(crate) async fn pass(
        &self,
        log: &EventLog,
        name: &str,
        cursor: Cursor,
    ) -> Result<(), StoreError> {
        let due = {
            let mut last = self
                .last_saved
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match *last {
                Some(at) if at.elapsed() < IDLE_CHECKPOINT_EVERY => false,
                _ => {
                    *last = Some(Instant::now());
                    true
                }
            }
        };
        if due {
            log.save_checkpoint(&checkpoint_name(name), cursor).await?;
        }
        Ok(())
    }
}

/// The first event of a batch a projection cannot decode: its index and why.
pub(crate) type Undecodable = (usize, DecodeError);

/// One transaction of a projection runner over a batch.
#[async_trait]
pub(crate) trait Commit: Send + Sync {
    /// Commits the whole of `batch`, or nothing and the first event it
    /// cannot decode.
    async fn commit(&self, batch: &[EventRecord]) -> Result<Option<Undecodable>, StoreError>;
}

/// Commits `batch` up to the first event the runner cannot decode, and
/// names that event.
pub(crate) async fn commit_until_undecodable(
    runner: &dyn Commit,
    batch: &[EventRecord],
) -> Result<(), ConsumerError> {
    let mut end = batch.len();
    let mut first_undecodable = None;
    // Each round ends before the failing event; pure folds fail the same
    // way on the same events, so the last round commits.
    while let Some((at, error)) = runner.commit(&batch[..end]).await? {
        end = at;
        first_undecodable = Some((at, error));
    }
    match first_undecodable {
        Some((at, error)) => Err(ConsumerError::undecodable(&batch[at], error)),
        None => Ok(()),
    }
}

/// The bus side every projection runner shares: its checkpoint is named
/// after it, a batch commits up to the first event it cannot decode, and
/// it never dead-letters (a read model that skipped an event would be
/// wrong for good).
macro_rules! projection_consumer {
    ($runner:ident, $kind:path) => {
        #[async_trait::async_trait]
        impl<P: $kind> $crate::bus::Consumer for $runner<P> {
            fn name(&self) -> &str {
                P::NAME
            }

            async fn checkpoint(
                &self,
            ) -> Result<agon_projections::Cursor, $crate::store::StoreError> {
                let name = $crate::projection::checkpoint_name(P::NAME);
                self.log.load_checkpoint(&name).await
            }

            async fn handle(
                &self,
                batch: &[agon_projections::EventRecord],
            ) -> Result<(), $crate::bus::ConsumerError> {
                $crate::projection::commit_until_undecodable(self, batch).await
            }

            async fn pass(
                &self,
                event: &agon_projections::EventRecord,
            ) -> Result<(), $crate::store::StoreError> {
                let name = $crate::projection::checkpoint_name(P::NAME);
                self.log.save_checkpoint(&name, event.cursor).await
            }

            async fn retry(
                &self,
                _event: &agon_projections::EventRecord,
            ) -> Result<(), $crate::bus::ConsumerError> {
                Ok(())
            }
        }
    };
}
pub(crate) use projection_consumer;

/// A projection hooked to the store as a bus consumer.
pub struct ProjectionRunner<P: Projection> {
    log: EventLog,
    idle: IdleCheckpoint,
    _projection: PhantomData<P>,
}

impl<P: Projection> ProjectionRunner<P> {
    pub fn new(log: EventLog) -> Self {
        Self {
            log,
            idle: IdleCheckpoint::default(),
            _projection: PhantomData,
        }
    }

    /// The stored view, or the empty one before the first event.
    pub async fn view(&self) -> Result<P::View, StoreError> {
        load_view::<P>(&self.log).await
    }
}

/// The stored view of `P`.
pub async fn load_view<P: Projection>(log: &EventLog) -> Result<P::View, StoreError> {
    let text: Option<String> = with_pool!(log.db().reader(), pool => {
        sqlx::query_scalar("SELECT view FROM projection_views WHERE projection = $1")
            .bind(P::NAME)
            .fetch_optional(pool)
            .await?
    });
    Ok(match text {
        Some(text) => serde_json::from_str(&text)?,
        None => P::View::default(),
    })
}

/// The checkpoint a projection's runner keeps in the store.
pub fn checkpoint_name(projection: &str) -> String {
    format!("projection.{projection}")
}

projection_consumer!(ProjectionRunner, Projection);

#[async_trait]
impl<P: Projection> Commit for ProjectionRunner<P> {
    async fn commit(&self, batch: &[EventRecord]) -> Result<Option<Undecodable>, StoreError> {
        let Some(last) = batch.last() else {
            return Ok(None);
        };
        if !batch.iter().any(P::relevant) {
            self.idle.pass(&self.log, P::NAME, last.cursor).await?;
            return Ok(None);
        }
        let lock_sql = match self.log.db().writer() {
            PoolRef::Postgres(_) => {
                "SELECT view FROM projection_views WHERE projection = $1 FOR UPDATE"
            }
            PoolRef::Sqlite(_) => "SELECT view FROM projection_views WHERE projection = $1",
        };
        let relaxed = rebuildable_commit_sql(&self.log.db().writer());
        with_pool!(self.log.db().writer(), pool => {
            let mut tx = pool.begin().await?;
            if let Some(sql) = relaxed {
                sqlx::query(sql).execute(&mut *tx).await?;
            }
            let stored: Option<String> =
                sqlx::query_scalar(lock_sql).bind(P::NAME).fetch_optional(&mut *tx).await?;
            let text = match stored {
                Some(text) => text,
                None => {
                    // The first batch creates the row, then locks it like every later one.
                    sqlx::query("INSERT INTO projection_views (projection, view) VALUES ($1, $2) ON CONFLICT (projection) DO NOTHING")
                        .bind(P::NAME)
                        .bind(serde_json::to_string(&P::View::default())?)
                        .execute(&mut *tx)
                        .await?;
                    sqlx::query_scalar(lock_sql).bind(P::NAME).fetch_one(&mut *tx).await?
                }
            };
            let mut view: P::View = serde_json::from_str(&text)?;
            let events: Vec<&EventRecord> = batch.iter().collect();
            let fresh = guards::fresh_events(&mut tx, P::NAME, &events).await?;
            for (at, (event, fresh)) in batch.iter().zip(fresh).enumerate() {
                if fresh && let Err(error) = P::apply(&mut view, event) {
                    // Dropping the transaction rolls it back.
                    return Ok(Some((at, error)));
                }
            }
            sqlx::query("UPDATE projection_views SET view = $2 WHERE projection = $1")
                .bind(P::NAME)
                .bind(serde_json::to_string(&view)?)
                .execute(&mut *tx)
                .await?;
            guards::save_checkpoint(&mut tx, P::NAME, last.cursor).await?;
            tx.commit().await?;
            self.log.read_models_moved();
        });
        Ok(None)
    }
}

/// Every projection runner the service starts.
pub fn runners(log: &EventLog) -> Vec<Arc<dyn Consumer>> {
    REGISTRY.iter().map(|p| (p.runner)(log)).collect()
}

/// Drops `name`'s read model, guards and checkpoint and rebuilds it from the whole log.
/// Returns the number of events replayed; `None` for an unknown name.
pub async fn rebuild(log: &EventLog, name: &str) -> Result<Option<u64>, ConsumerError> {
    let Some(projection) = registry::find(name) else {
        return Ok(None);
    };
    registry::clear(log, projection, None).await?;
    let runner = (projection.runner)(log);
    rebuild_one(log, runner.as_ref()).await.map(Some)
}

/// Replays the whole log into `runner` (emptied first); stops at an event
/// it cannot decode, as the running service would.
async fn rebuild_one(log: &EventLog, runner: &dyn Consumer) -> Result<u64, ConsumerError> {
    let mut cursor = Cursor::START;
    let mut replayed = 0u64;
    loop {
        let page = log.read_feed(cursor, 1_000).await?;
        let Some(last) = page.last() else { break };
        cursor = last.cursor();
        replayed += page.len() as u64;
        let records = page
            .into_iter()
            .map(crate::store::StoredEvent::into_record)
            .collect::<Result<Vec<_>, _>>()?;
        runner.handle(&records).await?;
    }
    Ok(replayed)
}
