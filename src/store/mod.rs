//! The hash-chained, append-only event store and everything that reads it in
//! order: the feed, the relay, seals and verification.
//!
//! Only this module knows the SQL of the event log. Aggregates reach it
//! through cqrs-es's `PersistedEventRepository` seam ([`EventLog`]) and never
//! see a hash; consumers reach it through the feed ([`EventLog::read_feed`]),
//! which never skips an event, even one whose transaction commits late.

pub mod canonical;
pub mod chain;
mod commands;
pub mod db;
pub mod dead_letters;
pub mod expect;
pub mod feed;
mod tickets;
pub(crate) use feed::{checkpoint_upsert, now, value_rows};
mod group;
mod log;
pub mod merkle;
mod repository;
mod rows;
mod scan;
pub mod seal;
pub mod sealer;
pub mod verify;
pub mod worker;

pub use commands::{CommandError, Executed, Held};
pub use db::{Backend, Db};
pub use log::EventLog;
pub use rows::StoredEvent;

use std::sync::Arc;
use thiserror::Error;

/// What can go wrong in the event store.
#[derive(Debug, Error)]
pub enum StoreError {
    /// Another writer appended to the stream first (optimistic concurrency).
    #[error(
        "stream {aggregate_type}/{aggregate_id} was changed concurrently at sequence {sequence}"
    )]
    Conflict {
        aggregate_type: String,
        aggregate_id: String,
        sequence: i64,
    },
    #[error("events of one append must be one stream with contiguous sequences")]
    NonContiguousAppend,
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    /// The database cannot be reached (refused or lost connections, no
    /// connection free within the acquire timeout, a server shutting down or
    /// starting up): an outage to wait out, not a fault of the request.
    #[error("{UNAVAILABLE_MARK}: {source}")]
    Unavailable {
        #[source]
        source: sqlx::Error,
    },
    #[error("database migration failed: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),
    #[error("event could not be serialized: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot use data directory {path}: {source}")]
    DataDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Committed events could not be flushed to disk.
    #[error("cannot flush the log to disk: {0}")]
    Flush(#[source] Arc<StoreError>),
    /// The shared commit of a group of appends failed; none of them was
    /// written. Every append of the group shares the one cause.
    #[error("the commit of this append failed: {0}")]
    GroupCommit(#[source] Arc<StoreError>),
    #[error("i/o: {0}")]
    Io(#[source] std::io::Error),
    /// A blocking task of the store panicked or was cancelled.
    #[error("store task: {0}")]
    Task(#[source] tokio::task::JoinError),
    /// The task writing a group of appends ended before it answered.
    #[error("the writer stopped before committing")]
    WriterStopped,
    /// Appends are grouped only on the embedded store.
    #[error("group commit is for SQLite only")]
    NotGrouped,
    /// A bulk read of the events (see `scan`) failed.
    #[error("cannot read the events in bulk: {0}")]
    Scan(String),
    #[error("stored event at position {position} is malformed: {what}")]
    Malformed { position: i64, what: &'static str },
    /// A failure the event-sourcing framework reported in its own terms.
    #[error("persistence: {0}")]
    Persistence(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A stored event the code cannot read (a newer version, a payload
    /// that does not fit): a fault of the data or the code, not the store.
    #[error("stored event cannot be decoded: {0}")]
    Undecodable(#[from] agon_aggregates::wire::DecodeError),
}

/// Starts the message of [`StoreError::Unavailable`].
const UNAVAILABLE_MARK: &str = "database unavailable";

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        if is_outage(&error) {
            StoreError::Unavailable { source: error }
        } else {
            StoreError::Database(error)
        }
    }
}

/// SQLSTATE classes and codes that mean the server, not the statement, failed:
/// class 08 (connection exception), 57P01 to 57P03 (shutting down, crashed,
/// not accepting connections yet).
fn outage_code(code: &str) -> bool {
    code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03")
}

fn is_outage(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(e) => e.code().is_some_and(|code| outage_code(&code)),
        _ => false,
    }
}

impl StoreError {
    /// Whether this is an outage of the database ([`StoreError::Unavailable`]).
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Unavailable { .. } => true,
            StoreError::GroupCommit(cause) | StoreError::Flush(cause) => cause.is_unavailable(),
            _ => false,
        }
    }

    /// Whether another writer took the key first (a stream's sequence).
    pub(crate) fn is_unique_violation(&self) -> bool {
        matches!(self, StoreError::Database(sqlx::Error::Database(e)) if e.is_unique_violation())
    }
}
