//! The WebSocket push: live debate events for connected clients, read out of
//! the log (spec §6.1).
//!
//! [`hub`] follows the bus and broadcasts each batch's frames once;
//! [`session`] is one socket's subscriptions, catch-up from the log and
//! filtering; [`frames`] the public messages. The HTTP face owns the sockets
//! (`http/ws.rs`): this module never sees axum. Guarantees: a client that
//! reconnects with `since=<position>` gets every frame after it, once, in
//! feed order; a slow client is closed, never waited for.

pub mod ends;
pub mod frames;
pub mod hub;
pub mod live;
pub mod outbox;
pub mod session;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use thiserror::Error;
use tokio_util::sync::CancellationToken;

use self::ends::{Ends, Registration};
use self::hub::{Hub, HubConsumer};
pub use self::outbox::{Outbox, Queue, Writer};
pub use self::session::{Listening, Session, Start};
use crate::auth::Caller;
use crate::bus::{Consumer, ConsumerError, Ephemeral};
use crate::clock::Clock;
use crate::config::PushSettings;
use crate::debates::Debates;
use crate::store::{EventLog, StoreError};

/// The frames of one debate in another form, for one socket: the web UI's
/// HTML mode (`format=html`), whose markup belongs to that face, so the
/// composition root hands it in ([`Push::render_with`]).
pub trait Render: Send + std::fmt::Debug {
    /// Starts from the debate as it stood where the socket begins (`since`),
    /// for the user `viewer`.
    fn start(&mut self, debate: agon_aggregates::debate::Debate, viewer: &str);
    /// What to send for `frame`, if anything; it folds the frame's event in.
    fn frame(&mut self, frame: &frames::Frame) -> Option<String>;
    /// What to send once the socket is open and caught up.
    fn opened(&mut self) -> Option<String>;
}

/// Makes a fresh [`Render`] for each socket that asks for one.
pub type Renderer = fn() -> Box<dyn Render>;

/// The gauge of open sockets (spec §4.3).
pub const CONNECTIONS_GAUGE: &str = "service_websocket_connections";

#[derive(Debug, Error)]
pub enum PushError {
    #[error("at most {cap} WebSocket connections per user in this tier")]
    TooManyConnections { cap: u32 },
    /// The caller's session or key ended, or the user was disabled.
    #[error("the session has ended")]
    Ended,
    #[error("no event has position {0}")]
    UnknownPosition(i64),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot read events for a client")]
    Replay(#[source] Box<ConsumerError>),
    /// The client's send buffer is full: it is closed as a slow consumer.
    #[error("slow consumer")]
    Slow,
    /// The socket or the service is gone.
    #[error("connection closed")]
    Gone,
    /// A ticket's holder could not be written or read back.
    #[error("ticket: {0}")]
    Ticket(String),
}

/// Tickets are kept by their SHA-256: a copy of the table redeems nothing.
fn ticket_hash(ticket: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(ticket.as_bytes()))
}

impl From<ConsumerError> for PushError {
    fn from(error: ConsumerError) -> Self {
        match error {
            ConsumerError::Store(error) => PushError::Store(error),
            other => PushError::Replay(Box::new(other)),
        }
    }
}

/// Counters for `GET /api/ws/stats`.
#[derive(Debug, Default)]
struct Counters {
    connections: AtomicI64,
    subscriptions: AtomicI64,
    sent: AtomicU64,
    dropped_slow: AtomicU64,
    dropped_deltas: AtomicU64,
}

/// What `GET /api/ws/stats` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub connections: i64,
    pub subscriptions: i64,
    pub messages_sent: u64,
    pub dropped_slow_clients: u64,
    /// Delta frames a client did not get: its buffer was half full, or it
    /// fell behind the ring of pieces.
    pub dropped_deltas: u64,
}

/// The push service; cheap to clone.
#[derive(Debug, Clone)]
pub struct Push(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    settings: PushSettings,
    allowed_origins: Vec<String>,
    log: EventLog,
    debates: Debates,
    clock: Clock,
    hub: Arc<Hub>,
    /// The agents' streamed text, from every replica.
    deltas: Ephemeral,
    users: Mutex<HashMap<String, u32>>,
    /// Credentials of open sockets, closed when they end.
    ends: Arc<Ends>,
    counters: Counters,
    closing: CancellationToken,
    /// The HTML mode's renderer, once the web face is mounted.
    html: OnceLock<Renderer>,
}

