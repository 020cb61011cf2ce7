//! The debate runner, a process manager: it learns of debates from the
//! event stream, starts them in creation order while fewer than
//! `SERVICE_MAX_CONCURRENT_DEBATES` run, and drives each to its end.
//!
//! It keeps no state the log lacks. At start it looks in the log for every
//! unfinished debate and continues it from its last recorded contribution;
//! on PostgreSQL a lease per debate keeps two replicas from driving one
//! debate, a replica that stops renewing loses it to the others within
//! `SERVICE_DEBATE_LEASE_SECONDS`, and a restarted replica takes its own
//! back at once (`lease.rs`).

mod deltas;
mod drive;
mod lease;
mod turns;

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agon_projections::admin_stats::{DEBATE_AGGREGATE, DEBATE_TERMINAL_EVENTS};
use agon_projections::{Cursor, EventRecord};
use async_trait::async_trait;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use agon_aggregates::debate::{Debate, DebateStatus};

use crate::agents::Agents;
use crate::bus::{Consumer, ConsumerError, Ephemeral};
use crate::clock::Clock;
use crate::config::Settings;
use crate::store::{EventLog, StoreError};
use lease::Leases;

pub use deltas::Delta;

/// How long a debate whose drive failed (a store outage) waits before another try.
const RETRY_DELAY: Duration = Duration::from_secs(2);
/// Events that put a debate in the runner's queue.
const WAKING_EVENTS: [&str; 2] = ["DebateCreated", "DebateResumed"];

/// A running slot (and on PostgreSQL the lease) taken for a debate being created.
#[derive(Debug)]
pub struct Admission {
    slot: OwnedSemaphorePermit,
}

/// Runs debates; cheap to clone.
#[derive(Debug, Clone)]
pub struct Runner {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    log: EventLog,
    agents: Agents,
    clock: Clock,
    /// Where the agents' text goes while they write it.
    deltas: Ephemeral,
    limit: usize,
    slots: Arc<Semaphore>,
    leases: Option<Leases>,
    /// Debates waiting for a slot, oldest first.
    queue: Mutex<VecDeque<String>>,
    /// Debates queued or running here, so none is taken twice.
    known: Mutex<HashSet<String>>,
    /// Debates whose lease this replica holds.
    leased: Mutex<HashSet<String>>,
    wake: Notify,
    accepting: AtomicBool,
    drives: Mutex<JoinSet<()>>,
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inner {
    fn holds_lease(&self, id: &str) -> bool {
        self.leases.is_none() || locked(&self.leased).contains(id)
    }

    fn enqueue(&self, id: &str) {
        if locked(&self.known).insert(id.to_owned()) {
            locked(&self.queue).push_back(id.to_owned());
            self.wake.notify_one();
        }
    }

    fn forget(&self, id: &str) {
        locked(&self.known).remove(id);
        locked(&self.leased).remove(id);
    }

    /// Spawns a debate's drive, first joining the drives that finished: a
    /// `JoinSet` keeps every finished task (as large as its future) until
    /// joined: unjoined they held about 11 KB per debate driven, for good.
    /// Joined here, the set holds at most the drives running at the last
    /// spawn plus one.
    fn spawn_drive(&self, drive: impl Future<Output = ()> + Send + 'static) {
        let mut drives = locked(&self.drives);
        while drives.try_join_next().is_some() {}
        drives.spawn(drive);
    }
}

impl Runner {
    pub fn new(
        log: EventLog,
        agents: Agents,
        clock: Clock,
        deltas: Ephemeral,
        settings: &Settings,
    ) -> Self {
        let limit = settings.agents.max_concurrent_debates.max(1);
        let leases = Leases::for_store(
            &log,
            settings.agents.debate_lease,
            settings.replica_id.as_deref(),
            &settings.data_dir,
        );
        Self {
            inner: Arc::new(Inner {
                leases,
                log,
                agents,
                clock,
                deltas,
                limit,
                slots: Arc::new(Semaphore::new(limit)),
                queue: Mutex::default(),
                known: Mutex::default(),
                leased: Mutex::default(),
                wake: Notify::new(),
                accepting: AtomicBool::new(true),
                drives: Mutex::new(JoinSet::new()),
            }),
        }
    }

    /// Debates running on this replica now.
    pub fn running(&self) -> usize {
        self.inner.limit - self.inner.slots.available_permits()
    }

    /// The consumer that tells the runner of new and resumed debates.
    /// It starts at the feed's head: what came before, the start-up scan finds.
    pub async fn feed(&self) -> Result<Arc<dyn Consumer>, StoreError> {
        let head = self.inner.log.feed_head().await?;
        Ok(Arc::new(Feed {
            inner: self.inner.clone(),
            cursor: Mutex::new(head),
        }))
    }

    /// Queues every unfinished debate in the log, then starts debates as
    /// slots free up, until `stop`.
    pub fn spawn(&self, stop: &CancellationToken) -> JoinHandle<()> {
        let (inner, stop) = (self.inner.clone(), stop.clone());
        tokio::spawn(async move { dispatch(inner, stop).await })
    }

