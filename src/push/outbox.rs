//! A socket's bounded queue of frames to write, and the handle a session
//! sends through. The queue belongs to the socket's one task, which writes
//! it out between its waits: no channel and no second task stand between
//! a session and its socket, so a frame costs one wake of one task.
//!
//! HTML fragments (the live page's) queued one after another go out as one
//! message: a page swaps all of a message's fragments in one go, so agents
//! streaming at once cost each watching page one parse and one paint, not
//! one per agent. But never two fragments replacing the same element: a
//! page resolves a message's targets before it swaps, so the second would
//! land on the element the first took out (a debate's end came with its
//! first vote's header and left the page saying "running", and three votes
//! showed one); such a fragment starts the next message instead.

use std::collections::VecDeque;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::PushError;

/// Frames waiting for the socket, and frames handed to it but not yet
/// flushed: together bounded by `SERVICE_WS_SEND_BUFFER` (a fragment
/// counts as a frame, joined or not).
#[derive(Debug)]
pub struct Queue {
    frames: VecDeque<Queued>,
    /// Handed to the socket since it last finished a flush.
    unflushed: usize,
    capacity: usize,
}

/// A queued message, or part of one.
#[derive(Debug)]
struct Queued {
    text: Arc<str>,
    /// An HTML fragment, joined with the fragments next to it.
    fragment: bool,
    /// The ids of the elements the fragment replaces whole.
    replaces: Vec<Box<str>>,
}

impl Queue {
    pub fn new(capacity: usize) -> Self {
        Self {
            frames: VecDeque::new(),
            unflushed: 0,
            capacity: capacity.max(1),
        }
    }

    /// The next message to hand to the socket: a frame, or the fragments
    /// at the front joined (each counted as unflushed).
    pub fn hand_over(&mut self) -> Option<Arc<str>> {
        let first = self.frames.pop_front()?;
        self.unflushed += 1;
        if !first.fragment || !self.frames.front().is_some_and(|next| next.fragment) {
            return Some(first.text);
        }
        let mut joined = String::from(&*first.text);
        let mut replaced = first.replaces;
        while let Some(next) = self.frames.pop_front_if(|next| {
            next.fragment && !next.replaces.iter().any(|id| replaced.contains(id))
        }) {
            joined.push_str(&next.text);
            replaced.extend(next.replaces);
            self.unflushed += 1;
        }
        Some(joined.into())
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// The socket has flushed every frame it was handed.
    pub fn flushed(&mut self) {
        self.unflushed = 0;
    }

    /// Whether another frame fits.
    pub fn has_room(&self) -> bool {
        self.used() < self.capacity
    }

    /// Whether less than half of the buffer is taken: room for frames that
    /// may be dropped (deltas) without crowding out the recorded ones.
    pub fn has_room_for_extras(&self) -> bool {
        self.used() * 2 < self.capacity
    }

    fn used(&self) -> usize {
        self.frames.len() + self.unflushed
    }
}

/// Where a queue's frames go: the socket, written by the task that owns
/// both.
pub trait Writer: Send {
    /// Writes and flushes frames from the front of `queue` until another
    /// fits; [`PushError::Gone`] when the socket or the session ends first.
    fn make_room<'a>(&'a mut self, queue: &'a mut Queue) -> BoxFuture<'a, Result<(), PushError>>;
}

/// What a session sends through: the socket's queue, and its writer for
/// the frames that wait for room.
pub struct Outbox<'a> {
    queue: &'a mut Queue,
    writer: &'a mut dyn Writer,
}

impl<'a> Outbox<'a> {
    pub fn new(queue: &'a mut Queue, writer: &'a mut dyn Writer) -> Self {
        Self { queue, writer }
    }

    /// Queues `frame`; a full queue is a slow consumer.
    pub fn send(&mut self, frame: Arc<str>) -> Result<(), PushError> {
        self.push(frame, false)
    }

    fn push(&mut self, text: Arc<str>, fragment: bool) -> Result<(), PushError> {
        if !self.queue.has_room() {
            return Err(PushError::Slow);
        }
        let replaces = if fragment {
            replaced_ids(&text)
        } else {
            Vec::new()
        };
        self.queue.frames.push_back(Queued {
            text,
            fragment,
            replaces,
        });
        Ok(())
    }

    /// See [`Queue::has_room_for_extras`].
    pub fn has_room_for_extras(&self) -> bool {
        self.queue.has_room_for_extras()
    }

    /// Queues `frame` once there is room, writing to make it: for frames
    /// read from the log, which the client asked for and which would
    /// otherwise overflow a small buffer at once.
    pub async fn send_waiting(&mut self, frame: Arc<str>) -> Result<(), PushError> {
        self.wait_for_room().await?;
        self.push(frame, false)
    }

    /// Queues an HTML fragment, to go out with those next to it; as
    /// [`Self::send_waiting`] when `wait`, else as [`Self::send`].
    pub async fn send_fragment(&mut self, html: Arc<str>, wait: bool) -> Result<(), PushError> {
        if wait {
            self.wait_for_room().await?;
        }
        self.push(html, true)
    }