impl Push {
    pub fn new(
        settings: PushSettings,
        allowed_origins: Vec<String>,
        log: EventLog,
        debates: Debates,
        clock: Clock,
        deltas: Ephemeral,
        delta_ring: usize,
    ) -> Self {
        let ends = Arc::new(Ends::default());
        Self(Arc::new(Inner {
            hub: Arc::new(Hub::new(log.clone(), delta_ring, ends.clone())),
            ends,
            deltas,
            settings,
            allowed_origins,
            log,
            debates,
            clock,
            users: Mutex::default(),
            counters: Counters::default(),
            closing: CancellationToken::new(),
            html: OnceLock::new(),
        }))
    }

    /// Serves the HTML mode with `renderer` (the first one set stays).
    pub fn render_with(&self, renderer: Renderer) {
        let _ = self.0.html.set(renderer);
    }

    /// A renderer of debate `id` started from where it stood at `from`.
    async fn renderer_at(
        &self,
        id: &str,
        from: agon_projections::Cursor,
        viewer: &str,
    ) -> Result<Option<Box<dyn Render>>, PushError> {
        let Some(renderer) = self.0.html.get() else {
            return Ok(None);
        };
        let as_of = crate::projection::replay::AsOf::Position(from.position);
        let debate = crate::projection::replay::document_as_of::<agon_projections::Debates>(
            &self.0.log,
            agon_projections::debates::DEBATE_AGGREGATE,
            id,
            as_of,
        )
        .await?
        .unwrap_or_default();
        let mut render = renderer();
        render.start(debate, viewer);
        Ok(Some(render))
    }

    /// Whether sockets may ask for the HTML mode.
    pub fn renders_html(&self) -> bool {
        self.0.html.get().is_some()
    }

    pub fn settings(&self) -> &PushSettings {
        &self.0.settings
    }

    /// `SERVICE_ALLOWED_ORIGINS`: browser origins that may open a socket.
    pub fn allowed_origins(&self) -> &[String] {
        &self.0.allowed_origins
    }

    /// The hub's consumer, placed at the feed head; sockets close when
    /// `stop` fires.
    pub async fn start(&self, stop: &CancellationToken) -> Result<Arc<dyn Consumer>, StoreError> {
        self.0.hub.place(self.0.log.feed_head().await?);
        self.0.hub.set_running(true);
        let (mut incoming, push, until) = (self.0.deltas.subscribe(), self.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let payload = tokio::select! {
                    () = until.cancelled() => return,
                    payload = incoming.recv() => payload,
                };
                match payload {
                    Ok(payload) => {
                        if let Some(delta) = crate::runner::Delta::decode(&payload) {
                            push.0.hub.send_delta(frames::delta(&delta));
                        }
                    }
                    // Pieces lost to a full ring: a preview, not the truth.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(lost)) => {
                        push.dropped_deltas(lost);
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        let (push, stop) = (self.clone(), stop.clone());
        tokio::spawn(async move {
            stop.cancelled().await;
            push.0.hub.set_running(false);
            push.0.closing.cancel();
        });
        Ok(Arc::new(HubConsumer(self.0.hub.clone())))
    }

    /// Fires when the service stops: every socket closes (1001).
    pub fn closing(&self) -> &CancellationToken {
        &self.0.closing
    }

    /// Whether live events reach sockets: the hub follows the bus.
    pub fn available(&self) -> bool {
        self.0.hub.running() && !self.0.closing.is_cancelled()
    }

    /// Takes one of the caller's `cap` sockets; the slot frees it when
    /// dropped, and its `ended` token fires when the caller's session or
    /// key ends or the user is disabled.
    pub fn admit(&self, caller: &Caller, cap: u32) -> Result<Slot, PushError> {
        let user = caller.user_id.as_str();
        let registration = self
            .0
            .ends
            .register(caller, &self.0.closing)
            .ok_or(PushError::Ended)?;
        {
            let mut users = self.0.users.lock().unwrap_or_else(PoisonError::into_inner);
            let open = users.entry(user.to_owned()).or_insert(0);
            if *open >= cap {
                drop(users);
                self.0.ends.unregister(&registration);
                return Err(PushError::TooManyConnections { cap });
            }
            *open += 1;
        }
        self.0.counters.connections.fetch_add(1, Ordering::AcqRel);
        metrics::gauge!(CONNECTIONS_GAUGE).increment(1.0);
        Ok(Slot {
            push: self.clone(),
            user: user.to_owned(),
            registration,
        })
    }

    /// A single-use ticket standing for `caller` for the ticket lifetime:
    /// a browser opens its socket with `?ticket=` instead of a credential,
    /// on any replica. `Ended` when the caller's credential has already
    /// ended.
    pub async fn issue_ticket(&self, caller: Caller) -> Result<(String, Duration), PushError> {
        if self.0.ends.has_ended(&caller) {
            return Err(PushError::Ended);
        }
        let ttl = self.0.settings.ticket_ttl;
        let ticket = crate::crypto::secrets::random_token(32);
        let now = self.0.clock.now().timestamp_millis();
        let expires_at = now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX));
        let holder =
            serde_json::to_string(&caller).map_err(|e| PushError::Ticket(e.to_string()))?;
        self.0
            .log
            .keep_ticket(&ticket_hash(&ticket), &holder, expires_at, now)
            .await?;
        Ok((ticket, ttl))
    }