    /// Claims a debate about to be created, so that the feed leaves it to
    /// [`Runner::launch`] (or [`Runner::abandon`] when the create fails).
    pub fn reserve(&self, id: &str) {
        locked(&self.inner.known).insert(id.to_owned());
    }

    /// A slot for reserved new debate `id` when one is free and nothing
    /// waits before it (and, on PostgreSQL, its lease), so that the debate
    /// is started in the append that creates it and its creator sees it
    /// `running`. `None` leaves the debate to the queue.
    pub async fn admission(&self, id: &str) -> Option<Admission> {
        let inner = &self.inner;
        if !inner.accepting.load(Ordering::SeqCst) || !locked(&inner.queue).is_empty() {
            return None;
        }
        let slot = inner.slots.clone().try_acquire_owned().ok()?;
        if let Some(leases) = &inner.leases {
            if !matches!(leases.claim(id).await, Ok(true)) {
                return None;
            }
            locked(&inner.leased).insert(id.to_owned());
        }
        Some(Admission { slot })
    }

    /// Hands a newly created debate on: drives it in the slot of its
    /// `admission` when it was started on creation, queues it otherwise.
    /// Returns the debate unchanged.
    pub async fn launch(&self, admission: Option<Admission>, debate: Debate) -> Debate {
        let inner = &self.inner;
        let id = debate.id.clone();
        match admission {
            Some(Admission { slot }) if debate.status == DebateStatus::Running => {
                let task_inner = inner.clone();
                inner.spawn_drive(async move {
                    let _slot = slot;
                    drive_claimed(task_inner, id).await;
                });
            }
            admission => {
                if admission.is_some() {
                    release(inner, &id).await;
                    locked(&inner.leased).remove(&id);
                }
                locked(&inner.queue).push_back(id);
                inner.wake.notify_one();
            }
        }
        debate
    }

    /// Gives back the slot and lease of a debate whose creation failed, and
    /// forgets its reservation.
    pub async fn abandon(&self, id: &str, admission: Option<Admission>) {
        if admission.is_some() {
            release(&self.inner, id).await;
        }
        self.inner.forget(id);
    }

    /// Stops taking debates and waits up to `grace` for running ones to finish;
    /// those still running then are cut off: they resume at the next start,
    /// or on PostgreSQL at once on another replica (their leases lapse now).
    pub async fn drain(&self, grace: Duration) {
        self.inner.accepting.store(false, Ordering::SeqCst);
        self.inner.wake.notify_one();
        let all = u32::try_from(self.inner.limit).unwrap_or(u32::MAX);
        let finished = tokio::time::timeout(grace, self.inner.slots.acquire_many(all)).await;
        if finished.is_err() {
            tracing::warn!(
                running = self.running(),
                "debates still running after the shutdown grace; they resume at the next start"
            );
        }
        let mut drives = std::mem::take(&mut *locked(&self.inner.drives));
        drives.shutdown().await;
        if let Some(leases) = &self.inner.leases {
            let cut_off: Vec<String> = locked(&self.inner.leased).drain().collect();
            for id in cut_off {
                if let Err(e) = leases.hand_over(&id).await {
                    tracing::warn!(debate = %id, error = %e, "cannot hand the debate over");
                }
            }
            leases.retire().await;
        }
    }
}

/// Queues unfinished debates from the log: at start, and on PostgreSQL
/// again every lease period as a safety net (lapsed leases are looked for
/// more often, by [`take_lapsed`]).
async fn scan(inner: &Inner) {
    match inner
        .log
        .open_streams(DEBATE_AGGREGATE, &DEBATE_TERMINAL_EVENTS)
        .await
    {
        Ok(ids) => ids.iter().for_each(|id| inner.enqueue(id)),
        Err(e) => tracing::warn!(error = %e, "cannot list unfinished debates"),
    }
}

/// Queues the debates whose leases lapsed (their replica stopped
/// renewing), so that this replica takes them over when a slot is free.
async fn take_lapsed(inner: &Inner, leases: &Leases) {
    match leases.lapsed().await {
        Ok(ids) => ids.iter().for_each(|id| inner.enqueue(id)),
        Err(e) => tracing::warn!(error = %e, "cannot list lapsed debate leases"),
    }
}

/// On PostgreSQL: looks for lapsed leases every quarter of the lease
/// period, and for every unfinished debate once per period, until `stop`.
fn watch_leases(inner: Arc<Inner>, leases: Leases, stop: CancellationToken) {
    tokio::spawn(async move {
        let mut since_scan = Duration::ZERO;
        while crate::bus::pause(&stop, leases.renew_every()).await {
            since_scan += leases.renew_every();
            if since_scan >= leases.full_scan_every() {
                since_scan = Duration::ZERO;
                scan(&inner).await;
            }
            take_lapsed(&inner, &leases).await;
        }
    });
}

async fn dispatch(inner: Arc<Inner>, stop: CancellationToken) {
    scan(&inner).await;
    if let Some(leases) = inner.leases.clone() {
        watch_leases(inner.clone(), leases, stop.clone());
    }
    loop {
        // Wait for work before taking a slot, so that an idle dispatcher
        // leaves every slot to `admit`.
        loop {
            if !inner.accepting.load(Ordering::SeqCst) {
                return;
            }
            if !locked(&inner.queue).is_empty() {
                break;
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = inner.wake.notified() => {}
            }
        }
        let slot = tokio::select! {
            () = stop.cancelled() => return,
            slot = inner.slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => return,
            },
        };
        if !inner.accepting.load(Ordering::SeqCst) {
            return;
        }
        let Some(id) = locked(&inner.queue).pop_front() else {
            continue;
        };
        let task_inner = inner.clone();
        inner.spawn_drive(async move {
            let _slot = slot;
            run_one(task_inner, id).await;
        });
    }
}

