//! The production bus: NATS JetStream.
//!
//! The relay publishes each committed event, in feed order, to stream
//! `AGON_EVENTS` on subject `events.<aggregate_type>.<aggregate_id>` with
//! `Nats-Msg-Id` set to the event id, awaits every ack, and only then moves
//! its checkpoint (kept in the database, not in NATS). A resend after a crash
//! or an outage is dropped by JetStream's duplicate window. Consumers are
//! durable pull consumers that ack each handled batch once, by its last
//! message (`AckPolicy::All`). PostgreSQL stays the source of truth: while
//! NATS is down commands still commit, and the relay catches up from its
//! checkpoint when NATS is back.

use std::sync::Arc;
use std::time::Duration;

use agon_projections::{Cursor, EventRecord};
use async_nats::HeaderMap;
use async_nats::jetstream::{self, consumer, stream};
use futures::{FutureExt, StreamExt};
use tokio_util::sync::CancellationToken;

use super::{BusError, Consumer, after_checkpoint, pause, to_records};
use crate::store::EventLog;

/// The JetStream stream that carries every event.
pub const STREAM: &str = "AGON_EVENTS";
/// The relay's checkpoint name in the database.
pub const RELAY_CHECKPOINT: &str = "relay.nats";
const PAGE: i64 = 1_000;
const BATCH: usize = 500;
const RETRY_DELAY: Duration = Duration::from_millis(500);
/// The relay's first look again after a local commit it could not read yet.
const EAGER_POLL: Duration = Duration::from_millis(5);
/// Longer than any relay outage we expect to resend across.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);

/// A JetStream connection.
#[derive(Clone)]
pub struct NatsBus {
    jetstream: jetstream::Context,
    /// Names this process's durable consumers. Every replica reads every
    /// event in order (a shared durable would split the events between
    /// replicas and let a later event of a stream overtake an earlier one);
    /// the consumers' database checkpoints and guards make the repeats no-ops.
    replica: Arc<str>,
}

/// How long NATS keeps the durable consumer of a replica that went away.
const ABANDONED_CONSUMER_TTL: Duration = Duration::from_secs(600);

impl std::fmt::Debug for NatsBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NatsBus")
    }
}

fn nats_error(e: impl std::fmt::Display) -> BusError {
    BusError::Nats(e.to_string())
}

/// `events.<aggregate_type>.<aggregate_id>`, with characters that NATS treats
/// specially (`.`, `*`, `>`, white space) replaced by `_`.
pub fn subject(event: &EventRecord) -> String {
    fn token(s: &str) -> String {
        let cleaned: String = s
            .chars()
            .map(|c| {
                if c == '.' || c == '*' || c == '>' || c.is_whitespace() {
                    '_'
                } else {
                    c
                }
            })
            .collect();
        if cleaned.is_empty() {
            "_".to_owned()
        } else {
            cleaned
        }
    }
    format!(
        "events.{}.{}",
        token(&event.aggregate_type),
        token(&event.aggregate_id)
    )
}

impl NatsBus {
    /// Connects to `url`. The connection is retried in the background when the
    /// server is not up yet, so the service starts (and commits) without it.
    pub async fn connect(url: &str) -> Result<Self, BusError> {
        let client = async_nats::ConnectOptions::new()
            .retry_on_initial_connect()
            .connection_timeout(Duration::from_secs(5))
            .connect(url)
            .await
            .map_err(nats_error)?;
        let mut replica = [0u8; 6];
        getrandom::fill(&mut replica).map_err(nats_error)?;
        Ok(Self {
            jetstream: jetstream::new(client),
            replica: hex::encode(replica).into(),
        })
    }

    /// Whether the client is connected to a server now.
    pub fn connected(&self) -> bool {
        self.jetstream.client().connection_state() == async_nats::connection::State::Connected
    }

    async fn stream(&self) -> Result<stream::Stream, BusError> {
        self.jetstream
            .get_or_create_stream(stream::Config {
                name: STREAM.to_owned(),
                subjects: vec!["events.>".to_owned()],
                storage: stream::StorageType::File,
                duplicate_window: DUPLICATE_WINDOW,
                ..Default::default()
            })
            .await
            .map_err(nats_error)
    }

