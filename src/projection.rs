//! Runs the pure projections of `agon-projections` against the database.
//!
//! The read models run as one group (`group.rs`): per batch, one
//! transaction in which each read model locks and loads what the batch
//! touches, skips every event whose stream already reached that sequence
//! (the guard, keyed by stream and sequence, makes re-delivery harmless),
//! folds the rest in and saves its rows and its own checkpoint. Several
//! replicas may run the same projections; the row locks make them take
//! turns and the guards make the loser's batch a no-op.
//!
//! An event a read model cannot decode is never skipped: the batch is
//! committed up to the event before it, and that read model goes on alone
//! and stops there (the bus reports the stall, [`ConsumerError::Undecodable`])
//! until a fixed build or `agon replay` gets past it.

use std::marker::PhantomData;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agon_projections::{Cursor, DecodeError, EventRecord, Projection};
use async_trait::async_trait;

mod documents;
pub mod group;
mod guards;
pub mod reads;
pub mod registry;
pub mod replay;
mod rows;
mod tables;
pub use documents::{DocumentRunner, Documents, ListFilter};
pub(crate) use documents::{count_sql, page_sql, wait_until};
pub use group::{Detach, Member, READ_MODELS, ReadModels};
pub use registry::{REGISTRY, reset_changed};
pub use tables::TableRunner;

use crate::bus::{Consumer, ConsumerError};
use crate::store::db::{Backend, Tx, with_pool, with_tx};
use crate::store::{EventLog, StoreError};

/// How often a projection that sees only events it ignores saves its checkpoint.
const IDLE_CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Batches with nothing for a projection skip its writes; its checkpoint
/// is saved at most once per [`IDLE_CHECKPOINT_EVERY`] (one that lags only
/// means re-reading ignored events after a restart). This keeps the
/// embedded store's single writer for work that changes something.
#[derive(Debug, Default)]
pub struct IdleCheckpoint {
    last_saved: Mutex<Option<Instant>>,
}

impl IdleCheckpoint {
    /// Whether the checkpoint is due; a yes counts as saved now.
    pub(crate) fn due(&self) -> bool {
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
    }
}

/// The first event of a batch a projection cannot decode: its index and why.
pub type Undecodable = (usize, DecodeError);

/// The bus side every projection runner shares when it runs alone: its
/// checkpoint is named after it, a batch commits up to the first event it
/// cannot decode, and it never dead-letters (a read model that skipped an
/// event would be wrong for good).
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
                $crate::projection::group::commit_alone(&self.log, self, batch).await
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
impl<P: Projection> Member for ProjectionRunner<P> {
    fn relevant(&self, event: &EventRecord) -> bool {
        P::relevant(event)
    }

    fn idle(&self) -> &IdleCheckpoint {
        &self.idle
    }

    async fn fold(
        &self,
        tx: &mut Tx,
        batch: &[EventRecord],
    ) -> Result<Option<Undecodable>, StoreError> {
        let lock_sql = match tx.backend() {
            Backend::Postgres => {
                "SELECT view FROM projection_views WHERE projection = $1 FOR UPDATE"
            }
            Backend::Sqlite => "SELECT view FROM projection_views WHERE projection = $1",
        };
        with_tx!(tx, tx => {
            let stored: Option<String> =
                sqlx::query_scalar(lock_sql).bind(P::NAME).fetch_optional(&mut **tx).await?;
            let text = match stored {
                Some(text) => text,
                None => {
                    // The first batch creates the row, then locks it like every later one.
                    sqlx::query("INSERT INTO projection_views (projection, view) VALUES ($1, $2) ON CONFLICT (projection) DO NOTHING")
                        .bind(P::NAME)
                        .bind(serde_json::to_string(&P::View::default())?)
                        .execute(&mut **tx)
                        .await?;
                    sqlx::query_scalar(lock_sql).bind(P::NAME).fetch_one(&mut **tx).await?
                }
            };
            let mut view: P::View = serde_json::from_str(&text)?;
            let events: Vec<&EventRecord> = batch.iter().collect();
            let fresh = guards::fresh_events(tx, P::NAME, &events).await?;
            for (at, (event, fresh)) in batch.iter().zip(fresh).enumerate() {
                if fresh && let Err(error) = P::apply(&mut view, event) {
                    return Ok(Some((at, error)));
                }
            }
            sqlx::query("UPDATE projection_views SET view = $2 WHERE projection = $1")
                .bind(P::NAME)
                .bind(serde_json::to_string(&view)?)
                .execute(&mut **tx)
                .await?;
        });
        Ok(None)
    }
}

/// The read models of the process as one consumer; `detach` runs one that
/// leaves the group (it met an event it cannot decode).
pub fn read_models(log: &EventLog, detach: Detach) -> Arc<dyn Consumer> {
    let members = REGISTRY.iter().map(|p| (p.runner)(log)).collect();
    Arc::new(ReadModels::new(log.clone(), members, detach))
}

/// Drops `name`'s read model, guards and checkpoint and rebuilds it from the whole log.
/// Returns the number of events replayed; `None` for an unknown name.
pub async fn rebuild(log: &EventLog, name: &str) -> Result<Option<u64>, ConsumerError> {
    let Some(projection) = registry::find(name) else {
        return Ok(None);
    };
    registry::clear(log, projection, None).await?;
    let runner = (projection.runner)(log);
    rebuild_one(log, runner).await.map(Some)
}

/// Drops every read model and rebuilds them all from one pass over the
/// log (a restored store's replay: each event is read and decoded once,
/// not once per read model). Returns the number of events replayed.
pub async fn rebuild_all(log: &EventLog) -> Result<u64, ConsumerError> {
    let mut runners = Vec::with_capacity(REGISTRY.len());
    for projection in REGISTRY.iter() {
        registry::clear(log, projection, None).await?;
        runners.push((projection.runner)(log));
    }
    replay_into(log, &runners).await
}

/// Replays the whole log into `runner` (emptied first); stops at an event
/// it cannot decode, as the running service would.
async fn rebuild_one(log: &EventLog, runner: Arc<dyn Member>) -> Result<u64, ConsumerError> {
    replay_into(log, &[runner]).await
}

/// Feeds the whole log to each of `runners`, page by page.
async fn replay_into(log: &EventLog, runners: &[Arc<dyn Member>]) -> Result<u64, ConsumerError> {
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
        for runner in runners {
            runner.handle(&records).await?;
        }
    }
    Ok(replayed)
}
