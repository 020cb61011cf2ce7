//! Group commit for the embedded store: appends that wait for SQLite's one
//! writer at the same moment share one transaction, so one flush to disk
//! makes all of them durable.
//!
//! Each append still stands or falls alone. A one-statement append is
//! atomic by itself; a longer one runs inside a savepoint. A unique-key
//! violation (another writer took the sequence first) rejects only that
//! append; any other failure rolls the whole group back and every append in
//! it reports the failure, so no caller is ever told "failed" for events
//! that were written.

use std::sync::{Arc, Mutex, PoisonError};

use sqlx::{Sqlite, Transaction};
use tokio::sync::oneshot;

use super::StoreError;
use super::db::{Db, PoolRef};
use super::log::{Append, write_append};

type Waiting = (Append, oneshot::Sender<Result<(), StoreError>>);

/// Appends waiting for the writer, and the turn to write them.
#[derive(Debug, Default)]
pub(super) struct GroupCommit {
    queue: Arc<Mutex<Vec<Waiting>>>,
    /// Held by the task writing a group; the next holder takes everything
    /// that queued up meanwhile.
    writing: Arc<tokio::sync::Mutex<()>>,
}

impl GroupCommit {
    /// Writes `append`, together with whatever else is waiting, and answers
    /// once its group has committed (or failed).
    pub(super) async fn submit(&self, db: &Db, append: Append) -> Result<(), StoreError> {
        let (sender, receiver) = oneshot::channel();
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((append, sender));
        let writing = Arc::clone(&self.writing).lock_owned().await;
        if self
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
        {
            // An earlier writer took this append into its group.
            drop(writing);
        } else {
            // The group is written in a task of its own: a caller that stops
            // waiting must not abandon the other appends half written.
            let (db, queue) = (db.clone(), Arc::clone(&self.queue));
            super::worker::spawn(async move {
                write_group(&db, &queue).await;
                drop(writing);
            });
        }
        receiver
            .await
            .unwrap_or_else(|_| Err(StoreError::WriterStopped))
    }
}

/// Waits for the connection, then writes everything queued by then: the
/// appends that arrive while other writers hold the connection join in.
async fn write_group(db: &Db, queue: &Mutex<Vec<Waiting>>) {
    let take = || std::mem::take(&mut *queue.lock().unwrap_or_else(PoisonError::into_inner));
    let PoolRef::Sqlite(pool) = db.writer() else {
        // Only the SQLite log groups its appends; answer rather than hang.
        return fail_all(take(), StoreError::NotGrouped);
    };
    let began = pool.begin().await;
    let group = take();
    let mut tx = match began {
        Ok(tx) => tx,
        Err(e) => return fail_all(group, e.into()),
    };
    let mut outcomes = Vec::with_capacity(group.len());
    for (append, _) in &group {
        match write_one(&mut tx, append).await {
            Err(e) if e.is_unique_violation() => outcomes.push(Err(e)),
            Err(e) => {
                let _ = tx.rollback().await;
                return fail_all(group, e);
            }
            Ok(()) => outcomes.push(Ok(())),
        }
    }
    if let Err(e) = tx.commit().await {
        return fail_all(group, e.into());
    }
    // The writer is free again while the disk catches up; the appenders
    // hear of their events only once they are durable.
    if let Err(e) = db.sync_log().await {
        // Written and visible, but maybe not on disk: the caller must not
        // take these events as durable.
        let cause = Arc::new(e);
        for (_, sender) in group {
            let _ = sender.send(Err(StoreError::Flush(cause.clone())));
        }
        return;
    }
    for ((_, sender), outcome) in group.into_iter().zip(outcomes) {
        let _ = sender.send(outcome);
    }
}

/// Inserts one append inside the group's transaction; on a unique-key
/// violation nothing of it remains (a single statement undoes itself, a
/// longer append runs inside a savepoint).
async fn write_one(tx: &mut Transaction<'_, Sqlite>, append: &Append) -> Result<(), StoreError> {
    if append.is_one_statement() {
        return write_append::<Sqlite>(&mut **tx, append).await;
    }
    sqlx::query("SAVEPOINT append").execute(&mut **tx).await?;
    let written = write_append::<Sqlite>(&mut **tx, append).await;
    if written.is_err() {
        sqlx::query("ROLLBACK TO append").execute(&mut **tx).await?;
    }
    sqlx::query("RELEASE append").execute(&mut **tx).await?;
    written
}

fn fail_all(group: Vec<Waiting>, error: StoreError) {
    let cause = Arc::new(error);
    for (_, sender) in group {
        let _ = sender.send(Err(StoreError::GroupCommit(cause.clone())));
    }
}
