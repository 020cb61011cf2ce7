//! One upgraded socket, served by one task: it writes the client's bounded
//! queue, pings on the heartbeat, and reads client messages and live
//! batches into its [`Session`].
//!
//! Close codes: 1000 normal, 1001 the service stops, 1008 a bad `since`,
//! 1011 an internal error, 4008 slow consumer (its send buffer filled),
//! 4009 missed heartbeat (no pong since the previous ping), 4401 session
//! ended (the caller's session or API key ended, or the user was disabled:
//! REST would now answer 401).

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures::future::BoxFuture;
use futures::{Sink, StreamExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::auth::Caller;
use crate::push::frames::{Frame, control};
use crate::push::hub::LiveBatch;
use crate::push::live::Live;
use crate::push::{Listening, Outbox, Push, PushError, Queue, Session, Slot, Start, Writer};

pub const NORMAL: u16 = 1000;
pub const GOING_AWAY: u16 = 1001;
pub const POLICY: u16 = 1008;
pub const INTERNAL: u16 = 1011;
pub const SLOW_CONSUMER: u16 = 4008;
pub const MISSED_HEARTBEAT: u16 = 4009;
pub const SESSION_ENDED: u16 = 4401;

/// How long a close frame may take to go out before the socket is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Why a socket stops without a code of its own.
struct Stop {
    /// Ends the socket: a child of the slot's `ended`, itself a child of
    /// the push's `closing`, so both end it, and each wake of the socket
    /// looks at this token alone (a look takes its lock; `closing` is
    /// every socket's).
    token: CancellationToken,
    ended: CancellationToken,
    closing: CancellationToken,
}

impl Stop {
    /// The close code once `token` has fired.
    fn code(&self) -> u16 {
        // `ended` fires with `closing` (its parent): ask `closing` first.
        if self.closing.is_cancelled() {
            GOING_AWAY
        } else if self.ended.is_cancelled() {
            SESSION_ENDED
        } else {
            NORMAL
        }
    }
}

/// The socket and what its writes stand at.
struct Wire {
    socket: WebSocket,
    push: Push,
    stop: CancellationToken,
    /// A heartbeat ping is to go out before the next frame.
    ping_due: bool,
    /// Messages were handed to the socket since its last finished flush.
    unflushed: bool,
}

impl Wire {
    /// Hands the queue's frames (and a due ping) to the socket and flushes
    /// them, as far as the socket takes them now; when it cannot, this
    /// task is woken once it can.
    fn poll_write(&mut self, queue: &mut Queue, cx: &mut Context<'_>) -> Result<(), axum::Error> {
        loop {
            if self.unflushed {
                match Pin::new(&mut self.socket).poll_flush(cx) {
                    Poll::Ready(done) => done?,
                    Poll::Pending => return Ok(()),
                }
                self.unflushed = false;
                queue.flushed();
            }
            // All that is queued goes in one flush.
            while self.ping_due || !queue.is_empty() {
                match Pin::new(&mut self.socket).poll_ready(cx) {
                    Poll::Ready(ready) => ready?,
                    Poll::Pending => return Ok(()),
                }
                let message = if std::mem::take(&mut self.ping_due) {
                    Message::Ping(Default::default())
                } else if let Some(frame) = queue.hand_over() {
                    self.push.sent();
                    Message::Text(Utf8Bytes::from(&*frame))
                } else {
                    break;
                };
                Pin::new(&mut self.socket).start_send(message)?;
                self.unflushed = true;
            }
            if !self.unflushed {
                return Ok(());
            }
        }
    }

    /// Whether everything handed or queued has been flushed.
    fn idle(&self, queue: &Queue) -> bool {
        !self.unflushed && !self.ping_due && queue.is_empty()
    }
}

impl Writer for Wire {
    fn make_room<'a>(&'a mut self, queue: &'a mut Queue) -> BoxFuture<'a, Result<(), PushError>> {
        Box::pin(async move {
            let stop = self.stop.clone();
            let room = poll_fn(|cx| match self.poll_write(queue, cx) {
                Err(_) => Poll::Ready(Err(PushError::Gone)),
                Ok(()) if queue.has_room() => Poll::Ready(Ok(())),
                Ok(()) => Poll::Pending,
            });
            // A client that does not read cannot hold the session.
            tokio::select! {
                written = room => written,
                () = stop.cancelled() => Err(PushError::Gone),
            }
        })
    }
}

/// What woke the socket's loop.
enum Wake {
    Delta(Arc<Frame>),
    Batch(Result<Arc<LiveBatch>, tokio::sync::broadcast::error::RecvError>),
    Client(Option<Result<Message, axum::Error>>),
    Heartbeat,
    Stopped,
    /// A write failed: the client is gone.
    Broken,
}

/// Serves one socket until either side ends it.
pub async fn serve(
    socket: WebSocket,
    push: Push,
    caller: Caller,
    (start, listening): (Start, Listening),
    slot: Slot,
) {
    let stop = Stop {
        token: slot.ended().child_token(),
        ended: slot.ended().clone(),
        closing: push.closing().clone(),
    };
    let mut wire = Wire {
        socket,
        push: push.clone(),
        stop: stop.token.clone(),
        ping_due: false,
        unflushed: false,
    };
    let mut queue = Queue::new(push.settings().send_buffer);
    // Boxed, like the loop's rarely used paths: its state would otherwise
    // sit in the socket's own future for the socket's whole life.
    let opened = Box::pin(Session::open(
        &push,
        caller,
        start,
        listening,
        &mut Outbox::new(&mut queue, &mut wire),
    ))
    .await;
    let (code, drain) = match opened {
        Ok(mut session) => {
            let code = run(&mut wire, &mut queue, &mut session, &push, &stop).await;
            (code, false)
        }
        // The error frame goes out before the close.
        Err(error) => (refusal(&push, &error, &mut queue, &mut wire), true),
    };
    close(&mut wire, &mut queue, code, drain).await;
    drop(slot);
}

/// The close code for a session that could not open (after an error frame).
fn refusal(push: &Push, error: &PushError, queue: &mut Queue, wire: &mut Wire) -> u16 {
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
    let _ = Outbox::new(queue, wire).send(frame.into());
    code
}

fn slow(push: &Push) -> u16 {
    push.dropped_slow();
    SLOW_CONSUMER
}

/// Writes what is queued and reads client messages, live batches and
/// deltas until the session ends; pings on the heartbeat. Returns the close
/// code.
async fn run(
    wire: &mut Wire,
    queue: &mut Queue,
    session: &mut Session,
    push: &Push,
    stop: &Stop,
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
    let stopped = stop.token.cancelled();
    tokio::pin!(stopped);
    let heartbeat = push.settings().heartbeat;
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
    // A tick missed while the loop was busy (a long catch-up) is not made
    // up in a burst: the client always gets a whole period to answer.
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut alive = true;
    // The last wake brought the live page's fragments: look for more before
    // writing, so that what happened at the same moment (agents answering
    // side by side, and their answers recorded) goes out as one message; up
    // to half the buffer, past which deltas would be dropped, so that a
    // flood still gets written. JSON frames gain nothing by waiting (each
    // is a message), and their clients keep the whole buffer for a burst.
    let joins = session.sends_fragments();
    let mut gathering = false;
    loop {
        // In this order: what the last round queued goes out first (unless
        // it is `gathering` and more is ready); a call's deltas are handed
        // over before the batch that records its answer, which they
        // precede. Each batch wakes every socket: looked at first, it is
        // often all a wake polls before the round that finds nothing; the
        // client, the clock and the stop token come after (each look takes
        // a lock), and the task's budget still yields to them under a flood
        // of batches.
        let wake = poll_fn(|cx| {
            let gather = std::mem::take(&mut gathering);
            if !gather && wire.poll_write(queue, cx).is_err() {
                return Poll::Ready(Wake::Broken);
            }
            if let Poll::Ready(Some(frame)) = deltas.poll_next_unpin(cx) {
                return Poll::Ready(Wake::Delta(frame));
            }
            if let Poll::Ready(Some(received)) = batches.poll_next_unpin(cx) {
                return Poll::Ready(Wake::Batch(received));
            }
            if gather && wire.poll_write(queue, cx).is_err() {
                return Poll::Ready(Wake::Broken);
            }
            if let Poll::Ready(message) = wire.socket.poll_next_unpin(cx) {
                return Poll::Ready(Wake::Client(message));
            }
            if ticks.poll_tick(cx).is_ready() {
                return Poll::Ready(Wake::Heartbeat);
            }
            if stopped.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Wake::Stopped);
            }
            Poll::Pending
        })
        .await;
        let brought_frames = matches!(wake, Wake::Delta(_) | Wake::Batch(_));
        let mut out = Outbox::new(queue, wire);
        let handled = match wake {
            Wake::Delta(frame) => session.delta(&frame, &mut out).await,
            Wake::Batch(received) => session.live(received, &mut out).await,
            // Boxed: client messages are rare, and what they may do
            // (subscribe, read the log) would otherwise size the loop.
            Wake::Client(Some(Ok(Message::Text(text)))) => {
                Box::pin(session.message(text.as_str(), &mut out)).await
            }
            Wake::Client(Some(Ok(Message::Binary(_)))) => {
                Box::pin(session.message("", &mut out)).await
            }
            Wake::Client(Some(Ok(Message::Pong(_)))) => {
                alive = true;
                Ok(())
            }
            Wake::Client(Some(Ok(Message::Ping(_)))) => Ok(()),
            Wake::Client(Some(Ok(Message::Close(_)) | Err(_)) | None) | Wake::Broken => {
                return NORMAL;
            }
            Wake::Heartbeat => {
                // No pong since the previous ping.
                if !std::mem::replace(&mut alive, false) {
                    return MISSED_HEARTBEAT;
                }
                wire.ping_due = true;
                Ok(())
            }
            Wake::Stopped => return stop.code(),
        };
        gathering = joins && brought_frames && queue.has_room_for_extras();
        match handled {
            Ok(()) => {}
            Err(PushError::Slow) => return slow(push),
            Err(PushError::Gone) if stop.token.is_cancelled() => return stop.code(),
            Err(PushError::Gone) => return NORMAL,
            Err(error) => {
                tracing::warn!(error = %crate::errors::chain(&error), "WebSocket session failed");
                return INTERNAL;
            }
        }
    }
}

/// Sends the close frame with `code`, after what is queued when `drain`;
/// within [`CLOSE_GRACE`], and cut short when the socket was stopped.
async fn close(wire: &mut Wire, queue: &mut Queue, code: u16, drain: bool) {
    let reason = match code {
        SLOW_CONSUMER => "slow consumer",
        MISSED_HEARTBEAT => "missed heartbeat",
        SESSION_ENDED => "session ended",
        GOING_AWAY => "service stopping",
        POLICY => "bad request",
        INTERNAL => "internal error",
        _ => "",
    };
    let closing = async {
        if drain {
            poll_fn(|cx| match wire.poll_write(queue, cx) {
                Ok(()) if !wire.idle(queue) => Poll::Pending,
                _ => Poll::Ready(()),
            })
            .await;
        }
        let close = Message::Close(Some(CloseFrame {
            code,
            reason: Utf8Bytes::from_static(reason),
        }));
        let _ = wire.socket.send(close).await;
    };
    let _ = tokio::time::timeout(CLOSE_GRACE, closing).await;
}
