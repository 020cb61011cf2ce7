//! The push's side of the bus: a consumer without a stored checkpoint that
//! turns each batch of committed events into frames once and broadcasts
//! them to every socket of this replica.
//!
//! It starts at the feed head (a restart has no clients to catch up: they
//! reconnect with `since` and read the log), and every replica runs one
//! (NATS gives each replica every event), so clients need no sticky
//! sessions. A socket never slows the hub: the broadcast keeps a bounded
//! ring, and a socket that falls behind it reads what it missed from the
//! log ([`super::session`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use agon_aggregates::debate::DebateEvent;
use agon_projections::debates::DEBATE_AGGREGATE;
use agon_projections::{Cursor, EventRecord};
use async_trait::async_trait;
use tokio::sync::broadcast;

use super::ends::Ends;
use super::frames::{Frame, Track};
use super::live::DeltaCount;
use crate::bus::{Consumer, ConsumerError};
use crate::store::{EventLog, StoreError};

/// Batches kept for sockets that are briefly behind.
const RING: usize = 1_024;
/// Debates whose track the hub keeps; past it the map starts afresh (a
/// track is rebuilt from the log when needed).
const MAX_TRACKS: usize = 4_096;

/// The frames of a contiguous run of feed events: the first event follows
/// `from`, the last is `to`.
#[derive(Debug)]
pub struct LiveBatch {
    pub from: Cursor,
    pub to: Cursor,
    pub frames: Vec<Frame>,
}

/// Tracks of debates, rebuilt from the log for debates first met mid-stream.
#[derive(Debug)]
pub struct Tracks {
    log: EventLog,
    map: HashMap<String, Track>,
}

impl Tracks {
    pub fn new(log: EventLog) -> Self {
        Self {
            log,
            map: HashMap::new(),
        }
    }

    /// The frames of `record` (none for other aggregates).
    pub async fn frames(&mut self, record: &EventRecord) -> Result<Vec<Frame>, ConsumerError> {
        if record.aggregate_type != DEBATE_AGGREGATE {
            return Ok(Vec::new());
        }
        let event = decode(record)?;
        let id = record.aggregate_id.clone();
        if !self.map.contains_key(&id) {
            if self.map.len() >= MAX_TRACKS {
                self.map.clear();
            }
            let track = self.rebuild(&id, record.sequence).await?;
            self.map.insert(id.clone(), track);
        }
        let Some(track) = self.map.get_mut(&id) else {
            return Ok(Vec::new());
        };
        let frames = track.frames(&id, record.cursor, &event);
        if track.ended {
            self.map.remove(&id);
        }
        Ok(frames)
    }

    /// The track of debate `id` from its events before `sequence`.
    async fn rebuild(&self, id: &str, sequence: i64) -> Result<Track, ConsumerError> {
        let mut track = Track::default();
        if sequence <= 1 {
            return Ok(track);
        }
        for earlier in self.log.load_stream(DEBATE_AGGREGATE, id, 0).await? {
            if earlier.sequence >= sequence {
                break;
            }
            let earlier = earlier.into_record()?;
            track.frames(id, earlier.cursor, &decode(&earlier)?);
        }
        Ok(track)
    }
}

pub fn decode(record: &EventRecord) -> Result<DebateEvent, ConsumerError> {
    record
        .decode::<DebateEvent>()
        .map_err(|error| ConsumerError::undecodable(record, error))
}

/// The broadcast and where it stands in the feed.
#[derive(Debug)]
pub struct Hub {
    sender: broadcast::Sender<Arc<LiveBatch>>,
    /// The cursor of the last batch sent, under the lock that sends it,
    /// so that a subscriber learns exactly where its receiver begins.
    cursor: Mutex<Cursor>,
    tracks: tokio::sync::Mutex<Tracks>,
    running: AtomicBool,
    /// Streamed text (`agent.delta`): not in the log, so not in the batches;
    /// a socket behind this ring loses the oldest pieces.
    deltas: broadcast::Sender<Arc<Frame>>,
    /// Delta frames begun and finished: a socket looks at its ring only
    /// when a send has begun since it last found it empty
    /// ([`super::live::Deltas`]).
    delta_count: Arc<DeltaCount>,
    /// Sockets and tickets to end when an account event ends their access.
    ends: Arc<Ends>,
}

