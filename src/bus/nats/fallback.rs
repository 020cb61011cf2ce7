//! Keeps a consumer fed from the store's ordered feed while NATS is away,
//! so that read models (and read-your-writes) do not stall on the bus.
//!
//! The feed is what the relay publishes from, in the same order, so the
//! consumer sees the same sequence of events either way; the cursor of the
//! last event handled is the position in both. Going back to JetStream binds
//! the durable after the consumer's checkpoint (`consume.rs`), and the
//! relay's late resends of what the store already handed over lie at or
//! before it, so they are skipped: nothing is applied twice or out of order.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::super::{Consumer, ConsumerError, EAGER_POLL, to_records};
use super::{NatsBus, PAGE};
use crate::store::EventLog;

/// How often the feed is read while nothing of this process woke the
/// consumer (other replicas' commits).
const FEED_POLL: Duration = Duration::from_millis(100);
/// How often an idle consumer looks whether the server is back.
const CONNECTION_CHECK: Duration = Duration::from_millis(50);

impl NatsBus {
    /// Hands `consumer` the feed after its checkpoint from the store until
    /// NATS is connected again and at least `stay` has passed (after a
    /// JetStream error, so that a server refusing work is not hammered), or
    /// until `stop`.
    pub(super) async fn follow_store(
        &self,
        log: &EventLog,
        consumer: &dyn Consumer,
        stay: Duration,
        stop: &CancellationToken,
    ) -> Result<(), ConsumerError> {
        let started = Instant::now();
        // Subscribed before the first read, so that a commit landing between
        // a read and the wait still wakes the consumer.
        let mut commits = log.subscribe_commits();
        let mut resync = self.resync.subscribe();
        let mut retries = self.delivery.subscribe_retries();
        let mut cursor = consumer.checkpoint().await?;
        self.delivery.redeliver(log, consumer).await?;
        let mut wait = FEED_POLL;
        loop {
            let events = to_records(log.read_feed(cursor, PAGE).await?)?;
            if let Some(last) = events.last() {
                let next = last.cursor;
                self.delivery.deliver(log, consumer, &events, stop).await?;
                cursor = next;
                wait = FEED_POLL;
                continue;
            }
            if self.connected() && started.elapsed() >= stay {
                return Ok(());
            }
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                // Back to the stored checkpoint (the caller calls again).
                _ = resync.changed() => return Ok(()),
                _ = retries.changed() => self.delivery.redeliver(log, consumer).await?,
                _ = commits.changed() => wait = EAGER_POLL,
                () = tokio::time::sleep(wait) => wait = (wait * 2).min(FEED_POLL),
            }
        }
    }

    /// Returns once the client has lost its server; the consumer then
    /// follows the store instead.
    pub(super) async fn until_away(&self) {
        while self.connected() {
            tokio::time::sleep(CONNECTION_CHECK).await;
        }
    }
}
