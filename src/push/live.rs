//! What a socket's loop waits on beside its client: this replica's live
//! batches and delta frames, as streams that stay registered between the
//! loop's rounds.
//!
//! Every socket of a replica waits on the same two rings, and a look at a
//! ring that has nothing new takes the ring's lock (tokio's broadcast
//! registers the waiter under it). A `recv` made afresh each round left
//! the wait list and joined it again whenever another branch won; and
//! looking at the delta ring on every wake (each batch wakes every socket)
//! took that lock twice more per socket per frame, all on the same lock.
//! Here the waits persist, and the delta ring is looked at only when the
//! hub has sent a delta since the socket last found it empty.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use tokio::sync::broadcast::{self, error::RecvError};

use super::Push;
use super::frames::Frame;
use super::hub::LiveBatch;

/// A socket's live streams (see the module's comment).
pub struct Live {
    /// Every later batch, or why none came ([`super::Session::live`] deals
    /// with it).
    pub batches: BoxStream<'static, Result<Arc<LiveBatch>, RecvError>>,
    /// Every later delta frame; pieces lost to a full ring are skipped (and
    /// counted). Ends when the hub is gone.
    pub deltas: Deltas,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live").finish_non_exhaustive()
    }
}

impl Live {
    pub(super) fn new(
        batches: broadcast::Receiver<Arc<LiveBatch>>,
        deltas: broadcast::Receiver<Arc<Frame>>,
        push: Push,
    ) -> Self {
        let batches = futures::stream::unfold(batches, |mut receiver| async move {
            let received = receiver.recv().await;
            Some((received, receiver))
        });
        let counted = push.clone();
        let ring = futures::stream::unfold(deltas, move |mut receiver| {
            let push = counted.clone();
            async move {
                loop {
                    // Unconstrained: a wait that ends for want of budget
                    // would not be registered, and [`Deltas`] relies on it.
                    match tokio::task::unconstrained(receiver.recv()).await {
                        Ok(frame) => return Some((frame, receiver)),
                        Err(RecvError::Lagged(lost)) => push.dropped_deltas(lost),
                        Err(RecvError::Closed) => return None,
                    }
                }
            }
        });
        Self {
            batches: batches.boxed(),
            deltas: Deltas {
                ring: ring.fuse().boxed(),
                push,
                waiting_at: None,
            },
        }
    }
}

/// The delta frames of this replica for one socket, looked at only when
/// the hub's count of sent deltas has moved since the ring was last found
/// empty. Sound because an empty look leaves this task registered in the
/// ring's wait list (the wait is unconstrained and persists), and the hub
/// counts a delta before sending it: a send wakes the task, which then sees
/// the count moved. For use by one task only, as its waker stays the one
/// registered.
pub struct Deltas {
    ring: BoxStream<'static, Arc<Frame>>,
    push: Push,
    /// The hub's count when the ring was last found empty.
    waiting_at: Option<u64>,
}

impl Stream for Deltas {
    type Item = Arc<Frame>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        // The task's budget, as the ring's own wait would have spent it: a
        // flood of deltas must not keep the socket from its other branches.
        let budget = ready!(tokio::task::coop::poll_proceed(cx));
        let sent = self.push.0.hub.deltas_sent();
        if self.waiting_at == Some(sent) {
            return Poll::Pending;
        }
        let polled = self.ring.poll_next_unpin(cx);
        self.waiting_at = polled.is_pending().then_some(sent);
        if polled.is_ready() {
            budget.made_progress();
        }
        polled
    }
}
