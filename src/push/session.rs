//! One socket's view of the push: what it subscribed to, where it stands in
//! the feed, and the catch-up from the log that makes reconnects exact.
//!
//! A session holds `last`, the feed cursor up to which it has dealt with
//! every event. Live batches at or before it are dropped, and a batch that
//! does not continue from it (a lagged receiver) makes the session read
//! the gap from the log first: no gap, no duplicate. Frames go into the
//! client's bounded [`Outbox`]; a full outbox ends the session as a slow
//! consumer rather than waiting (frames read from the log wait for room).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use agon_aggregates::debate::DebateEvent;
use agon_projections::Cursor;
use agon_projections::debates::DEBATE_AGGREGATE;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use super::frames::{EVENT_KINDS, Frame, Track, control};
use super::hub::{LiveBatch, Tracks, decode};
use super::live::Live;
use super::outbox::Outbox;
use super::{Push, PushError};
use crate::auth::Caller;
use crate::bus::to_records;

/// Events read from the log per page while catching up.
const PAGE: i64 = 500;
/// Debates whose visibility a session remembers; past it it starts afresh.
const MAX_VISIBLE: usize = 4_096;

/// What a socket asked for when it opened (its query string).
#[derive(Debug, Clone, Default)]
pub struct Start {
    /// One debate to follow (`debate_id`).
    pub debate_id: Option<String>,
    /// Every debate the caller may read (`all=true`).
    pub all: bool,
    /// Replay every frame after this position from the log, then go live.
    pub since: Option<i64>,
    /// Only these frame types (`kinds=a,b`).
    pub kinds: Option<Vec<String>>,
    /// Frames in the HTML mode's form ([`super::Render`]); the debate and
    /// `since` are given.
    pub html: bool,
}

/// What a client sends.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum ClientMessage {
    Subscribe {
        debate_id: Option<String>,
        kinds: Option<Vec<String>>,
    },
    Unsubscribe {
        debate_id: Option<String>,
    },
    Ping,
}

#[derive(Debug)]
pub struct Session {
    push: Push,
    caller: Caller,
    /// The caller is an admin, who may read every debate (as over REST):
    /// asked once, since a socket's caller does not change, rather than
    /// once per debate per socket.
    admin: bool,
    all: bool,
    debates: HashSet<String>,
    kinds: Option<HashSet<String>>,
    visible: HashMap<String, bool>,
    last: Cursor,
    /// Until the socket loop takes it.
    live: Option<Live>,
    /// The HTML mode's form of the frames.
    render: Option<Box<dyn super::Render>>,
}

/// A place in the live stream, taken when the upgrade is accepted: a client
/// that acts as soon as its handshake completes (creates a debate) must not
/// find the debate's first events already gone by.
pub struct Listening {
    receiver: broadcast::Receiver<Arc<LiveBatch>>,
    head: Cursor,
    deltas: broadcast::Receiver<Arc<Frame>>,
}

impl Push {
    /// Starts listening to the live stream from where the hub stands.
    pub fn listen(&self) -> Listening {
        let (receiver, head) = self.0.hub.subscribe();
        let deltas = self.0.hub.deltas();
        Listening {
            receiver,
            head,
            deltas,
        }
    }
}

impl Session {
    /// Opens a session for `caller` as `start` asks, live from `listening`,
    /// sending what it replays or what a debate already has into `out`.
    pub async fn open(
        push: &Push,
        caller: Caller,
        start: Start,
        listening: Listening,
        out: &mut Outbox<'_>,
    ) -> Result<Self, PushError> {
        let Listening {
            receiver,
            head,
            deltas,
        } = listening;
        let mut session = Self {
            push: push.clone(),
            admin: caller.is_admin(),
            caller,
            all: false,
            debates: HashSet::new(),
            kinds: None,
            visible: HashMap::new(),
            last: head,
            live: Some(Live::new(receiver, deltas, push.clone())),
            render: None,
        };
        if let Some(kinds) = start.kinds
            && !session.set_kinds(kinds, out)?
        {
            return Ok(session);
        }
        if start.all {
            session.subscribe_all();
        }
        match (start.since, start.debate_id) {
            (Some(since), debate_id) => {
                let from = match since {
                    0 => Cursor::START,
                    position => push
                        .0
                        .log
                        .cursor_at(position)
                        .await?
                        .ok_or(PushError::UnknownPosition(position))?,
                };
                if let Some(id) = debate_id {
                    if !session.may_follow(&id, out).await? {
                        return Ok(session);
                    }
                    if start.html {
                        let viewer = session.caller.user_id.to_string();
                        session.render = push.renderer_at(&id, from, &viewer).await?;
                    }
                    session.add(id);
                }
                session.catch_up(from, head, out).await?;
                if let Some(opened) = session.render.as_mut().and_then(|r| r.opened()) {
                    out.send_fragment(opened.into(), true).await?;
                }
            }
            (None, Some(id)) => session.subscribe(id, out).await?,
            (None, None) => {}
        }
        Ok(session)
    }

