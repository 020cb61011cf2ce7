//! The production bus: NATS JetStream.
//!
//! The relay publishes each committed event, in feed order, to this
//! deployment's stream `AGON_<deployment>_EVENTS` on subject
//! `agon.<deployment>.events.<aggregate_type>.<aggregate_id>` with
//! `Nats-Msg-Id` set to the event id and `Agon-Deployment` to the deployment
//! id, awaits every ack, and only then moves its checkpoint (kept in the
//! database, not in NATS). A resend after a crash or an outage is dropped by
//! JetStream's duplicate window. Consumers are durable pull consumers, one per
//! consumer and replica, bound at the consumer's checkpoint (`consume.rs`),
//! that ack each handled batch once, by its last message (`AckPolicy::All`).
//! PostgreSQL stays the source of truth: while NATS is down commands still
//! commit, consumers read the store's feed directly (`fallback.rs`), and the
//! relay catches up from its checkpoint when NATS is back.

mod consume;
mod fallback;
mod identity;

use std::sync::Arc;
use std::time::Duration;

use agon_projections::Cursor;
use async_nats::jetstream::{self, stream};
use tokio_util::sync::CancellationToken;

use super::{BusError, Consumer, Delivery, EAGER_POLL, Resync, pause, to_records};
use crate::config::Settings;
use crate::store::EventLog;

pub use identity::{DEPLOYMENT_HEADER, Identity, MAX_NAME_LEN, valid_name};

/// The relay's checkpoint name in the database.
pub const RELAY_CHECKPOINT: &str = "relay.nats";
const PAGE: i64 = 1_000;
const BATCH: usize = 500;
const RETRY_DELAY: Duration = Duration::from_millis(500);
/// How long the start waits for a first connection to NATS.
const FIRST_CONNECT_WAIT: Duration = Duration::from_secs(2);
/// Longer than any relay outage we expect to resend across.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);
/// How long NATS keeps the durable consumer of a replica that went away.
const ABANDONED_CONSUMER_TTL: Duration = Duration::from_secs(600);

/// A JetStream connection.
#[derive(Clone)]
pub struct NatsBus {
    jetstream: jetstream::Context,
    /// Names the stream, the subjects and this replica's durable consumers.
    /// Every replica reads every event in order (a shared durable would split
    /// the events between replicas and let a later event of a stream overtake
    /// an earlier one); the consumers' database checkpoints and guards make
    /// the repeats no-ops.
    identity: Identity,
    /// Sends consumers back to their stored checkpoints after a database outage.
    resync: Resync,
    pub(super) delivery: Delivery,
}

impl std::fmt::Debug for NatsBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsBus")
            .field("identity", &self.identity)
            .finish()
    }
}

fn nats_error(e: impl std::fmt::Display) -> BusError {
    BusError::Nats(e.to_string())
}