    async fn wait_for_room(&mut self) -> Result<(), PushError> {
        while !self.queue.has_room() {
            self.writer.make_room(self.queue).await?;
        }
        Ok(())
    }
}

/// The ids of the top-level elements `html` replaces whole: those marked
/// `hx-swap-oob="true"` (an append or an inner swap leaves its target in
/// place, so two of them in one message both land).
fn replaced_ids(html: &str) -> Vec<Box<str>> {
    const MARK: &str = " hx-swap-oob=\"true\"";
    const ID: &str = " id=\"";
    let mut ids = Vec::new();
    for (at, _) in html.match_indices(MARK) {
        let tag = html[..at].rfind('<').map_or("", |open| &html[open..at]);
        if let Some(start) = tag.find(ID).map(|i| i + ID.len())
            && let Some(len) = tag[start..].find('"')
        {
            ids.push(tag[start..start + len].into());
        }
    }
    ids
}

impl std::fmt::Debug for Outbox<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes one frame per call, as a socket that always has room would.
    struct Drain(Vec<Arc<str>>);

    impl Writer for Drain {
        fn make_room<'a>(
            &'a mut self,
            queue: &'a mut Queue,
        ) -> BoxFuture<'a, Result<(), PushError>> {
            Box::pin(async move {
                self.0.extend(queue.hand_over());
                queue.flushed();
                Ok(())
            })
        }
    }

    #[tokio::test]
    async fn a_full_queue_is_slow_unless_the_sender_waits_for_room() {
        let mut queue = Queue::new(2);
        let mut drain = Drain(Vec::new());
        let mut out = Outbox::new(&mut queue, &mut drain);
        assert!(out.has_room_for_extras());
        out.send("a".into()).unwrap();
        assert!(!out.has_room_for_extras(), "half full");
        out.send("b".into()).unwrap();
        assert!(matches!(out.send("c".into()), Err(PushError::Slow)));
        out.send_waiting("c".into()).await.unwrap();
        assert_eq!(drain.0, vec![Arc::<str>::from("a")]);
        let rest: Vec<_> = std::iter::from_fn(|| queue.hand_over()).collect();
        assert_eq!(rest, vec![Arc::<str>::from("b"), Arc::from("c")]);
        assert!(!queue.has_room(), "handed but not flushed still counts");
        queue.flushed();
        assert!(queue.has_room());
    }

    #[tokio::test]
    async fn fragments_side_by_side_go_as_one_message_and_frames_alone() {
        let mut queue = Queue::new(8);
        let mut drain = Drain(Vec::new());
        let mut out = Outbox::new(&mut queue, &mut drain);
        out.send_fragment("<a>".into(), false).await.unwrap();
        out.send_fragment("<b>".into(), true).await.unwrap();
        out.send("{}".into()).unwrap();
        out.send_fragment("<c>".into(), false).await.unwrap();
        out.send("{}".into()).unwrap();
        out.send("{}".into()).unwrap();
        let messages: Vec<_> = std::iter::from_fn(|| queue.hand_over()).collect();
        let expected: Vec<Arc<str>> = ["<a><b>", "{}", "<c>", "{}", "{}"].map(Arc::from).into();
        assert_eq!(messages, expected);
        assert_eq!(queue.used(), 6, "each fragment counts against the buffer");
    }

    #[tokio::test]
    async fn a_fragment_replacing_an_element_already_in_the_message_starts_the_next() {
        let mut queue = Queue::new(16);
        let mut drain = Drain(Vec::new());
        let mut out = Outbox::new(&mut queue, &mut drain);
        let header = |status: &str| {
            format!(r#"<dl class="facts" id="facts" hx-swap-oob="true"><dd>{status}</dd></dl>"#)
        };
        let votes = |n: u32| {
            format!(
                r#"<section id="votes" aria-labelledby="votes-title" hx-swap-oob="true">{n}</section>"#
            )
        };
        let said = r#"<div hx-swap-oob="innerHTML:#announcer">said</div>"#;
        let piece = r#"<div hx-swap-oob="beforeend:#t-1">more</div>"#;
        for fragment in [
            header("running") + &votes(1) + said,
            votes(2) + said,
            piece.to_owned(),
            piece.to_owned(),
            header("completed") + said,
        ] {
            out.send_fragment(fragment.into(), false).await.unwrap();
        }
        let messages: Vec<_> = std::iter::from_fn(|| queue.hand_over()).collect();
        let expected = [
            header("running") + &votes(1) + said,
            votes(2) + said + piece + piece + &header("completed") + said,
        ];
        assert_eq!(messages, expected.clone().map(Arc::<str>::from).to_vec());
        assert_eq!(
            replaced_ids(&expected[1]),
            ["votes", "facts"].map(Box::<str>::from).to_vec()
        );
    }
}
