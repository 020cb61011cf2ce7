//! The event bus: carries committed events from the relay to every consumer.
//!
//! Guarantees, on both back ends: each consumer sees every committed event at
//! least once, in feed order (so each stream in sequence order), resuming
//! after a restart from its own durable checkpoint. Duplicates are possible
//! (a crash between handling and checkpointing, a JetStream redelivery);
//! consumers skip anything at or before their checkpoint and projections also
//! guard by stream and sequence. What happens when a consumer fails is the
//! contract's [`ConsumerError`] and `delivery.rs`.

pub mod delivery;
pub mod ephemeral;
pub mod local;
pub mod nats;

use std::sync::Arc;

use agon_projections::{Cursor, EventRecord};
use async_trait::async_trait;
use thiserror::Error;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::store::{EventLog, StoreError};

pub use delivery::{BoxError, ConsumerError, Delivery, RetryPolicy, Stall};
pub use ephemeral::Ephemeral;
pub use local::LocalBus;
pub use nats::{Identity, NatsBus};

/// The first look again after a local commit the feed did not show yet: on
/// PostgreSQL a read hides commits newer than the oldest transaction still
/// open, which is usually another writer finishing within a millisecond or
/// two. Doubled on each empty look, up to the idle poll.
const EAGER_POLL: std::time::Duration = std::time::Duration::from_millis(1);

#[derive(Debug, Error)]
pub enum BusError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Boxed: it is large, and rare.
    #[error(transparent)]
    Consumer(Box<ConsumerError>),
    #[error("NATS: {0}")]
    Nats(String),
    #[error("event message is not a valid event record: {0}")]
    BadMessage(#[from] serde_json::Error),
    #[error("{what} {value:?} is not 1 to 32 of A-Z, a-z, 0-9, _ and -")]
    BadName { what: &'static str, value: String },
}

impl From<ConsumerError> for BusError {
    fn from(error: ConsumerError) -> Self {
        BusError::Consumer(Box::new(error))
    }
}

/// Something that reacts to committed events: a projection, a reactor, a pusher.
#[async_trait]
pub trait Consumer: Send + Sync + 'static {
    /// Unique and stable: it names the checkpoint and the durable subscription.
    fn name(&self) -> &str;

    /// The cursor of the last event whose effects are durable.
    async fn checkpoint(&self) -> Result<Cursor, StoreError>;

    /// Handles a batch of events in feed order, each after the checkpoint, and
    /// makes their effects and the new checkpoint durable before returning.
    /// On an error naming an event, the events before it are done; the
    /// variant says what the bus does with the rest ([`ConsumerError`]).
    async fn handle(&self, batch: &[EventRecord]) -> Result<(), ConsumerError>;

    /// Moves the checkpoint past `event`, which the bus dead-lettered after
    /// the consumer gave up on it.
    async fn pass(&self, event: &EventRecord) -> Result<(), StoreError>;

    /// Handles `event` again, out of feed order: a dead letter an admin
    /// retries. It must not move the checkpoint (later events are done).
    async fn retry(&self, event: &EventRecord) -> Result<(), ConsumerError>;
}

/// The bus of the chosen back end.
#[derive(Debug, Clone)]
pub enum Bus {
    Local(LocalBus),
    /// Boxed: the JetStream context is large and buses are cloned often.
    Nats(Box<NatsBus>),
}

impl Bus {
    /// Moves committed events from the log onto the bus until `stop`.
    pub async fn run_relay(&self, log: EventLog, stop: CancellationToken) {
        match self {
            Bus::Local(bus) => bus.run_relay(log, stop).await,
            Bus::Nats(bus) => bus.run_relay(log, stop).await,
        }
    }

    /// Feeds `consumer` from its checkpoint on, until `stop`.
    pub async fn run_consumer(
        &self,
        log: EventLog,
        consumer: Arc<dyn Consumer>,
        stop: CancellationToken,
    ) {
        match self {
            Bus::Local(bus) => bus.run_consumer(log, consumer, stop).await,
            Bus::Nats(bus) => bus.run_consumer(log, consumer, stop).await,
        }
    }

    /// Runs the relay in a task of its own until `stop`.
    pub fn spawn_relay(&self, log: &EventLog, stop: &CancellationToken) -> JoinHandle<()> {
        let (bus, log, stop) = (self.clone(), log.clone(), stop.clone());
        crate::store::worker::spawn_bound(async move { bus.run_relay(log, stop).await })
    }

    /// Runs `consumer` in a task of its own until `stop`.
    pub fn spawn_consumer(
        &self,
        log: &EventLog,
        consumer: Arc<dyn Consumer>,
        stop: &CancellationToken,
    ) -> JoinHandle<()> {
        let (bus, log, stop) = (self.clone(), log.clone(), stop.clone());
        crate::store::worker::spawn_bound(
            async move { bus.run_consumer(log, consumer, stop).await },
        )
    }

    pub fn name(&self) -> &'static str {
        match self {
            Bus::Local(_) => "in-process",
            Bus::Nats(_) => "nats-jetstream",
        }
    }

    /// Failure handling of this bus's consumers: stalls, dead-letter retries.
    pub fn delivery(&self) -> &Delivery {
        match self {
            Bus::Local(bus) => &bus.delivery,
            Bus::Nats(bus) => &bus.delivery,
        }
    }
}

/// Tells consumers that the database came back after an outage, so they
/// start again from their stored checkpoints rather than from the cursor
/// they hold in memory.
///
/// Read models commit without waiting for the disk (`synchronous_commit =
/// off`), so a database server that crashed can come back without a
/// read-model commit the consumer already counted as done; the log itself
/// is flushed. Re-reading from the stored checkpoint redoes exactly what
/// was lost, and the stream guards make the rest no-ops.
#[derive(Debug, Clone)]
pub(crate) struct Resync(Arc<tokio::sync::watch::Sender<u64>>);

impl Default for Resync {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::channel(0).0))
    }
}

impl Resync {
    /// Called by the relay when it reads the store again after failing to.
    pub(crate) fn database_back(&self) {
        tracing::info!("database reachable again; consumers resume from their checkpoints");
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that changes at the next [`Resync::database_back`].
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.subscribe()
    }
}

/// Events of `batch` that lie after `checkpoint`.
pub(crate) fn after_checkpoint(batch: &[EventRecord], checkpoint: Cursor) -> &[EventRecord] {
    let start = batch.partition_point(|event| event.cursor <= checkpoint);
    &batch[start..]
}

/// A store page turned into records.
pub(crate) fn to_records(
    page: Vec<crate::store::StoredEvent>,
) -> Result<Vec<EventRecord>, StoreError> {
    page.into_iter()
        .map(crate::store::StoredEvent::into_record)
        .collect()
}

/// Waits `delay` unless `stop` fires first; false when stopped.
pub(crate) async fn pause(stop: &CancellationToken, delay: std::time::Duration) -> bool {
    tokio::select! {
        () = stop.cancelled() => false,
        () = tokio::time::sleep(delay) => true,
    }
}
