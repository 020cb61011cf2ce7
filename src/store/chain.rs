//! The per-stream hash chain, exactly as `event-schemas/CHAIN.md` states it.
//!
//! `hash = SHA-256(prev_hash ‖ JCS({aggregate_type, aggregate_id, sequence,
//! event_type, event_version, payload, metadata}))`, where JCS is RFC 8785
//! canonical JSON and `prev_hash` of sequence 1 is 32 zero bytes.

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// A SHA-256 digest.
pub type Hash = [u8; 32];

/// The `prev_hash` of the first event of every stream.
pub const GENESIS: Hash = [0; 32];

/// The fields of an event that its hash covers.
#[derive(Debug, Serialize)]
pub struct ChainedFields<'a> {
    pub aggregate_type: &'a str,
    pub aggregate_id: &'a str,
    pub sequence: i64,
    pub event_type: &'a str,
    pub event_version: &'a str,
    pub payload: &'a Value,
    pub metadata: &'a Value,
}

impl ChainedFields<'_> {
    /// The RFC 8785 canonical bytes of these fields.
    pub fn canonical_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_jcs::to_vec(self)
    }

    /// The chain hash of these fields after `prev_hash`.
    pub fn hash(&self, prev_hash: &Hash) -> Result<Hash, serde_json::Error> {
        Ok(link(prev_hash, &self.canonical_bytes()?))
    }
}

/// `SHA-256(prev_hash ‖ canonical)`.
pub fn link(prev_hash: &Hash, canonical: &[u8]) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update(prev_hash);
    hasher.update(canonical);
    hasher.finalize().into()
}

/// Canonical JSON text of a value: what the store keeps in `payload` and `metadata`.
pub fn canonical_text(value: &Value) -> Result<String, serde_json::Error> {
    serde_jcs::to_string(value)
}

/// Reads a stored 32-byte hash; `None` when the stored value has another length.
pub fn hash_from_slice(bytes: &[u8]) -> Option<Hash> {
    bytes.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields<'a>(payload: &'a Value, metadata: &'a Value) -> ChainedFields<'a> {
        ChainedFields {
            aggregate_type: "debate",
            aggregate_id: "d-1",
            sequence: 1,
            event_type: "DebateCreated",
            event_version: "1",
            payload,
            metadata,
        }
    }

    #[test]
    fn canonical_bytes_sort_keys_and_drop_whitespace() {
        let payload = json!({"z": 1, "a": [true, null, 1.5]});
        let metadata = json!({"actor": "system"});
        let text =
            String::from_utf8(fields(&payload, &metadata).canonical_bytes().unwrap()).unwrap();
        assert_eq!(
            text,
            r#"{"aggregate_id":"d-1","aggregate_type":"debate","event_type":"DebateCreated","event_version":"1","metadata":{"actor":"system"},"payload":{"a":[true,null,1.5],"z":1},"sequence":1}"#
        );
    }

    #[test]
    fn golden_hash_of_a_first_event() {
        // The same vector is printed in event-schemas/CHAIN.md for outside verifiers.
        let payload = json!({"topic": "Is Rust fun?"});
        let metadata = json!({"actor": "system"});
        let hash = fields(&payload, &metadata).hash(&GENESIS).unwrap();
        assert_eq!(
            hex::encode(hash),
            "6e171633af69275afcf720529ad5c4c51d1d2d414455cdf78ce677137620b5cf"
        );
    }

    #[test]
    fn the_hash_depends_on_the_previous_hash() {
        let payload = json!({});
        let metadata = json!({});
        let f = fields(&payload, &metadata);
        assert_ne!(f.hash(&GENESIS).unwrap(), f.hash(&[1; 32]).unwrap());
    }

    #[test]
    fn canonical_text_round_trips_to_the_same_bytes() {
        let value = json!({"b": 0.1, "a": "\u{e9}\u{1F600}", "c": 1e21});
        let text = canonical_text(&value).unwrap();
        let reparsed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(canonical_text(&reparsed).unwrap(), text);
    }
}