impl Hub {
    pub fn new(log: EventLog, delta_ring: usize, ends: Arc<Ends>) -> Self {
        Self {
            ends,
            deltas: broadcast::channel(delta_ring.max(1)).0,
            delta_count: Arc::default(),
            sender: broadcast::channel(RING).0,
            cursor: Mutex::new(Cursor::START),
            tracks: tokio::sync::Mutex::new(Tracks::new(log)),
            running: AtomicBool::new(false),
        }
    }

    /// A receiver of every later batch, and the cursor it starts after.
    pub fn subscribe(&self) -> (broadcast::Receiver<Arc<LiveBatch>>, Cursor) {
        let cursor = self.cursor.lock().unwrap_or_else(PoisonError::into_inner);
        (self.sender.subscribe(), *cursor)
    }

    /// A receiver of every later delta frame.
    pub fn deltas(&self) -> broadcast::Receiver<Arc<Frame>> {
        self.deltas.subscribe()
    }

    /// Hands a delta frame to every socket of this replica.
    pub fn send_delta(&self, frame: Frame) {
        self.delta_count.send(&self.deltas, Arc::new(frame));
    }

    /// The count of delta frames sent, for sockets' [`super::live::Deltas`].
    pub fn delta_count(&self) -> Arc<DeltaCount> {
        Arc::clone(&self.delta_count)
    }

    /// Where the hub stands in the feed now.
    pub fn cursor(&self) -> Cursor {
        *self.cursor.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the hub follows the bus (set while its consumer is placed).
    pub fn running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    pub fn set_running(&self, running: bool) {
        self.running.store(running, Ordering::Release);
    }

    /// Starts the hub at `head`, before its consumer is handed to the bus.
    pub fn place(&self, head: Cursor) {
        *self.cursor.lock().unwrap_or_else(PoisonError::into_inner) = head;
    }

    fn send(&self, to: Cursor, frames: Vec<Frame>) {
        let mut cursor = self.cursor.lock().unwrap_or_else(PoisonError::into_inner);
        let batch = LiveBatch {
            from: *cursor,
            to,
            frames,
        };
        // No receiver is fine: nobody is connected.
        let _ = self.sender.send(Arc::new(batch));
        *cursor = to;
    }
}

/// The hub as the bus sees it.
#[derive(Debug)]
pub struct HubConsumer(pub Arc<Hub>);

#[async_trait]
impl Consumer for HubConsumer {
    fn name(&self) -> &str {
        "ws_push"
    }

    async fn checkpoint(&self) -> Result<Cursor, StoreError> {
        Ok(self.0.cursor())
    }

    async fn handle(&self, batch: &[EventRecord]) -> Result<(), ConsumerError> {
        let Some(last) = batch.last() else {
            return Ok(());
        };
        let mut frames = Vec::new();
        {
            let mut tracks = self.0.tracks.lock().await;
            for (done, record) in batch.iter().enumerate() {
                let framed = match self.0.ends.observe(record) {
                    Ok(()) => tracks.frames(record).await,
                    Err(error) => Err(error),
                };
                match framed {
                    Ok(more) => frames.extend(more),
                    Err(error) => {
                        // What came before is sent; the bus retries the rest.
                        if let Some(previous) = done.checked_sub(1) {
                            self.0.send(batch[previous].cursor, frames);
                        }
                        return Err(error);
                    }
                }
            }
        }
        self.0.send(last.cursor, frames);
        Ok(())
    }

    async fn pass(&self, event: &EventRecord) -> Result<(), StoreError> {
        self.0.send(event.cursor, Vec::new());
        Ok(())
    }

    /// Nothing to redo: a missed frame is read from the log on reconnect.
    async fn retry(&self, _event: &EventRecord) -> Result<(), ConsumerError> {
        Ok(())
    }
}