    pub(super) async fn run_relay(&self, log: EventLog, stop: CancellationToken) {
        // Where to publish from; `None` after a start or an error, when the
        // stream and the checkpoint are looked at again.
        let mut from: Option<Cursor> = None;
        // Subscribed once, before the first read, so that a commit landing
        // between a read and the wait still wakes the relay.
        let mut commits = log.subscribe_commits();
        // How long to wait when the read found nothing: short right after a
        // commit of ours (the feed holds it back until older transactions
        // in flight finish), growing to the idle poll for other replicas.
        let mut wait = RETRY_DELAY;
        while !stop.is_cancelled() {
            let step = match from {
                Some(cursor) => self.publish_page(&log, cursor).await,
                None => self.resume_point(&log).await.map(Some),
            };
            match step {
                Ok(Some(cursor)) => {
                    from = Some(cursor);
                    wait = RETRY_DELAY;
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "NATS relay paused; resuming from its checkpoint");
                    from = None;
                    wait = RETRY_DELAY;
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                _ = commits.changed() => wait = EAGER_POLL,
                () = tokio::time::sleep(wait) => wait = (wait * 2).min(RETRY_DELAY),
            }
        }
    }

    /// Makes sure the stream exists and returns the relay checkpoint.
    async fn resume_point(&self, log: &EventLog) -> Result<Cursor, BusError> {
        let checkpoint = log.load_checkpoint(RELAY_CHECKPOINT).await?;
        let stream = self.stream().await?;
        // A stream that has never held a message while the checkpoint says we
        // published: NATS lost its data (or is a new server). The log is the
        // source of truth, so publish it all again; consumers skip what they
        // already handled.
        if stream.cached_info().state.last_sequence == 0 && checkpoint != Cursor::START {
            tracing::warn!("JetStream stream {STREAM} is empty; republishing the whole log");
            log.reset_checkpoint(RELAY_CHECKPOINT).await?;
            return Ok(Cursor::START);
        }
        Ok(checkpoint)
    }

    /// Publishes one page of the feed after `from`, awaits every ack, then
    /// saves the checkpoint; the cursor of the last event published, if any.
    async fn publish_page(&self, log: &EventLog, from: Cursor) -> Result<Option<Cursor>, BusError> {
        let events = to_records(log.read_feed(from, PAGE).await?)?;
        let Some(last) = events.last() else {
            return Ok(None);
        };
        let last = last.cursor;
        let mut acks = Vec::with_capacity(events.len());
        for event in &events {
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Msg-Id", event.event_id.as_str());
            let body = serde_json::to_vec(event)?;
            let ack = self
                .jetstream
                .publish_with_headers(subject(event), headers, body.into())
                .await
                .map_err(nats_error)?;
            acks.push(ack);
        }
        for ack in acks {
            ack.await.map_err(nats_error)?;
        }
        log.save_checkpoint(RELAY_CHECKPOINT, last).await?;
        Ok(Some(last))
    }

    pub(super) async fn run_consumer(&self, consumer: Arc<dyn Consumer>, stop: CancellationToken) {
        while !stop.is_cancelled() {
            if let Err(e) = self.consume(consumer.as_ref(), &stop).await {
                tracing::warn!(consumer = consumer.name(), error = %e, "NATS consumer paused; resuming");
                if !pause(&stop, RETRY_DELAY).await {
                    return;
                }
            }
        }
    }

    async fn consume(
        &self,
        consumer: &dyn Consumer,
        stop: &CancellationToken,
    ) -> Result<(), BusError> {
        let durable = format!(
            "{}_{}",
            consumer.name().replace(['.', '*', '>', ' '], "_"),
            self.replica
        );
        let pull = self
            .stream()
            .await?
            .get_or_create_consumer(
                &durable,
                consumer::pull::Config {
                    durable_name: Some(durable.clone()),
                    ack_policy: consumer::AckPolicy::All,
                    deliver_policy: consumer::DeliverPolicy::All,
                    filter_subject: "events.>".to_owned(),
                    inactive_threshold: ABANDONED_CONSUMER_TTL,
                    ..Default::default()
                },
            )
            .await
            .map_err(nats_error)?;
        let mut checkpoint = consumer.checkpoint().await?;
        // A continuous pull: each message is handed on as soon as it arrives,
        // together with whatever else has already arrived (up to a batch),
        // so consumers lag by milliseconds rather than a fetch's expiry.
        let mut messages = pull
            .stream()
            .max_messages_per_batch(BATCH)
            .messages()
            .await
            .map_err(nats_error)?;
        loop {
            let first = tokio::select! {
                () = stop.cancelled() => break,
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
                events.push(serde_json::from_slice::<EventRecord>(&message.payload)?);
            }
            // JetStream order is the relay's feed order; anything at or before
            // the checkpoint is a redelivery of work already done.
            events.sort_by_key(|e| e.cursor);
            let fresh = after_checkpoint(&events, checkpoint);
            if let Some(last) = fresh.last() {
                let next = last.cursor;
                consumer.handle(fresh).await?;
                checkpoint = next;
            }
            // Acking the last message acks every one delivered before it.
            if let Some(last) = received.last() {
                last.ack().await.map_err(nats_error)?;
            }
        }
        Ok(())
    }
}