    /// Deals with what [`Live::batches`] gave.
    pub async fn live(
        &mut self,
        received: Result<Arc<LiveBatch>, RecvError>,
        out: &mut Outbox<'_>,
    ) -> Result<(), PushError> {
        match received {
            Ok(batch) if batch.to <= self.last => Ok(()),
            Ok(batch) if batch.from <= self.last => {
                let last = self.last;
                for frame in batch.frames.iter().filter(|f| f.cursor > last) {
                    self.offer(frame, out, false).await?;
                }
                self.last = batch.to;
                Ok(())
            }
            // The receiver fell behind the ring: read what it missed.
            // Boxed here and below: the catch-up's state would otherwise
            // be part of every socket's loop for its whole life.
            Ok(batch) => Box::pin(self.catch_up(self.last, batch.to, out)).await,
            Err(RecvError::Lagged(_)) => {
                let head = self.push.0.hub.cursor();
                Box::pin(self.catch_up(self.last, head, out)).await
            }
            Err(RecvError::Closed) => Err(PushError::Gone),
        }
    }

    /// Whether it sends HTML fragments (the live page), which go out joined
    /// when queued side by side; JSON frames are a message each.
    pub fn sends_fragments(&self) -> bool {
        self.render.is_some()
    }

    /// The session's live streams, for the socket loop to wait on (once;
    /// `None` after).
    pub fn take_live(&mut self) -> Option<Live> {
        self.live.take()
    }

    /// Sends a delta frame if the session wants it, the caller may read its
    /// debate and the outbox is at most half full: a client slow to read
    /// loses pieces of text (the recorded message follows), never its
    /// socket on their account, and never holds up the agent writing.
    pub async fn delta(&mut self, frame: &Frame, out: &mut Outbox<'_>) -> Result<(), PushError> {
        if !out.has_room_for_extras() {
            self.push.dropped_deltas(1);
            return Ok(());
        }
        self.offer(frame, out, false).await
    }

    /// Answers one client message.
    pub async fn message(&mut self, text: &str, out: &mut Outbox<'_>) -> Result<(), PushError> {
        let message = match serde_json::from_str::<ClientMessage>(text) {
            Ok(message) => message,
            Err(_) => {
                let error = "expected {\"type\": \"subscribe\" | \"unsubscribe\" | \"ping\", \"debate_id\"?: string, \"kinds\"?: [string]}";
                return self.error("bad_message", error, None, out);
            }
        };
        match message {
            ClientMessage::Ping => {
                let pong = control("pong", json!({}), None, self.push.0.clock.now());
                out.send(pong.into())
            }
            ClientMessage::Subscribe { debate_id, kinds } => {
                if let Some(kinds) = kinds
                    && !self.set_kinds(kinds, out)?
                {
                    return Ok(());
                }
                match debate_id {
                    Some(id) => self.subscribe(id, out).await,
                    None => {
                        self.subscribe_all();
                        Ok(())
                    }
                }
            }
            ClientMessage::Unsubscribe { debate_id } => {
                match debate_id {
                    Some(id) => {
                        if self.debates.remove(&id) {
                            self.push.subscriptions(-1);
                        }
                    }
                    None => self.clear(),
                }
                Ok(())
            }
        }
    }

    /// Follows debate `id`: its outcome at once when it has ended, else
    /// what it has so far and then live.
    async fn subscribe(&mut self, id: String, out: &mut Outbox<'_>) -> Result<(), PushError> {
        if self.debates.contains(&id) {
            return Ok(());
        }
        let Some(frames) = self.history(&id, out).await? else {
            return Ok(());
        };
        self.add(id);
        let ended = frames.iter().any(|f| f.kind == "debate_end");
        // Frames after `last` arrive live, since the debate is subscribed now.
        let last = self.last;
        for frame in frames.iter().filter(|f| f.cursor <= last) {
            if !ended || matches!(frame.kind, "consensus" | "debate_end") {
                self.offer(frame, out, true).await?;
            }
        }
        Ok(())
    }

    /// Whether the caller may follow debate `id`; an error frame when not.
    async fn may_follow(&mut self, id: &str, out: &mut Outbox<'_>) -> Result<bool, PushError> {
        Ok(self.history(id, out).await?.is_some())
    }

