//! One upgraded socket: a writer task drains the client's bounded outbox
//! and pings on the heartbeat, while the socket's own task reads client
//! messages and live batches into its [`Session`].
//!
//! Close codes: 1000 normal, 1001 the service stops, 1008 a bad `since`,
//! 1011 an internal error, 4008 slow consumer (its send buffer filled),
//! 4009 missed heartbeat (no pong since the previous ping), 4401 session
//! ended (the caller's session or API key ended, or the user was disabled:
//! REST would now answer 401).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::auth::Caller;
use crate::push::frames::control;
use crate::push::live::Live;
use crate::push::{Listening, Outbox, Push, PushError, Session, Slot, Start};

pub const NORMAL: u16 = 1000;
pub const GOING_AWAY: u16 = 1001;
pub const POLICY: u16 = 1008;
pub const INTERNAL: u16 = 1011;
pub const SLOW_CONSUMER: u16 = 4008;
pub const MISSED_HEARTBEAT: u16 = 4009;
pub const SESSION_ENDED: u16 = 4401;

/// How long a close frame may take to go out before the socket is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// What the writer and the reader share.
struct Shared {
    /// A pong came since the last ping.
    alive: AtomicBool,
    /// The close code to send (0: none chosen yet).
    code: AtomicU16,
    /// Ends the reader and the writer (after which it sends the close
    /// frame). A child of the slot's `ended`, itself a child of the push's
    /// `closing`: both end it, and each wake of the socket looks at this
    /// token alone (a look takes its lock; `closing` is every socket's).
    stop: CancellationToken,
    ended: CancellationToken,
    closing: CancellationToken,
}

impl Shared {
    fn close(&self, code: u16) {
        let _ = self
            .code
            .compare_exchange(0, code, Ordering::AcqRel, Ordering::Acquire);
        self.stop.cancel();
    }

    /// The close code: the one chosen, else why `stop` fired without one.
    fn code(&self) -> u16 {
        match self.code.load(Ordering::Acquire) {
            0 if !self.stop.is_cancelled() => NORMAL,
            // `ended` fires with `closing` (its parent): ask `closing` first.
            0 if self.closing.is_cancelled() => GOING_AWAY,
            0 if self.ended.is_cancelled() => SESSION_ENDED,
            0 => NORMAL,
            code => code,
        }
    }
}

/// Serves one socket until either side ends it.
pub async fn serve(
    socket: WebSocket,
    push: Push,
    caller: Caller,
    (start, listening): (Start, Listening),
    slot: Slot,
) {
    let (sink, mut stream) = socket.split();
    let (out, queue) = Outbox::new(push.settings().send_buffer);
    let shared = Arc::new(Shared {
        alive: AtomicBool::new(true),
        code: AtomicU16::new(0),
        stop: slot.ended().child_token(),
        ended: slot.ended().clone(),
        closing: push.closing().clone(),
    });
    let _slot = slot;
    let writer = tokio::spawn(write(sink, queue, push.clone(), shared.clone()));
    // Boxed, like the loop's rarely used paths: its state would otherwise
    // sit in the socket's own future for the socket's whole life.
    match Box::pin(Session::open(&push, caller, start, listening, &out)).await {
        Ok(mut session) => {
            let code = read(&mut stream, &mut session, &push, &out, &shared).await;
            shared.close(code);
        }
        Err(error) => {
            let code = refusal(&push, &error, &out);
            // Let the error frame go out before the close.
            drop(out);
            shared.code.store(code, Ordering::Release);
        }
    }
    let _ = writer.await;
}

/// The close code for a session that could not open (after an error frame).
fn refusal(push: &Push, error: &PushError, out: &Outbox) -> u16 {
    let code = match error {
        PushError::UnknownPosition(_) => POLICY,
        PushError::Slow => return slow(push),
        PushError::Gone => return NORMAL,
        _ => {
            tracing::warn!(error = %crate::errors::chain(error), "cannot open a WebSocket session");
            INTERNAL
        }
    };
    let kind = if code == POLICY {
        "bad_since"
    } else {
        "internal"
    };
    let frame = control(
        "error",
        json!({"code": kind, "error": error.to_string()}),
        None,
        chrono::Utc::now(),
    );
    let _ = out.send(frame.into());
    code
}

