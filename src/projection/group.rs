//! Every read model of the process as one consumer of the bus: one
//! subscription, each event decoded once, and one transaction per batch for
//! all of them, instead of one of each per read model.
//!
//! Each read model still keeps its own stream guards and checkpoint, written
//! in that transaction, so it can be rebuilt, inspected and resumed alone. A
//! read model that meets an event it cannot decode leaves the group: what it
//! applied before that event commits, and it goes on as a consumer of its
//! own, which stops at that event and reports the stall, while the others
//! carry on.

use std::sync::{Arc, Mutex, PoisonError};

use agon_projections::{Cursor, EventRecord};
use async_trait::async_trait;

use super::{IdleCheckpoint, Undecodable, checkpoint_name, guards};
use crate::bus::{Consumer, ConsumerError, after_checkpoint};
use crate::store::db::{Tx, with_tx};
use crate::store::{EventLog, StoreError};

/// The group's name: its bus subscription and durable.
pub const READ_MODELS: &str = "read_models";

/// A read model's part of a batch transaction. Each one is also a consumer
/// of its own (a rebuild, or a read model that left the group).
#[async_trait]
pub trait Member: Consumer {
    /// Whether `event` can change the read model (or stop it).
    fn relevant(&self, event: &EventRecord) -> bool;

    /// Folds `events` (each after its checkpoint) into the read model in
    /// `tx`. On an event it cannot decode, answers its index in `events`;
    /// `tx` then holds part of the batch and must be dropped.
    async fn fold(
        &self,
        tx: &mut Tx,
        events: &[EventRecord],
    ) -> Result<Option<Undecodable>, StoreError>;

    /// When its checkpoint is saved while it sees only events it ignores.
    fn idle(&self) -> &IdleCheckpoint;
}

/// A read model and the events of a batch it has yet to apply.
pub(super) struct Part<'a> {
    pub member: &'a dyn Member,
    pub events: &'a [EventRecord],
}

/// Commits every part in one transaction: the folds, then the parts'
/// checkpoints. Returns, per part, the first event it cannot decode; the
/// events before it are committed. A batch with nothing for any read model
/// (and no idle checkpoint due) does not touch the database.
pub(super) async fn commit_parts(
    log: &EventLog,
    parts: &[Part<'_>],
) -> Result<Vec<Option<Undecodable>>, StoreError> {
    let mut ends: Vec<usize> = parts.iter().map(|p| p.events.len()).collect();
    let mut failed: Vec<Option<Undecodable>> = parts.iter().map(|_| None).collect();
    let work: Vec<bool> = parts
        .iter()
        .map(|p| p.events.iter().any(|e| p.member.relevant(e)))
        .collect();
    // Asked once: asking marks the time.
    let idle_due: Vec<bool> = parts
        .iter()
        .zip(&work)
        .map(|(p, work)| !work && !p.events.is_empty() && p.member.idle().due())
        .collect();
    'attempt: loop {
        let saves: Vec<Option<Cursor>> = (0..parts.len())
            .map(|i| {
                let wanted = work[i] || idle_due[i] || failed[i].is_some();
                let last = parts[i].events[..ends[i]].last();
                last.filter(|_| wanted).map(|e| e.cursor)
            })
            .collect();
        if saves.iter().all(Option::is_none) {
            return Ok(failed);
        }
        let mut tx = Tx::read_models(log.db()).await?;
        let mut checkpoints = Vec::with_capacity(parts.len());
        for (i, part) in parts.iter().enumerate() {
            let events = &part.events[..ends[i]];
            if work[i]
                && !events.is_empty()
                && let Some((at, error)) = part.member.fold(&mut tx, events).await?
            {
                // Dropping the transaction rolls it back; the next attempt
                // stops this part before the event. Pure folds fail the same
                // way on the same events, so the attempts end.
                ends[i] = at;
                failed[i] = Some((at, error));
                continue 'attempt;
            }
            if let Some(cursor) = saves[i] {
                checkpoints.push((part.member.name(), cursor));
            }
        }
        with_tx!(&mut tx, tx => guards::save_checkpoints(tx, &checkpoints).await?);
        tx.commit().await?;
        if work.iter().any(|w| *w) {
            log.read_models_moved();
        }
        return Ok(failed);
    }
}