    /// Every frame of debate `id` so far, if the caller may read it; an
    /// error frame (`not_found`, as REST answers 404) when not.
    async fn history(
        &mut self,
        id: &str,
        out: &mut Outbox<'_>,
    ) -> Result<Option<Vec<Frame>>, PushError> {
        let stream = self.push.0.log.load_stream(DEBATE_AGGREGATE, id, 0).await?;
        let mut track = Track::default();
        let mut frames = Vec::new();
        for stored in to_records(stream)? {
            let event: DebateEvent = decode(&stored)?;
            frames.extend(track.frames(id, stored.cursor, &event));
        }
        let readable = track.created()
            && self
                .push
                .0
                .debates
                .visible_to(
                    &self.caller,
                    track.created_by.as_deref(),
                    track.org_id.as_deref(),
                )
                .await?;
        if readable {
            Ok(Some(frames))
        } else {
            self.error("not_found", "Debate not found", Some(id), out)?;
            Ok(None)
        }
    }

    fn add(&mut self, id: String) {
        if self.debates.insert(id) {
            self.push.subscriptions(1);
        }
    }

    fn subscribe_all(&mut self) {
        if !self.all {
            self.all = true;
            self.push.subscriptions(1);
        }
    }

    fn clear(&mut self) {
        let count = self.debates.len() as i64 + i64::from(self.all);
        self.push.subscriptions(-count);
        self.debates.clear();
        self.all = false;
    }

    /// Sets the frame types to send; false (and an error frame) for an unknown one.
    fn set_kinds(&mut self, kinds: Vec<String>, out: &mut Outbox<'_>) -> Result<bool, PushError> {
        if let Some(bad) = kinds.iter().find(|k| !EVENT_KINDS.contains(&k.as_str())) {
            let error = format!(
                "unknown event kind {bad:?}; known: {}",
                EVENT_KINDS.join(", ")
            );
            self.error("bad_kind", &error, None, out)?;
            return Ok(false);
        }
        self.kinds = (!kinds.is_empty()).then(|| kinds.into_iter().collect());
        Ok(true)
    }

    fn error(
        &self,
        code: &str,
        error: &str,
        debate_id: Option<&str>,
        out: &mut Outbox<'_>,
    ) -> Result<(), PushError> {
        let data: Value = json!({"code": code, "error": error});
        let frame = control("error", data, debate_id, self.push.0.clock.now());
        out.send(frame.into())
    }

    /// Sends every subscribed frame of the feed after `from` up to `to`
    /// from the log, and stands at `to`.
    async fn catch_up(
        &mut self,
        from: Cursor,
        to: Cursor,
        out: &mut Outbox<'_>,
    ) -> Result<(), PushError> {
        let mut tracks = Tracks::new(self.push.0.log.clone());
        let mut cursor = from;
        'pages: while cursor < to {
            let page = to_records(self.push.0.log.read_feed(cursor, PAGE).await?)?;
            if page.is_empty() {
                break;
            }
            for record in page {
                if record.cursor > to {
                    break 'pages;
                }
                cursor = record.cursor;
                if record.aggregate_type == DEBATE_AGGREGATE
                    && self.wants_debate(&record.aggregate_id)
                {
                    for frame in tracks.frames(&record).await? {
                        self.offer(&frame, out, true).await?;
                    }
                }
            }
        }
        self.last = self.last.max(to);
        Ok(())
    }

    fn wants_debate(&self, id: &str) -> bool {
        self.all || self.debates.contains(id)
    }

    /// Sends `frame` if the session wants it and the caller may read it;
    /// `wait` for room (frames from the log) or fail as a slow consumer.
    async fn offer(
        &mut self,
        frame: &Frame,
        out: &mut Outbox<'_>,
        wait: bool,
    ) -> Result<(), PushError> {
        let id = frame.debate_id.as_str();
        if !self.wants_debate(id) {
            return Ok(());
        }
        if let Some(kinds) = &self.kinds
            && !kinds.contains(frame.kind)
        {
            return Ok(());
        }
        // A debate subscribed by id was checked when subscribed.
        if !self.debates.contains(id) && !self.may_read(frame).await? {
            return Ok(());
        }
        match &mut self.render {
            Some(render) => match render.frame(frame) {
                Some(html) => out.send_fragment(html.into(), wait).await,
                None => Ok(()),
            },
            None if wait => out.send_waiting(frame.json.clone()).await,
            None => out.send(frame.json.clone()),
        }
    }

    async fn may_read(&mut self, frame: &Frame) -> Result<bool, PushError> {
        if self.admin {
            return Ok(true);
        }
        if let Some(known) = self.visible.get(&frame.debate_id) {
            return Ok(*known);
        }
        // Boxed: met once per debate, and its reads would otherwise size
        // every socket's loop.
        let visible = Box::pin(self.push.0.debates.visible_to(
            &self.caller,
            frame.created_by.as_deref(),
            frame.org_id.as_deref(),
        ))
        .await?;
        if self.visible.len() >= MAX_VISIBLE {
            self.visible.clear();
        }
        self.visible.insert(frame.debate_id.clone(), visible);
        Ok(visible)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.clear();
    }
}
