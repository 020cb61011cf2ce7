//! The per-stream hash chain, exactly as `event-schemas/CHAIN.md` states it.
//!
//! `hash = SHA-256(prev_hash ‖ JCS({aggregate_type, aggregate_id, sequence,
//! event_type, event_version, payload, metadata}))`, where JCS is RFC 8785
//! canonical JSON and `prev_hash` of sequence 1 is 32 zero bytes.
//!
//! Canonical JSON is written by [`super::canonical`]. Texts already stored
//! are hashed as stored, never re-serialised, so logs written by earlier
//! versions (whose member order differed for some keys) still verify.

use serde_json::Value;

use super::canonical;
use sha2::{Digest, Sha256};

/// A SHA-256 digest.
pub type Hash = [u8; 32];

/// The `prev_hash` of the first event of every stream.
pub const GENESIS: Hash = [0; 32];

/// The fields of an event that its hash covers, with `payload` and `metadata`
/// already in canonical JSON text (as the store keeps them).
#[derive(Debug, Clone, Copy)]
pub struct ChainedFields<'a> {
    pub aggregate_type: &'a str,
    pub aggregate_id: &'a str,
    pub sequence: i64,
    pub event_type: &'a str,
    pub event_version: &'a str,
    /// Canonical JSON text, see [`canonical_text`].
    pub payload: &'a str,
    /// Canonical JSON text, see [`canonical_text`].
    pub metadata: &'a str,
}

impl ChainedFields<'_> {
    /// The RFC 8785 canonical bytes of the object of these fields. Keys are
    /// written in their sorted order and the canonical texts are spliced in,
    /// so no payload is parsed or serialized again.
    pub fn canonical_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut out = Vec::with_capacity(self.payload.len() + self.metadata.len() + 160);
        self.write_canonical(|piece| out.extend_from_slice(piece));
        Ok(out)
    }

    /// The chain hash of these fields after `prev_hash`, hashed piece by
    /// piece as the canonical bytes are written (verification hashes every
    /// stored event and need not copy one).
    pub fn hash(&self, prev_hash: &Hash) -> Result<Hash, serde_json::Error> {
        let mut hasher = Sha256::new();
        hasher.update(prev_hash);
        self.write_canonical(|piece| hasher.update(piece));
        Ok(hasher.finalize().into())
    }

    /// Hands the canonical bytes to `sink` in pieces, in order.
    fn write_canonical(&self, mut sink: impl FnMut(&[u8])) {
        let fields: [(&[u8], &str); 4] = [
            (b"{\"aggregate_id\":", self.aggregate_id),
            (b",\"aggregate_type\":", self.aggregate_type),
            (b",\"event_type\":", self.event_type),
            (b",\"event_version\":", self.event_version),
        ];
        for (key, value) in fields {
            sink(key);
            if value.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
                let mut text = String::with_capacity(value.len() + 8);
                canonical::write_string(value, &mut text);
                sink(text.as_bytes());
            } else {
                sink(b"\"");
                sink(value.as_bytes());
                sink(b"\"");
            }
        }
        sink(b",\"metadata\":");
        sink(self.metadata.as_bytes());
        sink(b",\"payload\":");
        sink(self.payload.as_bytes());
        sink(b",\"sequence\":");
        sink(itoa::Buffer::new().format(self.sequence).as_bytes());
        sink(b"}");
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
    Ok(canonical::to_string(value))
}

/// RFC 8785 canonical JSON bytes of a value.
pub fn canonical_json(value: &Value) -> Result<Vec<u8>, serde_json::Error> {
    Ok(canonical::to_vec(value))
}

