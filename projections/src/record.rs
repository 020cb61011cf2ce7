//! The form in which committed events travel from the store to consumers.

use agon_aggregates::wire::{self, DecodeError, Stored};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A place in the event feed.
///
/// The feed is ordered by `(txid, position)`: the id of the writing transaction
/// first (plus the database's order shift, raised once when the log moved to
/// another cluster, so that the order survives a restore), the global
/// position second. On PostgreSQL only transactions older than every one
/// still in flight are read, so an event can never appear behind a cursor a
/// consumer has already passed. On SQLite there is a single writer, position
/// order is commit order, and `txid` is always 0.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Cursor {
    pub txid: i64,
    pub position: i64,
}

impl Cursor {
    /// The place before the first event.
    pub const START: Cursor = Cursor {
        txid: 0,
        position: 0,
    };
}

/// One committed event as consumers see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    pub cursor: Cursor,
    pub event_id: String,
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub sequence: i64,
    pub event_type: String,
    pub event_version: String,
    pub payload: Value,
    pub metadata: Value,
    /// Hex SHA-256 of this event in its stream's hash chain.
    pub hash: String,
}

impl EventRecord {
    /// `aggregate_type/aggregate_id`: the stream this event belongs to.
    pub fn stream(&self) -> String {
        format!("{}/{}", self.aggregate_type, self.aggregate_id)
    }

    /// The domain event, raised to its current version: the decode path
    /// the repository uses too ([`wire::decode`]).
    pub fn decode<E: DeserializeOwned>(&self) -> Result<E, DecodeError> {
        wire::decode(
            Stored {
                aggregate_type: &self.aggregate_type,
                event_type: &self.event_type,
                event_version: &self.event_version,
            },
            self.payload.clone(),
        )
    }
}