fn slow(push: &Push) -> u16 {
    push.dropped_slow();
    SLOW_CONSUMER
}

/// Reads client messages and live batches until the session ends; returns
/// the close code.
async fn read(
    stream: &mut SplitStream<WebSocket>,
    session: &mut Session,
    push: &Push,
    out: &Outbox,
    shared: &Shared,
) -> u16 {
    let Some(Live {
        mut batches,
        mut deltas,
    }) = session.take_live()
    else {
        return INTERNAL;
    };
    // Made once: a fresh wait per round would register and unregister
    // with the token every round.
    let stop = shared.stop.cancelled();
    tokio::pin!(stop);
    loop {
        // Biased: a call's deltas are handed over before the batch that
        // records its answer, which they precede. Each batch wakes every
        // socket: looked at first, it is often all a wake polls before the
        // round that finds nothing; the client and the stop token come
        // after (each look takes a lock), and the task's budget still
        // yields to them under a flood of batches.
        let handled = tokio::select! {
            biased;
            Some(frame) = deltas.next() => session.delta(&frame, out).await,
            Some(received) = batches.next() => session.live(received, out).await,
            message = stream.next() => match message {
                // Boxed: client messages are rare, and what they may do
                // (subscribe, read the log) would otherwise size the loop.
                Some(Ok(Message::Text(text))) => Box::pin(session.message(text.as_str(), out)).await,
                Some(Ok(Message::Pong(_))) => {
                    shared.alive.store(true, Ordering::Release);
                    Ok(())
                }
                Some(Ok(Message::Binary(_))) => Box::pin(session.message("", out)).await,
                Some(Ok(Message::Ping(_))) => Ok(()),
                Some(Ok(Message::Close(_)) | Err(_)) | None => return NORMAL,
            },
            () = &mut stop => return shared.code(),
        };
        match handled {
            Ok(()) => {}
            Err(PushError::Slow) => return slow(push),
            Err(PushError::Gone) => return NORMAL,
            Err(error) => {
                tracing::warn!(error = %crate::errors::chain(&error), "WebSocket session failed");
                return INTERNAL;
            }
        }
    }
}

/// Writes queued frames and heartbeat pings until stopped or the queue
/// ends, then the close frame.
async fn write(
    mut sink: SplitSink<WebSocket, Message>,
    mut queue: mpsc::Receiver<Arc<str>>,
    push: Push,
    shared: Arc<Shared>,
) {
    let heartbeat = push.settings().heartbeat;
    let frames = async {
        let mut ticks =
            tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
        loop {
            tokio::select! {
                frame = queue.recv() => {
                    let Some(frame) = frame else { return };
                    if sink.send(Message::Text(Utf8Bytes::from(&*frame))).await.is_err() {
                        return;
                    }
                    push.sent();
                }
                _ = ticks.tick() => {
                    if !shared.alive.swap(false, Ordering::AcqRel) {
                        shared.close(MISSED_HEARTBEAT);
                        return;
                    }
                    if sink.send(Message::Ping(Default::default())).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    // A stop cuts a write in progress short: a client that does not read
    // cannot hold the writer.
    tokio::select! {
        () = frames => {}
        () = shared.stop.cancelled() => {}
    }
    let code = shared.code();
    let reason = match code {
        SLOW_CONSUMER => "slow consumer",
        MISSED_HEARTBEAT => "missed heartbeat",
        SESSION_ENDED => "session ended",
        GOING_AWAY => "service stopping",
        POLICY => "bad request",
        INTERNAL => "internal error",
        _ => "",
    };
    let close = Message::Close(Some(CloseFrame {
        code,
        reason: Utf8Bytes::from_static(reason),
    }));
    let _ = tokio::time::timeout(CLOSE_GRACE, sink.send(close)).await;
}