/// Reads a stored 32-byte hash; `None` when the stored value has another length.
pub fn hash_from_slice(bytes: &[u8]) -> Option<Hash> {
    bytes.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PAYLOAD: &str = r#"{"topic":"Is Rust fun?"}"#;
    const METADATA: &str = r#"{"actor":"system"}"#;

    fn fields<'a>(payload: &'a str, metadata: &'a str) -> ChainedFields<'a> {
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
    fn canonical_bytes_are_the_documented_splice() {
        let text = String::from_utf8(fields(PAYLOAD, METADATA).canonical_bytes().unwrap()).unwrap();
        assert_eq!(
            text,
            r#"{"aggregate_id":"d-1","aggregate_type":"debate","event_type":"DebateCreated","event_version":"1","metadata":{"actor":"system"},"payload":{"topic":"Is Rust fun?"},"sequence":1}"#
        );
    }

    #[test]
    fn the_splice_equals_rfc_8785_of_the_whole_object() {
        let payload = json!({"z": 1, "a": [true, null, 1.5], "\u{e9}": "\u{1F600}\n"});
        let metadata = json!({"actor": "tab\there", "event_id": "e"});
        let (payload_text, metadata_text) = (
            canonical_text(&payload).unwrap(),
            canonical_text(&metadata).unwrap(),
        );
        let mut f = fields(&payload_text, &metadata_text);
        f.aggregate_id = "quote\"and\\slash\u{7}";
        f.sequence = 12_345;
        let whole = json!({
            "aggregate_type": f.aggregate_type, "aggregate_id": f.aggregate_id, "sequence": f.sequence,
            "event_type": f.event_type, "event_version": f.event_version,
            "payload": payload, "metadata": metadata,
        });
        assert_eq!(
            f.canonical_bytes().unwrap(),
            canonical_json(&whole).unwrap()
        );
    }

    #[test]
    fn golden_hash_of_a_first_event() {
        // The same vector is printed in event-schemas/CHAIN.md for outside verifiers.
        let hash = fields(PAYLOAD, METADATA).hash(&GENESIS).unwrap();
        assert_eq!(
            hex::encode(hash),
            "6e171633af69275afcf720529ad5c4c51d1d2d414455cdf78ce677137620b5cf"
        );
    }

    #[test]
    fn the_hash_depends_on_the_previous_hash() {
        let f = fields("{}", "{}");
        assert_ne!(f.hash(&GENESIS).unwrap(), f.hash(&[1; 32]).unwrap());
    }

    #[test]
    fn canonical_text_round_trips_to_the_same_bytes() {
        let value = json!({"b": 0.1, "a": "\u{e9}\u{1F600}", "c": 1e21});
        let text = canonical_text(&value).unwrap();
        let reparsed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(canonical_text(&reparsed).unwrap(), text);
    }

    #[test]
    fn members_sort_by_utf16_code_units_not_code_points() {
        // U+1F600 is above U+FB01 as a code point, but its first UTF-16 unit
        // (0xD83D) is below 0xFB01: RFC 8785 puts the emoji first.
        let weights = json!({"demo-\u{FB01}": 1, "demo-\u{1F600}": 2, "demo-a": 3});
        assert_eq!(
            canonical_text(&weights).unwrap(),
            "{\"demo-a\":3,\"demo-\u{1F600}\":2,\"demo-\u{FB01}\":1}"
        );
    }

    #[test]
    fn a_key_sorts_before_the_keys_it_prefixes() {
        let value = json!({"a!": 2, "a": 1, "a\n": 3, "b": {"y": [1, {"x": null}], "x": 0.5}});
        assert_eq!(
            canonical_text(&value).unwrap(),
            r#"{"a":1,"a\n":3,"a!":2,"b":{"x":0.5,"y":[1,{"x":null}]}}"#
        );
    }

    #[test]
    fn controls_are_escaped_in_lower_case_hex_and_del_is_not() {
        let text = canonical_text(&json!("\u{1}\u{1f}\u{8}\u{7f}\u{2028}/")).unwrap();
        assert_eq!(text, "\"\\u0001\\u001f\\b\u{7f}\u{2028}/\"");
    }
}
