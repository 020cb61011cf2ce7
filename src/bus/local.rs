//! The embedded bus: an in-process broadcast of contiguous feed batches.
//!
//! The relay reads the feed and broadcasts each batch with the cursor it
//! starts after. A consumer applies a batch that continues from its own
//! checkpoint; when it has fallen behind (a lagged receiver, a start from an
//! old checkpoint) it catches up from the store, so nothing depends on the
//! broadcast keeping up.

use std::sync::Arc;
use std::time::Duration;

use agon_projections::{Cursor, EventRecord};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::{Consumer, after_checkpoint, pause, to_records};
use crate::store::{Backend, EventLog};

const PAGE: i64 = 1_000;
const BROADCAST_CAPACITY: usize = 1_024;
const RETRY_DELAY: Duration = Duration::from_millis(500);

/// A run of consecutive feed events: the first follows `from`.
#[derive(Debug, Clone)]
pub struct FeedBatch {
    pub from: Cursor,
    pub events: Arc<Vec<EventRecord>>,
}

/// The in-process bus.
#[derive(Debug, Clone)]
pub struct LocalBus {
    sender: broadcast::Sender<FeedBatch>,
    /// How often the relay looks for commits it was not told of (other replicas).
    poll_interval: Duration,
}

impl LocalBus {
    pub fn new(backend: Backend) -> Self {
        let poll_interval = match backend {
            Backend::Sqlite => Duration::from_secs(1),
            Backend::Postgres => Duration::from_millis(100),
        };
        Self {
            sender: broadcast::channel(BROADCAST_CAPACITY).0,
            poll_interval,
        }
    }

    pub(super) async fn run_relay(&self, log: EventLog, stop: CancellationToken) {
        let mut commits = log.subscribe_commits();
        let mut cursor = loop {
            match log.feed_head().await {
                Ok(head) => break head,
                Err(e) => {
                    tracing::warn!(error = %e, "relay cannot read the feed head; retrying");
                    if !pause(&stop, RETRY_DELAY).await {
                        return;
                    }
                }
            }
        };
        loop {
            match log.read_feed(cursor, PAGE).await.and_then(to_records) {
                Ok(events) if !events.is_empty() => {
                    let from = cursor;
                    cursor = events.last().map_or(cursor, |e| e.cursor);
                    // No receiver is fine: consumers catch up from the store.
                    let _ = self.sender.send(FeedBatch {
                        from,
                        events: Arc::new(events),
                    });
                    continue;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "relay cannot read the feed; retrying"),
            }
            tokio::select! {
                () = stop.cancelled() => return,
                _ = commits.changed() => {}
                () = tokio::time::sleep(self.poll_interval) => {}
            }
        }
    }

    pub(super) async fn run_consumer(
        &self,
        log: EventLog,
        consumer: Arc<dyn Consumer>,
        stop: CancellationToken,
    ) {
        while !stop.is_cancelled() {
            if let Err(e) = self.follow(&log, consumer.as_ref(), &stop).await {
                tracing::warn!(consumer = consumer.name(), error = %e, "consumer failed; resuming from its checkpoint");
                if !pause(&stop, RETRY_DELAY).await {
                    return;
                }
            }
        }
    }

    /// Catches up from the store, then follows the broadcast until it has a
    /// gap (then returns to catch up again) or `stop` fires.
    async fn follow(
        &self,
        log: &EventLog,
        consumer: &dyn Consumer,
        stop: &CancellationToken,
    ) -> Result<(), crate::store::StoreError> {
        // Subscribe before catching up, so no batch falls between the two.
        let mut receiver = self.sender.subscribe();
        let mut checkpoint = consumer.checkpoint().await?;
        loop {
            let events = to_records(log.read_feed(checkpoint, PAGE).await?)?;
            let Some(last) = events.last() else { break };
            let next = last.cursor;
            consumer.handle(&events).await?;
            checkpoint = next;
        }
        loop {
            let batch = tokio::select! {
                () = stop.cancelled() => return Ok(()),
                received = receiver.recv() => received,
            };
            match batch {
                Ok(batch) if batch.from <= checkpoint => {
                    let fresh = after_checkpoint(&batch.events, checkpoint);
                    if let Some(last) = fresh.last() {
                        let next = last.cursor;
                        consumer.handle(fresh).await?;
                        checkpoint = next;
                    }
                }
                // A gap, a lagged receiver or a closed channel: catch up from the store.
                Ok(_) | Err(_) => return Ok(()),
            }
        }
    }
}