/// Commits `batch` for `member` alone; an event it cannot decode stops it
/// there (what comes before commits).
pub(super) async fn commit_alone(
    log: &EventLog,
    member: &dyn Member,
    batch: &[EventRecord],
) -> Result<(), ConsumerError> {
    let parts = [Part {
        member,
        events: batch,
    }];
    match commit_parts(log, &parts).await?.pop().flatten() {
        Some((at, error)) => Err(ConsumerError::undecodable(&batch[at], error)),
        None => Ok(()),
    }
}

/// What the group does with a read model that leaves it: runs it as a
/// consumer of its own.
pub type Detach = Box<dyn Fn(Arc<dyn Consumer>) + Send + Sync>;

/// The read models of the process, fed as one consumer.
pub struct ReadModels {
    log: EventLog,
    members: Vec<Arc<dyn Member>>,
    /// Each member's checkpoint as this process knows it (idle ones are
    /// saved lazily); `None` once it left the group.
    at: Mutex<Vec<Option<Cursor>>>,
    detach: Detach,
}

impl ReadModels {
    pub fn new(log: EventLog, members: Vec<Arc<dyn Member>>, detach: Detach) -> Self {
        let at = Mutex::new(vec![Some(Cursor::START); members.len()]);
        Self {
            log,
            members,
            at,
            detach,
        }
    }

    fn positions(&self) -> Vec<Option<Cursor>> {
        self.at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[async_trait]
impl Consumer for ReadModels {
    fn name(&self) -> &str {
        READ_MODELS
    }

    /// The earliest checkpoint of its members: the group is fed from there,
    /// and each member skips what its own checkpoint covers.
    async fn checkpoint(&self) -> Result<Cursor, StoreError> {
        let mut at = self.positions();
        for (member, at) in self.members.iter().zip(at.iter_mut()) {
            if at.is_some() {
                *at = Some(
                    self.log
                        .load_checkpoint(&checkpoint_name(member.name()))
                        .await?,
                );
            }
        }
        let earliest = at.iter().flatten().min().copied();
        *self.at.lock().unwrap_or_else(PoisonError::into_inner) = at;
        Ok(earliest.unwrap_or(Cursor::START))
    }

    async fn handle(&self, batch: &[EventRecord]) -> Result<(), ConsumerError> {
        let mut at = self.positions();
        let (indexes, parts): (Vec<usize>, Vec<Part<'_>>) = self
            .members
            .iter()
            .zip(&at)
            .enumerate()
            .filter_map(|(i, (member, at))| {
                let events = after_checkpoint(batch, (*at)?);
                Some((
                    i,
                    Part {
                        member: member.as_ref(),
                        events,
                    },
                ))
            })
            .unzip();
        let failed = commit_parts(&self.log, &parts).await?;
        for ((i, part), failed) in indexes.into_iter().zip(&parts).zip(failed) {
            let done = match &failed {
                Some((stop, _)) => part.events[..*stop].last(),
                None => part.events.last(),
            };
            if let Some(event) = done {
                at[i] = Some(event.cursor);
            }
            if let Some((stop, error)) = failed {
                let event = &part.events[stop];
                tracing::warn!(
                    projection = part.member.name(),
                    position = event.cursor.position,
                    event_id = %event.event_id,
                    error = %error,
                    "read model cannot decode an event; it leaves the group and stops there alone"
                );
                at[i] = None;
                (self.detach)(Arc::clone(&self.members[i]) as Arc<dyn Consumer>);
            }
        }
        *self.at.lock().unwrap_or_else(PoisonError::into_inner) = at;
        Ok(())
    }

    /// Never called: read models do not dead-letter (one that skipped an
    /// event would be wrong for good).
    async fn pass(&self, _event: &EventRecord) -> Result<(), StoreError> {
        Ok(())
    }

    async fn retry(&self, _event: &EventRecord) -> Result<(), ConsumerError> {
        Ok(())
    }
}
