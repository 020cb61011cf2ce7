//! An event as verification reads it: where it is, its stream, its stored
//! links, and the hash of its contents.
//!
//! Where the hashing happens depends on the back end (see
//! [`Columns::HASH_ON_READ`]): on PostgreSQL the reading thread hashes the
//! text where it lies in the `COPY` buffer, so the payload is never copied
//! nor handed to another core; on SQLite, whose engine runs on the reading
//! thread, the reader copies the text and the checker hashes it, so that the
//! two threads share the work.

use crate::store::StoreError;
use crate::store::chain::{ChainedFields, Hash, hash_from_slice};
use crate::store::rows::StoredEvent;
use crate::store::scan::{Columns, ScanRow};

#[derive(Debug, Clone, Default)]
pub(crate) struct ChainRow {
    pub position: i64,
    pub txid: i64,
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub sequence: i64,
    /// The stored `prev_hash`; `None` when it is not 32 bytes.
    pub prev_hash: Option<Hash>,
    /// The stored `hash`; `None` when it is not 32 bytes.
    pub hash: Option<Hash>,
    /// `SHA-256(prev_hash ‖ canonical bytes)` of the stored fields, once
    /// [`ChainRow::hash_contents`] ran; `None` when the stored `prev_hash`
    /// is not a hash.
    pub computed: Option<Hash>,
    /// The rest of the hashed text, when the reader left the hashing to
    /// [`ChainRow::hash_contents`] (the buffers are reused row after row).
    texts: Texts,
    /// Whether `texts` still waits to be hashed.
    deferred: bool,
}

#[derive(Debug, Clone, Default)]
struct Texts {
    event_type: String,
    event_version: String,
    payload: String,
    metadata: String,
}

impl ChainRow {
    /// Hashes the contents if the reader left them; a no-op otherwise.
    pub fn hash_contents(&mut self) {
        if std::mem::take(&mut self.deferred) {
            let texts = &self.texts;
            let fields = ChainedFields {
                aggregate_type: &self.aggregate_type,
                aggregate_id: &self.aggregate_id,
                sequence: self.sequence,
                event_type: &texts.event_type,
                event_version: &texts.event_version,
                payload: &texts.payload,
                metadata: &texts.metadata,
            };
            self.computed = hash_with(&fields, self.prev_hash);
        }
    }

    fn links(&mut self, fields: &ChainedFields<'_>, prev_hash: &[u8], hash: &[u8]) {
        self.sequence = fields.sequence;
        set(&mut self.aggregate_type, fields.aggregate_type);
        set(&mut self.aggregate_id, fields.aggregate_id);
        self.prev_hash = hash_from_slice(prev_hash);
        self.hash = hash_from_slice(hash);
    }
}

fn hash_with(fields: &ChainedFields<'_>, prev_hash: Option<Hash>) -> Option<Hash> {
    prev_hash.and_then(|prev| fields.hash(&prev).ok())
}

fn set(into: &mut String, text: &str) {
    into.clear();
    into.push_str(text);
}

impl ScanRow for ChainRow {
    const COLUMNS: &'static str = "position, txid, aggregate_type, aggregate_id, sequence, \
         event_type, event_version, payload, metadata, prev_hash, hash";

    fn read_into<'r, C: Columns<'r>>(&mut self, c: &mut C) -> Result<(), StoreError> {
        self.position = c.int()?;
        self.txid = c.int()?;
        let aggregate_type = c.str()?;
        let aggregate_id = c.str()?;
        let sequence = c.int()?;
        let event_type = c.str()?;
        let event_version = c.str()?;
        let payload = c.str()?;
        let metadata = c.str()?;
        let fields = ChainedFields {
            aggregate_type,
            aggregate_id,
            sequence,
            event_type,
            event_version,
            payload,
            metadata,
        };
        let prev_hash = c.bytes()?;
        self.links(&fields, prev_hash, c.bytes()?);
        if C::HASH_ON_READ {
            self.computed = hash_with(&fields, self.prev_hash);
            self.deferred = false;
        } else {
            let texts = &mut self.texts;
            set(&mut texts.event_type, event_type);
            set(&mut texts.event_version, event_version);
            set(&mut texts.payload, payload);
            set(&mut texts.metadata, metadata);
            self.deferred = true;
        }
        Ok(())
    }
}

impl From<&StoredEvent> for ChainRow {
    fn from(event: &StoredEvent) -> Self {
        let mut row = ChainRow {
            position: event.position,
            txid: event.txid,
            ..ChainRow::default()
        };
        let fields = event.chained_fields();
        row.links(&fields, &event.prev_hash, &event.hash);
        row.computed = hash_with(&fields, row.prev_hash);
        row
    }
}
