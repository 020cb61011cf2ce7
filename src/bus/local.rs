//! The embedded bus: an in-process broadcast of contiguous feed batches.
//!
//! The relay reads the feed and broadcasts each batch with the cursor it
//! starts after. A consumer applies a batch that continues from its own
//! checkpoint; when it has fallen behind (a lagged receiver, a start from an
//! old checkpoint) it catches up from the store, so nothing depends on the
//! broadcast keeping up. After a database outage every consumer starts again
//! from its stored checkpoint ([`Resync`]). Failures are handled by
//! [`Delivery`]; dead letters an admin retries are handed over between batches.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use agon_projections::{Cursor, EventRecord};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::{
    Consumer, ConsumerError, Delivery, EAGER_POLL, Resync, RetryPolicy, after_checkpoint, pause,
    to_records,
};
use crate::store::{Backend, EventLog};

const PAGE: i64 = 1_000;
const BROADCAST_CAPACITY: usize = 1_024;
const RETRY_DELAY: Duration = Duration::from_millis(500);
/// At most this many events go to a consumer in one call when batches queue up.
const COALESCE_LIMIT: usize = 2_000;

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
    /// Sends consumers back to their stored checkpoints after a database outage.
    resync: Resync,
    pub(super) delivery: Delivery,
}

impl LocalBus {
    /// A bus retrying transient consumer failures by the default policy.
    pub fn new(backend: Backend) -> Self {
        Self::with_retry(backend, RetryPolicy::default())
    }

    pub fn with_retry(backend: Backend, retry: RetryPolicy) -> Self {
        let poll_interval = match backend {
            Backend::Sqlite => Duration::from_secs(1),
            Backend::Postgres => Duration::from_millis(100),
        };
        Self {
            sender: broadcast::channel(BROADCAST_CAPACITY).0,
            poll_interval,
            resync: Resync::default(),
            delivery: Delivery::new(retry),
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
        // Short right after a commit of ours that the feed does not show yet
        // (on PostgreSQL it waits for older transactions still in flight),
        // growing to the idle poll for other replicas' commits.
        let mut wait = self.poll_interval;
        let mut failing = false;
        loop {
            let read = log.read_feed(cursor, PAGE).await.and_then(to_records);
            if read.is_ok() && std::mem::take(&mut failing) {
                self.resync.database_back();
            }
            match read {
                Ok(events) if !events.is_empty() => {
                    wait = self.poll_interval;
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
                Err(e) => {
                    failing = true;
                    tracing::warn!(error = %e, "relay cannot read the feed; retrying");
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                _ = commits.changed() => wait = EAGER_POLL,
                () = tokio::time::sleep(wait) => wait = (wait * 2).min(self.poll_interval),
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
    ) -> Result<(), ConsumerError> {
        // Subscribe before catching up, so no batch falls between the two.
        let mut receiver = self.sender.subscribe();
        let mut resync = self.resync.subscribe();
        let mut retries = self.delivery.subscribe_retries();
        let mut checkpoint = consumer.checkpoint().await?;
        self.delivery.redeliver(log, consumer).await?;
        loop {
            let events = to_records(log.read_feed(checkpoint, PAGE).await?)?;
            let Some(last) = events.last() else { break };
            let next = last.cursor;
            self.delivery.deliver(log, consumer, &events, stop).await?;
            checkpoint = next;
        }
        loop {
            let batch = tokio::select! {
                () = stop.cancelled() => return Ok(()),
                _ = resync.changed() => return Ok(()),
                _ = retries.changed() => {
                    self.delivery.redeliver(log, consumer).await?;
                    continue;
                }
                received = receiver.recv() => received,
            };
            match batch {
                Ok(batch) if batch.from <= checkpoint => {
                    let mut fresh = Cow::Borrowed(after_checkpoint(&batch.events, checkpoint));
                    // Batches that queued up while the consumer was busy go
                    // in with this one: one transaction for all of them.
                    let gap =
                        !receiver.is_empty() && coalesce_queued(&mut receiver, fresh.to_mut());
                    if let Some(last) = fresh.last() {
                        let next = last.cursor;
                        self.delivery.deliver(log, consumer, &fresh, stop).await?;
                        checkpoint = next;
                    }
                    if gap {
                        return Ok(());
                    }
                }
                // A gap, a lagged receiver or a closed channel: catch up from the store.
                Ok(_) | Err(_) => return Ok(()),
            }
        }
    }
}

/// Appends to `events` every batch already waiting in `receiver` that
/// continues them, up to [`COALESCE_LIMIT`] events; true when the queue
/// showed a gap or a lag, so the caller must catch up from the store.
fn coalesce_queued(
    receiver: &mut broadcast::Receiver<FeedBatch>,
    events: &mut Vec<EventRecord>,
) -> bool {
    while events.len() < COALESCE_LIMIT {
        let tail = match events.last() {
            Some(last) => last.cursor,
            None => return false,
        };
        match receiver.try_recv() {
            Ok(batch) if batch.from <= tail => {
                events.extend_from_slice(after_checkpoint(&batch.events, tail));
            }
            Err(broadcast::error::TryRecvError::Empty) => return false,
            Ok(_) | Err(_) => return true,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn record(position: i64) -> EventRecord {
        EventRecord {
            cursor: Cursor { txid: 0, position },
            event_id: format!("e{position}"),
            aggregate_type: "tally".to_owned(),
            aggregate_id: "t".to_owned(),
            sequence: position,
            event_type: "Added".to_owned(),
            event_version: "1".to_owned(),
            payload: Value::Null,
            metadata: Value::Null,
            hash: String::new(),
        }
    }

    fn batch(from: i64, to: i64) -> FeedBatch {
        FeedBatch {
            from: Cursor {
                txid: 0,
                position: from,
            },
            events: Arc::new((from + 1..=to).map(record).collect()),
        }
    }

    fn positions(events: &[EventRecord]) -> Vec<i64> {
        events.iter().map(|e| e.cursor.position).collect()
    }

    #[test]
    fn queued_batches_that_continue_are_joined_and_overlaps_are_skipped() {
        let (sender, mut receiver) = broadcast::channel(16);
        sender.send(batch(2, 4)).unwrap();
        // Overlaps what the consumer already holds: only 5 is new.
        sender.send(batch(3, 5)).unwrap();
        let mut events = vec![record(1), record(2)];
        assert!(!coalesce_queued(&mut receiver, &mut events));
        assert_eq!(positions(&events), vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_gap_in_the_queue_sends_the_consumer_back_to_the_store() {
        let (sender, mut receiver) = broadcast::channel(16);
        sender.send(batch(1, 2)).unwrap();
        sender.send(batch(7, 8)).unwrap();
        let mut events = vec![record(1)];
        assert!(coalesce_queued(&mut receiver, &mut events));
        assert_eq!(positions(&events), vec![1, 2]);
    }

    #[test]
    fn a_lagged_receiver_sends_the_consumer_back_to_the_store() {
        let (sender, mut receiver) = broadcast::channel(2);
        for n in 0..4 {
            sender.send(batch(n, n + 1)).unwrap();
        }
        let mut events = vec![record(0)];
        assert!(coalesce_queued(&mut receiver, &mut events));
    }
}
