//! A stored event row, as both back ends return it.

use agon_projections::{Cursor, EventRecord};
use serde_json::Value;

use super::StoreError;
use super::chain::{ChainedFields, Hash, hash_from_slice};

/// The columns selected by every query that reads whole events.
pub(crate) const EVENT_COLUMNS: &str = "position, txid, event_id, aggregate_type, aggregate_id, \
     sequence, event_type, event_version, payload, metadata, prev_hash, hash";

/// One row of the `events` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct StoredEvent {
    pub position: i64,
    /// The feed order's first key: on PostgreSQL the writing transaction's
    /// id plus the database's order shift (see `feed`); 0 on SQLite.
    pub txid: i64,
    pub event_id: String,
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub sequence: i64,
    pub event_type: String,
    pub event_version: String,
    /// Canonical JSON text.
    pub payload: String,
    /// Canonical JSON text.
    pub metadata: String,
    pub prev_hash: Vec<u8>,
    pub hash: Vec<u8>,
}

impl StoredEvent {
    pub fn cursor(&self) -> Cursor {
        Cursor {
            txid: self.txid,
            position: self.position,
        }
    }

    pub fn payload_value(&self) -> Result<Value, StoreError> {
        serde_json::from_str(&self.payload).map_err(|_| self.malformed("payload is not JSON"))
    }

    pub fn metadata_value(&self) -> Result<Value, StoreError> {
        serde_json::from_str(&self.metadata).map_err(|_| self.malformed("metadata is not JSON"))
    }

    pub fn stored_hash(&self) -> Result<Hash, StoreError> {
        hash_from_slice(&self.hash).ok_or_else(|| self.malformed("hash is not 32 bytes"))
    }

    pub fn stored_prev_hash(&self) -> Result<Hash, StoreError> {
        hash_from_slice(&self.prev_hash).ok_or_else(|| self.malformed("prev_hash is not 32 bytes"))
    }

    /// The fields the chain hash covers.
    pub fn chained_fields(&self) -> ChainedFields<'_> {
        ChainedFields {
            aggregate_type: &self.aggregate_type,
            aggregate_id: &self.aggregate_id,
            sequence: self.sequence,
            event_type: &self.event_type,
            event_version: &self.event_version,
            payload: &self.payload,
            metadata: &self.metadata,
        }
    }

    /// Recomputes this event's chain hash from its stored fields and `prev_hash`.
    pub fn recompute_hash(&self, prev_hash: &Hash) -> Result<Hash, StoreError> {
        Ok(self.chained_fields().hash(prev_hash)?)
    }

    /// The form consumers receive.
    pub fn into_record(self) -> Result<EventRecord, StoreError> {
        let payload = self.payload_value()?;
        let metadata = self.metadata_value()?;
        Ok(EventRecord {
            cursor: self.cursor(),
            hash: hex::encode(&self.hash),
            event_id: self.event_id,
            aggregate_type: self.aggregate_type,
            aggregate_id: self.aggregate_id,
            sequence: self.sequence,
            event_type: self.event_type,
            event_version: self.event_version,
            payload,
            metadata,
        })
    }

    fn malformed(&self, what: &'static str) -> StoreError {
        StoreError::Malformed {
            position: self.position,
            what,
        }
    }
}
