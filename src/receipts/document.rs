//! The receipt document (`event-schemas/RECEIPT.md`): the debate's facts,
//! its events with their chain hashes and inclusion proofs, the seals those
//! prove into, and the signed ODR view; and how one is put together.

use agon_aggregates::debate::DebateEvent;
use agon_aggregates::wire::{self, Stored};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::facts::{self, Facts};
use super::odr;
use crate::crypto::signing::SealKey;
use crate::store::seal::SealBody;

/// `receipt_version` of the documents this code writes.
pub const RECEIPT_VERSION: u32 = 1;
/// A receipt's id is its debate's id after this prefix.
pub const ID_PREFIX: &str = "rcpt_";

/// A decision receipt as served (its canonical JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    pub receipt_version: u32,
    pub receipt_id: String,
    /// `sealed_at` of the newest seal the events are proved into.
    pub issued_at: String,
    /// The facts (`facts::Facts`) as the events state them.
    pub debate: Value,
    /// Every event of the debate's stream, in sequence order.
    pub events: Vec<ReceiptEvent>,
    /// The seals the proofs lead to, by number.
    pub seals: Vec<ReceiptSeal>,
    /// Hex digest of `odr` (without its signatures), as ODR defines it.
    pub odr_digest: String,
    /// The signed ODR v0.2 document.
    pub odr: Value,
}

/// One event as the chain hashes it, with its proof.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptEvent {
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub sequence: i64,
    pub event_type: String,
    pub event_version: String,
    pub payload: Value,
    pub metadata: Value,
    /// Hex.
    pub prev_hash: String,
    /// Hex chain hash (CHAIN.md).
    pub hash: String,
    pub proof: Proof,
}

/// An RFC 6962 inclusion proof of an event hash in a seal's tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Proof {
    pub seal_number: i64,
    pub leaf_index: u64,
    pub tree_size: u64,
    /// Hex sibling hashes from the leaf up.
    pub audit_path: Vec<String>,
}

/// A seal: its body and the signature over the body's canonical bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptSeal {
    pub body: SealBody,
    /// Hex ed25519 signature.
    pub signature: String,
}

/// Why events do not make a receipt.
#[derive(Debug, thiserror::Error)]
pub enum AssembleError {
    #[error("the events do not end the debate")]
    NotFinished,
    #[error("a stored event cannot be decoded: {0}")]
    Decode(#[from] wire::DecodeError),
}

/// The receipt id of a debate.
pub fn receipt_id(debate_id: &str) -> String {
    format!("{ID_PREFIX}{debate_id}")
}

/// Decodes the receipt's events into debate events (through the upcasters).
pub fn debate_events(events: &[ReceiptEvent]) -> Result<Vec<DebateEvent>, wire::DecodeError> {
    events
        .iter()
        .map(|e| {
            let stored = Stored {
                aggregate_type: &e.aggregate_type,
                event_type: &e.event_type,
                event_version: &e.event_version,
            };
            wire::decode(stored, e.payload.clone())
        })
        .collect()
}

/// What the receipt's `debate`, `odr` and `odr_digest` must be for these
/// events and seals, the ODR view unsigned. `None` when the events do not
/// end the debate.
pub fn derive(
    events: &[ReceiptEvent],
    seals: &[ReceiptSeal],
) -> Result<Option<(Facts, String, String, Value)>, AssembleError> {
    let Some(facts) = facts::fold(&debate_events(events)?) else {
        return Ok(None);
    };
    let issued_at = seals
        .iter()
        .map(|s| s.body.sealed_at.clone())
        .max()
        .unwrap_or_default();
    let id = receipt_id(&facts.debate_id);
    let artifact_hash = events.last().map(|e| e.hash.clone()).unwrap_or_default();
    let document = odr::document(
        &facts,
        odr::Frame {
            receipt_id: &id,
            issued_at: &issued_at,
            artifact_hash: &artifact_hash,
        },
    );
    Ok(Some((facts, id, issued_at, document)))
}

/// The receipt of a finished debate from its proved events and their seals.
pub fn assemble(
    events: Vec<ReceiptEvent>,
    seals: Vec<ReceiptSeal>,
    key: &SealKey,
) -> Result<Receipt, AssembleError> {
    let (facts, receipt_id, issued_at, document) =
        derive(&events, &seals)?.ok_or(AssembleError::NotFinished)?;
    let odr = odr::sign(document, key, &issued_at);
    Ok(Receipt {
        receipt_version: RECEIPT_VERSION,
        receipt_id,
        issued_at,
        debate: serde_json::to_value(&facts).unwrap_or(Value::Null),
        events,
        seals,
        odr_digest: odr::digest(&odr),
        odr,
    })
}
