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
//! hub has begun to send a delta since the socket last found it empty.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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
    pub deltas: Deltas<Arc<Frame>>,
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
        let count = push.0.hub.delta_count();
        Self {
            batches: batches.boxed(),
            deltas: Deltas::new(deltas, count, move |lost| push.dropped_deltas(lost)),
        }
    }
}

/// The hub's count of delta frames it began and finished sending.
#[derive(Debug, Default)]
pub struct DeltaCount {
    started: AtomicU64,
    finished: AtomicU64,
}

impl DeltaCount {
    /// Sends `value` on `ring`, counted before and after.
    pub fn send<T>(&self, ring: &broadcast::Sender<T>, value: T) {
        self.started.fetch_add(1, Ordering::SeqCst);
        // No receiver is fine: nobody is connected.
        let _ = ring.send(value);
        self.finished.fetch_add(1, Ordering::SeqCst);
    }

    /// How many sends began, when every one that began has finished (so
    /// each is in the ring); `None` while one is under way.
    fn quiet(&self) -> Option<u64> {
        let finished = self.finished.load(Ordering::SeqCst);
        let started = self.started.load(Ordering::SeqCst);
        (started == finished).then_some(started)
    }

    fn started(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }
}

/// The delta frames of this replica for one socket, looked at only when a
/// send has begun since the ring was last found empty. Sound because the
/// count is taken before the look and only when no send is under way (so
/// every send it counts is in the ring, and the look sees it), an empty
/// look leaves this task registered in the ring's wait list (the wait is
/// unconstrained and persists), and a later send begins by moving the
/// count: its wake finds the count moved. For use by one task only, as its
/// waker stays the one registered.
pub struct Deltas<T> {
    ring: BoxStream<'static, T>,
    count: Arc<DeltaCount>,
    /// The count of begun sends when the ring was last found empty.
    waiting_at: Option<u64>,
}

impl<T: Clone + Send + 'static> Deltas<T> {
    /// The frames of `receiver`; `lost` counts pieces that fell out of the
    /// ring before this socket read them.
    pub fn new(
        receiver: broadcast::Receiver<T>,
        count: Arc<DeltaCount>,
        lost: impl Fn(u64) + Send + Sync + 'static,
    ) -> Self {
        let lost = Arc::new(lost);
        let ring = futures::stream::unfold(receiver, move |mut receiver| {
            let lost = Arc::clone(&lost);
            async move {
                loop {
                    // Unconstrained: a wait that ends for want of budget
                    // would not be registered, and the gate relies on it.
                    match tokio::task::unconstrained(receiver.recv()).await {
                        Ok(frame) => return Some((frame, receiver)),
                        Err(RecvError::Lagged(missed)) => lost(missed),
                        Err(RecvError::Closed) => return None,
                    }
                }
            }
        });
        Self {
            ring: ring.fuse().boxed(),
            count,
            waiting_at: None,
        }
    }
}

impl<T> Stream for Deltas<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        // The task's budget, as the ring's own wait would have spent it: a
        // flood of deltas must not keep the socket from its other branches.
        let budget = ready!(tokio::task::coop::poll_proceed(cx));
        if let Some(at) = self.waiting_at
            && self.count.started() == at
        {
            return Poll::Pending;
        }
        let quiet = self.count.quiet();
        let polled = self.ring.poll_next_unpin(cx);
        if polled.is_pending() {
            self.waiting_at = quiet;
        } else {
            self.waiting_at = None;
            budget.made_progress();
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Every delta reaches a socket whose task is woken all the while by
    /// something else (batches): with a gate that counted a send before it
    /// was in the ring, a look between the two registered the count of a
    /// send it had not seen, and that send's wake was then taken for none.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_delta_arrives_while_other_wakes_keep_coming() {
        let count = Arc::new(DeltaCount::default());
        let (ring, receiver) = broadcast::channel::<u64>(1_024);
        let (other, mut others) = broadcast::channel::<()>(4);
        let mut deltas = Deltas::new(receiver, Arc::clone(&count), |_| {});
        let (got, mut arrived) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    biased;
                    Some(value) = deltas.next() => if got.send(value).is_err() { return },
                    _ = others.recv() => {}
                }
            }
        });
        let stop = tokio_util::sync::CancellationToken::new();
        let spamming = stop.clone();
        tokio::spawn(async move {
            while !spamming.is_cancelled() {
                let _ = other.send(());
                tokio::task::yield_now().await;
            }
        });
        for value in 0..20_000u64 {
            count.send(&ring, value);
            let received = tokio::time::timeout(Duration::from_secs(5), arrived.recv()).await;
            assert_eq!(
                received.ok().flatten(),
                Some(value),
                "delta {value} did not arrive"
            );
        }
        stop.cancel();
    }
}