impl NatsBus {
    /// Connects to `url`. The connection is retried in the background when the
    /// server is not up yet, so the service starts (and commits) without it;
    /// up to [`FIRST_CONNECT_WAIT`] is given to a server that is up, so that
    /// consumers start on JetStream rather than on the store's feed.
    pub async fn connect(url: &str, identity: Identity) -> Result<Self, BusError> {
        let client = async_nats::ConnectOptions::new()
            .retry_on_initial_connect()
            .connection_timeout(Duration::from_secs(5))
            .connect(url)
            .await
            .map_err(nats_error)?;
        let bus = Self {
            jetstream: jetstream::new(client),
            identity,
            resync: Resync::default(),
            delivery: Delivery::default(),
        };
        let waited = tokio::time::timeout(FIRST_CONNECT_WAIT, async {
            while !bus.connected() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        if waited.is_err() {
            tracing::warn!(
                "NATS unreachable at start: consumers follow the store until it answers"
            );
        }
        Ok(bus)
    }

    /// Connects to `url` under this process's names: the deployment id from
    /// `SERVICE_DEPLOYMENT_ID` or the database, the replica id from
    /// `SERVICE_REPLICA_ID` or a slot in the data directory.
    pub async fn open(url: &str, log: &EventLog, settings: &Settings) -> Result<Self, BusError> {
        let identity = Identity::resolve(
            log,
            settings.deployment_id.as_deref(),
            settings.replica_id.as_deref(),
            &settings.data_dir,
        )
        .await?;
        let mut bus = Self::connect(url, identity).await?;
        bus.delivery = Delivery::new(settings.consumer_retry);
        Ok(bus)
    }

    /// This process's names on the server.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The connection, for core (not JetStream) messages.
    pub fn client(&self) -> async_nats::Client {
        self.jetstream.client()
    }

    /// The JetStream context, for streams of its own (`outside.rs`).
    pub(crate) fn jetstream(&self) -> &jetstream::Context {
        &self.jetstream
    }

    /// Whether the client is connected to a server now.
    pub fn connected(&self) -> bool {
        self.jetstream.client().connection_state() == async_nats::connection::State::Connected
    }

    async fn stream(&self) -> Result<stream::Stream, BusError> {
        self.jetstream
            .get_or_create_stream(stream::Config {
                name: self.identity.stream(),
                subjects: vec![self.identity.subjects()],
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
        // Whether the last step failed on the database.
        let mut failing = false;
        while !stop.is_cancelled() {
            let step = match from {
                Some(cursor) => self.publish_page(&log, cursor).await,
                None => self.resume_point(&log).await.map(Some),
            };
            if step.is_ok() && std::mem::take(&mut failing) {
                self.resync.database_back();
            }
            failing |= matches!(step, Err(BusError::Store(_)));
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
            tracing::warn!(
                stream = %self.identity.stream(),
                "JetStream stream is empty; republishing the whole log"
            );
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
            let body = serde_json::to_vec(event)?;
            let ack = self
                .jetstream
                .publish_with_headers(
                    self.identity.subject(event),
                    self.identity.headers(event),
                    body.into(),
                )
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

    /// Feeds `consumer` from its durable while NATS is there, and from the
    /// store's feed while it is not (`fallback.rs`), until `stop`. After a
    /// database outage it binds again at its stored checkpoint ([`Resync`]).
    pub(super) async fn run_consumer(
        &self,
        log: EventLog,
        consumer: Arc<dyn Consumer>,
        stop: CancellationToken,
    ) {
        let name = consumer.name().to_owned();
        // How long at least to follow the store before trying NATS again.
        let mut stay = Duration::ZERO;
        while !stop.is_cancelled() {
            if self.connected() {
                let mut resync = self.resync.subscribe();
                let interrupt = stop.child_token();
                let consume = self.consume(&log, consumer.as_ref(), &interrupt);
                tokio::pin!(consume);
                // Whether NATS went away (else the database came back);
                // a batch in hand is finished before the consumer turns.
                let (consumed, away) = tokio::select! {
                    consumed = &mut consume => (consumed, true),
                    away = async {
                        tokio::select! {
                            () = self.until_away() => true,
                            _ = resync.changed() => false,
                        }
                    } => {
                        interrupt.cancel();
                        (consume.await, away)
                    }
                };
                if stop.is_cancelled() {
                    return;
                }
                match consumed {
                    Ok(()) if !away => continue,
                    Ok(()) => {
                        tracing::warn!(consumer = %name, "NATS away; following the store");
                        stay = Duration::ZERO;
                    }
                    Err(e) => {
                        tracing::warn!(consumer = %name, error = %e, "NATS consumer paused; following the store");
                        // Connected but failing: not straight back.
                        stay = RETRY_DELAY;
                    }
                }
            }
            match self
                .follow_store(&log, consumer.as_ref(), stay, &stop)
                .await
            {
                Ok(()) if !stop.is_cancelled() => {
                    tracing::info!(consumer = %name, "NATS is back; consuming from JetStream");
                }
                Ok(()) => {}
                Err(e) => {
                    tracing::warn!(consumer = %name, error = %e, "consumer failed; resuming from its checkpoint");
                    if !pause(&stop, RETRY_DELAY).await {
                        return;
                    }
                }
            }
        }
    }
}