    /// The caller a ticket stands for, once, before it expires (whether its
    /// credential still lasts is the caller's to check).
    pub async fn redeem(&self, ticket: &str) -> Result<Option<Caller>, PushError> {
        let now = self.0.clock.now().timestamp_millis();
        let Some(holder) = self.0.log.take_ticket(&ticket_hash(ticket), now).await? else {
            return Ok(None);
        };
        serde_json::from_str(&holder)
            .map(Some)
            .map_err(|e| PushError::Ticket(e.to_string()))
    }

    pub fn stats(&self) -> Stats {
        let c = &self.0.counters;
        Stats {
            connections: c.connections.load(Ordering::Acquire),
            subscriptions: c.subscriptions.load(Ordering::Acquire),
            messages_sent: c.sent.load(Ordering::Acquire),
            dropped_slow_clients: c.dropped_slow.load(Ordering::Acquire),
            dropped_deltas: c.dropped_deltas.load(Ordering::Acquire),
        }
    }

    /// Counts a message written to a socket (the live page's fragments
    /// queued together are one).
    pub fn sent(&self) {
        self.0.counters.sent.fetch_add(1, Ordering::AcqRel);
    }

    /// Counts a client closed as a slow consumer.
    pub fn dropped_slow(&self) {
        self.0.counters.dropped_slow.fetch_add(1, Ordering::AcqRel);
    }

    /// Counts delta frames a client did not get (busy, or behind the ring).
    fn dropped_deltas(&self, count: u64) {
        self.0
            .counters
            .dropped_deltas
            .fetch_add(count, Ordering::AcqRel);
    }

    fn subscriptions(&self, change: i64) {
        self.0
            .counters
            .subscriptions
            .fetch_add(change, Ordering::AcqRel);
    }
}

/// One open socket of a user; dropping it frees the slot.
#[derive(Debug)]
pub struct Slot {
    push: Push,
    user: String,
    registration: Registration,
}

impl Slot {
    /// Fires when the caller's credential ends (the socket closes, 4401),
    /// and, as a child of [`Push::closing`], when the service stops (1001).
    pub fn ended(&self) -> &CancellationToken {
        &self.registration.ended
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let inner = &self.push.0;
        inner.ends.unregister(&self.registration);
        let mut users = inner.users.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(open) = users.get_mut(&self.user) {
            *open = open.saturating_sub(1);
            if *open == 0 {
                users.remove(&self.user);
            }
        }
        inner.counters.connections.fetch_sub(1, Ordering::AcqRel);
        metrics::gauge!(CONNECTIONS_GAUGE).decrement(1.0);
    }
}
