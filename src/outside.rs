//! The public NATS stream: debate outcomes for systems outside the service.
//! A service beside the webhooks, whose bodies it sends; the bus is its
//! adapter.
//!
//! With NATS configured, a durable consumer of the log publishes every
//! `debate.completed`, `debate.verdict` and `debate.failed` to the stream
//! `AGON_<deployment>_PUBLIC` (`SERVICE_NATS_PUBLIC_STREAM`) on subjects
//! `agon.<deployment>.public.<type>`, with the body the outgoing webhooks
//! send (`crate::webhooks::payload`, schemas in `event-schemas/webhooks/`)
//! and `Nats-Msg-Id` set to the event id. It awaits every ack before moving
//! its checkpoint, so a crash in between re-publishes what the stream's
//! duplicate window then drops: outside consumers read each outcome once,
//! durably, at their own pace. The internal stream (`bus/nats.rs`) carries
//! stored events, whose form may change; this one carries only public DTOs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agon_aggregates::debate::{Debate, DebateEvent};
use agon_projections::debates::DEBATE_AGGREGATE;
use agon_projections::{Cursor, EventRecord};
use async_nats::HeaderMap;
use async_nats::jetstream::context::GetStreamErrorKind;
use async_nats::jetstream::{ErrorCode, stream};
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::bus::nats::{DEPLOYMENT_HEADER, Identity, NatsBus};
use crate::bus::{Bus, Consumer, ConsumerError};
use crate::config::PublicStreamSettings;
use crate::projection::{IdleCheckpoint, checkpoint_name};
use crate::store::{CommandError, EventLog, StoreError};
use crate::webhooks::payload::{self, Verdict};

/// The consumer's name (its checkpoint is `projection.public-stream`).
pub const NAME: &str = "public-stream";
/// Where the last outcome published lies in the log (a checkpoint row):
/// unset while nothing was ever published, so that an empty stream then
/// does not send the publisher through the whole log again.
const PUBLISHED_MARK: &str = "public-stream.published";
/// The header naming the message's type (`debate.completed`, ...).
pub const TYPE_HEADER: &str = "Agon-Event-Type";
/// The header naming the version of the body's `data` form.
pub const VERSION_HEADER: &str = "Agon-Payload-Version";
/// How often a publish that failed because NATS is away looks again.
const RECONNECT_CHECK: Duration = Duration::from_millis(100);

/// The debate events that make a public message.
const PUBLISHED: [&str; 3] = ["ConsensusComputed", "DebateCompleted", "DebateFailed"];

/// The stream outside subscribers read, by default.
pub fn default_stream(deployment: &str) -> String {
    format!("AGON_{deployment}_PUBLIC")
}

/// `agon.<deployment>.public.<type>`: where messages of `kind` go.
pub fn subject(deployment: &str, kind: &str) -> String {
    format!("agon.{deployment}.public.{kind}")
}

/// The publisher when the bus is NATS and the stream is enabled.
pub fn publisher(
    bus: &Bus,
    log: &EventLog,
    settings: &PublicStreamSettings,
    stop: &CancellationToken,
) -> Option<std::sync::Arc<Publisher>> {
    let Bus::Nats(nats) = bus else { return None };
    settings.enabled.then(|| {
        std::sync::Arc::new(Publisher {
            log: log.clone(),
            nats: nats.as_ref().clone(),
            settings: settings.clone(),
            stop: stop.clone(),
            idle: IdleCheckpoint::default(),
            looked_at_stream: AtomicBool::new(false),
            stream_ready: AtomicBool::new(false),
        })
    })
}

/// One message ready to publish.
struct Outgoing<'a> {
    record: &'a EventRecord,
    kind: &'static str,
    body: String,
}

/// Publishes debate outcomes to the public stream.
pub struct Publisher {
    log: EventLog,
    nats: NatsBus,
    settings: PublicStreamSettings,
    /// Ends the wait for an unreachable server at shutdown.
    stop: CancellationToken,
    idle: IdleCheckpoint,
    /// Whether [`Consumer::checkpoint`] has looked for an empty stream.
    looked_at_stream: AtomicBool,
    /// Whether the stream was made or brought to the settings since the
    /// start or the last failed publish (not at every batch).
    stream_ready: AtomicBool,
}

