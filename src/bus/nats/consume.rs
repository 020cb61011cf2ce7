//! The JetStream side of a consumer: its durable, bound at the consumer's
//! checkpoint, and the pull loop that hands it batches.
//!
//! A durable is named by deployment, consumer and replica, so a restart
//! finds the one it left (the count of consumers on the server stays
//! constant) and positions it just after the consumer's database checkpoint
//! (the first request after a restart does not wait behind a re-read of the
//! whole stream).

use agon_projections::{Cursor, EventRecord};
use async_nats::jetstream::consumer::{self, PullConsumer};
use async_nats::jetstream::context::ConsumerInfoErrorKind;
use async_nats::jetstream::stream::{self, RawMessageErrorKind};
use futures::{FutureExt, StreamExt};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::super::{BusError, Consumer, after_checkpoint};
use super::{ABANDONED_CONSUMER_TTL, BATCH, NatsBus, nats_error};
use crate::store::EventLog;

/// The one field of a message body that places it in the feed.
#[derive(Deserialize)]
struct Placed {
    cursor: Cursor,
}

impl NatsBus {
    /// Binds `consumer`'s durable and hands it batches until `interrupt`
    /// (the service stops, or the server went away). A batch being handled
    /// is finished first: `interrupt` is only heeded while waiting on NATS.
    pub(super) async fn consume(
        &self,
        log: &EventLog,
        consumer: &dyn Consumer,
        interrupt: &CancellationToken,
    ) -> Result<(), BusError> {
        // Read before binding: the durable starts after it, so nothing the
        // consumer has not handled can lie before the durable's start.
        let mut checkpoint = consumer.checkpoint().await?;
        let subscribe = async {
            let stream = self.stream().await?;
            let pull = self.bind(&stream, consumer.name(), checkpoint).await?;
            // A continuous pull: each message is handed on as soon as it
            // arrives, together with whatever else has already arrived (up
            // to a batch), so consumers lag by milliseconds rather than a
            // fetch's expiry.
            pull.stream()
                .max_messages_per_batch(BATCH)
                .messages()
                .await
                .map_err(nats_error)
        };
        let mut messages = tokio::select! {
            () = interrupt.cancelled() => return Ok(()),
            messages = subscribe => messages?,
        };
        let mut retries = self.delivery.subscribe_retries();
        self.delivery.redeliver(log, consumer).await?;
        loop {
            let first = tokio::select! {
                () = interrupt.cancelled() => break,
                _ = retries.changed() => {
                    self.delivery.redeliver(log, consumer).await?;
                    continue;
                }
                first = messages.next() => first,
            };
            let Some(first) = first else { break };
            let mut received = vec![first.map_err(nats_error)?];
            while received.len() < BATCH {
                match messages.next().now_or_never() {
                    Some(Some(message)) => received.push(message.map_err(nats_error)?),
                    _ => break,
                }
            }
            let mut events = Vec::with_capacity(received.len());
            for message in &received {
                // Never applied: its cursor belongs to another log, and
                // taking it could move the checkpoint past our own events.
                if !self.identity.owns(message.headers.as_ref()) {
                    tracing::warn!(
                        consumer = consumer.name(),
                        subject = %message.subject,
                        "skipping a message from another deployment"
                    );
                    continue;
                }
                events.push(serde_json::from_slice::<EventRecord>(&message.payload)?);
            }
            // JetStream order is the relay's feed order; anything at or before
            // the checkpoint is a redelivery of work already done.
            events.sort_by_key(|e| e.cursor);
            let fresh = after_checkpoint(&events, checkpoint);
            if let Some(last) = fresh.last() {
                let next = last.cursor;
                self.delivery
                    .deliver(log, consumer, fresh, interrupt)
                    .await?;
                checkpoint = next;
            }
            // Acking the last message acks every one delivered before it.
            if let Some(last) = received.last() {
                last.ack().await.map_err(nats_error)?;
            }
        }
        Ok(())
    }

    /// The durable of `name` on this replica, delivering from the first
    /// message after `checkpoint`.
    ///
    /// A durable left by an earlier run is kept when its next delivery is
    /// exactly there and it holds no unacked deliveries. Otherwise it is
    /// replaced under the same name: one that is behind would re-read what
    /// the checkpoint covers, one that is ahead (a database restored from a
    /// backup, a projection's idle checkpoint) would skip what it does not,
    /// and unacked deliveries would come again only after their ack wait,
    /// behind newer messages, out of order.
    async fn bind(
        &self,
        stream: &stream::Stream,
        name: &str,
        checkpoint: Cursor,
    ) -> Result<PullConsumer, BusError> {
        let durable = self.identity.durable(name);
        let start = start_sequence(stream, checkpoint, &self.identity).await?;
        let wanted = consumer::pull::Config {
            durable_name: Some(durable.clone()),
            ack_policy: consumer::AckPolicy::All,
            deliver_policy: consumer::DeliverPolicy::ByStartSequence {
                start_sequence: start,
            },
            filter_subject: self.identity.subjects(),
            // NATS drops the durables of replicas that went away.
            inactive_threshold: ABANDONED_CONSUMER_TTL,
            ..Default::default()
        };
        match stream.consumer_info(&durable).await {
            Ok(info) => {
                let config = &info.config;
                let resumes_at_start = info.delivered.stream_sequence.saturating_add(1) == start
                    && info.num_ack_pending == 0
                    && config.ack_policy == wanted.ack_policy
                    && config.filter_subject == wanted.filter_subject
                    && config.inactive_threshold == wanted.inactive_threshold;
                if resumes_at_start {
                    return stream.get_consumer(&durable).await.map_err(nats_error);
                }
                stream.delete_consumer(&durable).await.map_err(nats_error)?;
            }
            Err(e) if e.kind() == ConsumerInfoErrorKind::NotFound => {}
            Err(e) => return Err(nats_error(e)),
        }
        stream.create_consumer(wanted).await.map_err(nats_error)
    }
}

/// The stream sequence of the first message after `checkpoint`: a binary
/// search, since the relay publishes in feed order (a resend is dropped by
/// the duplicate window, so each event is stored once, in order). Where a
/// message cannot be read or placed, it starts at the lowest sequence not
/// known to be covered: re-reading is harmless, skipping is not.
async fn start_sequence(
    stream: &stream::Stream,
    checkpoint: Cursor,
    identity: &super::Identity,
) -> Result<u64, BusError> {
    let state = &stream.cached_info().state;
    let (first, last) = (state.first_sequence.max(1), state.last_sequence);
    if state.messages == 0 || last < first {
        return Ok(last.saturating_add(1));
    }
    if checkpoint == Cursor::START {
        return Ok(first);
    }
    // Every sequence below `low` is covered by the checkpoint; every one
    // from `high` on is not.
    let (mut low, mut high) = (first, last + 1);
    while low < high {
        let middle = low + (high - low) / 2;
        let placed = match stream.get_raw_message(middle).await {
            Ok(message) if identity.owns(Some(&message.headers)) => {
                serde_json::from_slice::<Placed>(&message.payload)
                    .ok()
                    .map(|p| p.cursor)
            }
            Ok(_) => None,
            Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => None,
            Err(e) => return Err(nats_error(e)),
        };
        match placed {
            Some(cursor) if cursor <= checkpoint => low = middle + 1,
            Some(_) => high = middle,
            None => return Ok(low),
        }
    }
    Ok(low)
}