/// Claims, drives and releases one debate.
async fn run_one(inner: Arc<Inner>, id: String) {
    if claim(&inner, &id).await {
        drive_claimed(inner, id).await;
    }
}

/// Takes the lease on `id` (always granted on the embedded store); when it
/// cannot, the debate is left to its holder or to a later try.
async fn claim(inner: &Arc<Inner>, id: &str) -> bool {
    let Some(leases) = &inner.leases else {
        return true;
    };
    match leases.claim(id).await {
        Ok(true) => {
            locked(&inner.leased).insert(id.to_owned());
            true
        }
        Ok(false) => {
            // Another replica drives it; should it stop, the lapsed lease
            // brings the debate back.
            inner.forget(id);
            false
        }
        Err(e) => {
            tracing::warn!(debate = %id, error = %e, "cannot claim debate");
            retry_later(inner.clone(), id.to_owned());
            false
        }
    }
}

async fn release(inner: &Inner, id: &str) {
    if let Some(leases) = &inner.leases
        && let Err(e) = leases.release(id).await
    {
        tracing::warn!(debate = %id, error = %e, "cannot release debate");
    }
}

/// Drives a claimed debate, renewing the claim meanwhile, then lets it go.
async fn drive_claimed(inner: Arc<Inner>, id: String) {
    // Dropped with this future, so that a drive cut off by the shutdown
    // stops renewing too (and its lease can be handed over).
    let renewal = inner.leases.clone().map(|leases| {
        let (inner, id) = (inner.clone(), id.clone());
        AbortOnDrop(tokio::spawn(async move {
            loop {
                tokio::time::sleep(leases.renew_every()).await;
                match leases.claim(&id).await {
                    Ok(true) => {}
                    Ok(false) => {
                        locked(&inner.leased).remove(&id);
                        return;
                    }
                    // The database is away: nobody can take the debate
                    // meanwhile, and answers waiting to be recorded must
                    // not be dropped for a lease in doubt. The next renewal
                    // that reaches the database tells whether it is still ours.
                    Err(e) => {
                        tracing::warn!(debate = %id, error = %e, "cannot renew the debate's lease")
                    }
                }
            }
        }))
    });
    let result = drive::drive(inner.clone(), id.clone()).await;
    drop(renewal);
    release(&inner, &id).await;
    match result {
        Ok(()) | Err(drive::DriveError::LeaseLost) => inner.forget(&id),
        Err(e) => {
            tracing::warn!(debate = %id, error = %e, "debate stopped; retrying");
            retry_later(inner, id);
        }
    }
}

/// Aborts its task when dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn retry_later(inner: Arc<Inner>, id: String) {
    tokio::spawn(async move {
        tokio::time::sleep(RETRY_DELAY).await;
        inner.forget(&id);
        inner.enqueue(&id);
    });
}

/// The runner's view of the event stream: new and resumed debates.
struct Feed {
    inner: Arc<Inner>,
    cursor: Mutex<Cursor>,
}

#[async_trait]
impl Consumer for Feed {
    fn name(&self) -> &str {
        "debate_runner"
    }

    async fn checkpoint(&self) -> Result<Cursor, StoreError> {
        Ok(*locked(&self.cursor))
    }

    async fn handle(&self, batch: &[EventRecord]) -> Result<(), ConsumerError> {
        for event in batch {
            if event.aggregate_type == DEBATE_AGGREGATE
                && WAKING_EVENTS.contains(&event.event_type.as_str())
            {
                self.inner.enqueue(&event.aggregate_id);
            }
        }
        if let Some(last) = batch.last() {
            *locked(&self.cursor) = last.cursor;
        }
        Ok(())
    }

    async fn pass(&self, event: &EventRecord) -> Result<(), StoreError> {
        *locked(&self.cursor) = event.cursor;
        Ok(())
    }

    /// Never dead-lettered: `handle` cannot fail.
    async fn retry(&self, _event: &EventRecord) -> Result<(), ConsumerError> {
        Ok(())
    }
}