impl Publisher {
    fn identity(&self) -> &Identity {
        self.nats.identity()
    }

    fn stream_name(&self) -> String {
        self.settings
            .stream
            .clone()
            .unwrap_or_else(|| default_stream(self.identity().deployment()))
    }

    /// Creates the stream, or brings its limits to the settings.
    async fn ensure_stream(&self) -> Result<(), async_nats::Error> {
        let deployment = self.identity().deployment();
        self.nats
            .jetstream()
            .create_or_update_stream(stream::Config {
                name: self.stream_name(),
                description: Some(format!(
                    "Agon deployment {deployment}: debate.completed, debate.verdict, debate.failed"
                )),
                subjects: vec![format!("agon.{deployment}.public.>")],
                storage: stream::StorageType::File,
                retention: stream::RetentionPolicy::Limits,
                discard: stream::DiscardPolicy::Old,
                max_age: self.settings.max_age,
                max_bytes: i64::try_from(self.settings.max_bytes)
                    .ok()
                    .filter(|n| *n > 0)
                    .unwrap_or(-1),
                duplicate_window: self.settings.duplicate_window,
                ..Default::default()
            })
            .await?;
        Ok(())
    }

    /// The public message of `record`, if it makes one. The debate's topic
    /// and vote come from its own stream, which holds everything up to it.
    async fn outgoing<'a>(
        &self,
        record: &'a EventRecord,
    ) -> Result<Option<Outgoing<'a>>, ConsumerError> {
        let event = record
            .decode::<DebateEvent>()
            .map_err(|e| ConsumerError::undecodable(record, e))?;
        let debate = match self.log.load::<Debate>(&record.aggregate_id).await {
            Ok(debate) => debate,
            Err(CommandError::Store(e)) => return Err(ConsumerError::Store(e)),
            Err(e) => return Err(ConsumerError::transient(record, e)),
        };
        let verdict = debate.consensus.as_ref().map(Verdict::from);
        let made = payload::message_of(&event, debate.id.clone(), debate.topic, verdict);
        Ok(made.map(|(kind, _, body)| Outgoing { record, kind, body }))
    }

    fn headers(&self, message: &Outgoing<'_>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", message.record.event_id.as_str());
        headers.insert(DEPLOYMENT_HEADER, self.identity().deployment());
        headers.insert(TYPE_HEADER, message.kind);
        headers.insert(
            VERSION_HEADER,
            payload::PAYLOAD_VERSION.to_string().as_str(),
        );
        headers.insert("Content-Type", "application/json");
        headers
    }

    /// Publishes `messages` and awaits their acks in order; on a failure,
    /// the index of the first message not known to be stored.
    async fn publish(&self, messages: &[Outgoing<'_>]) -> Result<(), (usize, async_nats::Error)> {
        let published = self.publish_once(messages).await;
        self.stream_ready.store(published.is_ok(), Ordering::SeqCst);
        published
    }

    async fn publish_once(
        &self,
        messages: &[Outgoing<'_>],
    ) -> Result<(), (usize, async_nats::Error)> {
        if !self.stream_ready.load(Ordering::SeqCst) {
            self.ensure_stream().await.map_err(|e| (0, e))?;
        }
        let jetstream = self.nats.jetstream();
        let deployment = self.identity().deployment();
        let mut acks = Vec::with_capacity(messages.len());
        for (i, message) in messages.iter().enumerate() {
            let ack = jetstream
                .publish_with_headers(
                    subject(deployment, message.kind),
                    self.headers(message),
                    message.body.clone().into(),
                )
                .await;
            match ack {
                Ok(ack) => acks.push(ack),
                Err(e) => {
                    acks.truncate(0);
                    return Err((i, e.into()));
                }
            }
        }
        for (i, ack) in acks.into_iter().enumerate() {
            ack.await.map_err(|e| (i, e.into()))?;
        }
        Ok(())
    }

    /// [`Self::publish`], waiting for the server while it is away (the
    /// outcomes are not dead-lettered for an outage): returns the index and
    /// error of the first message that failed while NATS was connected, or
    /// when the service stops.
    async fn publish_patiently(
        &self,
        messages: &[Outgoing<'_>],
    ) -> Result<(), (usize, async_nats::Error)> {
        let mut from = 0;
        loop {
            let Err((at, error)) = self.publish(&messages[from..]).await else {
                return Ok(());
            };
            from += at;
            if self.nats.connected() || self.stop.is_cancelled() {
                return Err((from, error));
            }
            tracing::warn!(error = %error, "NATS away; the public stream waits for it");
            while !self.nats.connected() {
                if !crate::bus::pause(&self.stop, RECONNECT_CHECK).await {
                    return Err((from, error));
                }
            }
        }
    }

    /// Whether the server has no public stream, or one that never held a
    /// message; false when it cannot tell (not connected).
    async fn stream_is_new(&self) -> bool {
        if !self.nats.connected() {
            self.looked_at_stream.store(false, Ordering::SeqCst);
            return false;
        }
        match self.nats.jetstream().get_stream(self.stream_name()).await {
            Ok(stream) => stream.cached_info().state.last_sequence == 0,
            Err(e) => matches!(e.kind(), GetStreamErrorKind::JetStream(error)
                if error.error_code() == ErrorCode::STREAM_NOT_FOUND),
        }
    }

    async fn save(&self, cursor: Cursor) -> Result<(), StoreError> {
        self.log
            .save_checkpoint(&checkpoint_name(NAME), cursor)
            .await
    }
}

fn published(event: &EventRecord) -> bool {
    event.aggregate_type == DEBATE_AGGREGATE && PUBLISHED.contains(&event.event_type.as_str())
}

#[async_trait]
impl Consumer for Publisher {
    fn name(&self) -> &str {
        NAME
    }

    /// The stored checkpoint, or the log's start when outcomes were
    /// published but the server's stream never held a message (a new
    /// server, or one that lost its data): outside subscribers then get
    /// every outcome again, as the relay republishes the log into an empty
    /// internal stream. Looked at once per process.
    async fn checkpoint(&self) -> Result<Cursor, StoreError> {
        let name = checkpoint_name(NAME);
        let stored = self.log.load_checkpoint(&name).await?;
        if stored != Cursor::START
            && !self.looked_at_stream.swap(true, Ordering::SeqCst)
            && self.log.load_checkpoint(PUBLISHED_MARK).await? != Cursor::START
            && self.stream_is_new().await
        {
            tracing::warn!(
                stream = %self.stream_name(),
                "the public stream never held a message; publishing every outcome in the log"
            );
            self.log.reset_checkpoint(&name).await?;
            return Ok(Cursor::START);
        }
        Ok(stored)
    }

    async fn handle(&self, batch: &[EventRecord]) -> Result<(), ConsumerError> {
        let Some(last) = batch.last() else {
            return Ok(());
        };
        let mut messages = Vec::new();
        for record in batch.iter().filter(|e| published(e)) {
            if let Some(message) = self.outgoing(record).await? {
                messages.push(message);
            }
        }
        if messages.is_empty() {
            if self.idle.due() {
                self.save(last.cursor).await?;
            }
            return Ok(());
        }
        if let Err((at, error)) = self.publish_patiently(&messages).await {
            let failed = messages[at].record;
            // Everything before it is stored in the stream.
            let done = batch.iter().take_while(|e| e.cursor < failed.cursor).last();
            if let Some(done) = done {
                self.save(done.cursor).await?;
            }
            return Err(ConsumerError::transient(failed, error));
        }
        if let Some(published) = messages.last() {
            self.log
                .save_checkpoint(PUBLISHED_MARK, published.record.cursor)
                .await?;
        }
        self.save(last.cursor).await?;
        Ok(())
    }

    async fn pass(&self, event: &EventRecord) -> Result<(), StoreError> {
        self.save(event.cursor).await
    }

    async fn retry(&self, event: &EventRecord) -> Result<(), ConsumerError> {
        let Some(message) = self.outgoing(event).await? else {
            return Ok(());
        };
        self.publish(std::slice::from_ref(&message))
            .await
            .map_err(|(_, e)| ConsumerError::transient(event, e))
    }
}
