//! The offline receipt verifier: every check a receipt must pass with only
//! the seal public key, each reported by name, and the first that fails.
//!
//! Together the checks cover every byte: the bytes must be canonical (so
//! nothing is unread), the events must hash to their chain, the hashes must
//! prove into signed seals, and everything else (facts, ids, times, the ODR
//! view and its digest) must equal what those events derive to.

use serde::Serialize;
use utoipa::ToSchema;

use super::document::{self, Receipt};
use super::odr;
use crate::crypto::signing::verify_signature;
use crate::store::canonical;
use crate::store::chain::{ChainedFields, GENESIS, Hash};
use crate::store::merkle;

/// The checks, in the order they run.
pub const CHECKS: [&str; 7] = [
    "canonical_form",
    "structure",
    "event_hashes",
    "seal_signature",
    "inclusion",
    "content_digest",
    "odr_signature",
];

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct CheckOutcome {
    /// One of canonical_form, structure, event_hashes, seal_signature,
    /// inclusion, content_digest, odr_signature.
    pub name: String,
    /// `pass`, `fail`, or `skip` (an earlier check it needs failed).
    pub status: String,
    pub detail: String,
}

/// What verifying a receipt found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Report {
    /// Whether every check passed.
    pub valid: bool,
    pub receipt_id: Option<String>,
    pub checks: Vec<CheckOutcome>,
    /// The name of the first check that failed, if any.
    pub first_failure: Option<String>,
}

struct Run {
    checks: Vec<CheckOutcome>,
}

impl Run {
    fn record(&mut self, name: &str, outcome: Result<String, String>) -> bool {
        let (status, detail, ok) = match outcome {
            Ok(detail) => ("pass", detail, true),
            Err(detail) => ("fail", detail, false),
        };
        self.checks.push(CheckOutcome {
            name: name.to_owned(),
            status: status.to_owned(),
            detail,
        });
        ok
    }

    fn finish(mut self, receipt_id: Option<String>) -> Report {
        for name in CHECKS.iter().skip(self.checks.len()) {
            self.checks.push(CheckOutcome {
                name: (*name).to_owned(),
                status: "skip".to_owned(),
                detail: "not run: an earlier check it depends on failed".to_owned(),
            });
        }
        let first_failure = self
            .checks
            .iter()
            .find(|c| c.status == "fail")
            .map(|c| c.name.clone());
        Report {
            valid: first_failure.is_none(),
            receipt_id,
            checks: self.checks,
            first_failure,
        }
    }
}

/// Verifies receipt bytes against the seal public key.
pub fn verify(bytes: &[u8], public_key: &[u8; 32]) -> Report {
    let mut run = Run { checks: Vec::new() };
    let value = match canonical::check(bytes) {
        Ok(value) => value,
        Err(e) => {
            run.record(CHECKS[0], Err(e.to_string()));
            return run.finish(None);
        }
    };
    run.record(
        CHECKS[0],
        Ok("RFC 8785 canonical, no duplicate member names".into()),
    );
    let receipt: Receipt = match serde_json::from_value(value) {
        Ok(receipt) => receipt,
        Err(e) => {
            run.record(CHECKS[1], Err(format!("not a receipt: {e}")));
            return run.finish(None);
        }
    };
    let id = Some(receipt.receipt_id.clone());
    if receipt.receipt_version != document::RECEIPT_VERSION {
        run.record(CHECKS[1], Err("unknown receipt_version".into()));
        return run.finish(id);
    }
    run.record(
        CHECKS[1],
        Ok(format!("receipt_version {}", receipt.receipt_version)),
    );
    let hashes = match event_hashes(&receipt) {
        Ok(hashes) => hashes,
        Err(e) => {
            run.record(CHECKS[2], Err(e));
            return run.finish(id);
        }
    };
    run.record(
        CHECKS[2],
        Ok(format!("{} events recompute to their chain", hashes.len())),
    );
    let seals_ok = run.record(CHECKS[3], seal_signatures(&receipt, public_key));
    let proofs_ok = seals_ok && run.record(CHECKS[4], inclusion(&receipt, &hashes));
    let content_ok = proofs_ok && run.record(CHECKS[5], content(&receipt));
    if content_ok {
        let signed = odr::verify(&receipt.odr, public_key)
            .map(|()| "the ODR v0.2 signature verifies".to_owned())
            .map_err(|e| e.to_string());
        run.record(CHECKS[6], signed);
    }
    run.finish(id)
}

fn decode_hash(text: &str, what: &str) -> Result<Hash, String> {
    hex::decode(text)
        .ok()
        .and_then(|b| Hash::try_from(b.as_slice()).ok())
        .filter(|h| hex::encode(h) == text)
        .ok_or_else(|| format!("{what} is not 64 lowercase hex digits"))
}

/// Each event's chain hash recomputed, checked and linked from sequence 1.
fn event_hashes(receipt: &Receipt) -> Result<Vec<Hash>, String> {
    let mut previous = GENESIS;
    let mut hashes = Vec::with_capacity(receipt.events.len());
    let Some(first) = receipt.events.first() else {
        return Err("the receipt holds no events".into());
    };
    for (index, event) in receipt.events.iter().enumerate() {
        let at = format!("event {}", event.sequence);
        if event.aggregate_type != first.aggregate_type || event.aggregate_id != first.aggregate_id
        {
            return Err(format!("{at} is of another stream"));
        }
        if usize::try_from(event.sequence).ok() != Some(index + 1) {
            return Err(format!("{at} is out of sequence (expected {})", index + 1));
        }
        if decode_hash(&event.prev_hash, &at)? != previous {
            return Err(format!(
                "{at}: prev_hash is not the hash of the event before"
            ));
        }
        let payload = canonical::to_string(&event.payload);
        let metadata = canonical::to_string(&event.metadata);
        let fields = ChainedFields {
            aggregate_type: &event.aggregate_type,
            aggregate_id: &event.aggregate_id,
            sequence: event.sequence,
            event_type: &event.event_type,
            event_version: &event.event_version,
            payload: &payload,
            metadata: &metadata,
        };
        let computed = fields.hash(&previous).map_err(|e| format!("{at}: {e}"))?;
        if decode_hash(&event.hash, &at)? != computed {
            return Err(format!("{at}: its fields do not hash to its hash"));
        }
        hashes.push(computed);
        previous = computed;
    }
    Ok(hashes)
}

fn seal_signatures(receipt: &Receipt, public_key: &[u8; 32]) -> Result<String, String> {
    if receipt.seals.is_empty() {
        return Err("the receipt holds no seal".into());
    }
    let key_hex = hex::encode(public_key);
    for (index, seal) in receipt.seals.iter().enumerate() {
        let number = seal.body.seal_number;
        if index > 0 && receipt.seals[index - 1].body.seal_number >= number {
            return Err("seals are not in increasing number order".into());
        }
        if seal.body.public_key != key_hex {
            return Err(format!("seal {number} names another public key"));
        }
        let body = seal.body.canonical_bytes().map_err(|e| e.to_string())?;
        let signature = hex::decode(&seal.signature).unwrap_or_default();
        if hex::encode(&signature) != seal.signature
            || !verify_signature(public_key, &body, &signature)
        {
            return Err(format!("seal {number}: the signature does not verify"));
        }
    }
    Ok(format!("{} seal(s) signed by the key", receipt.seals.len()))
}

fn inclusion(receipt: &Receipt, hashes: &[Hash]) -> Result<String, String> {
    for (event, hash) in receipt.events.iter().zip(hashes) {
        let proof = &event.proof;
        let at = format!("event {}", event.sequence);
        let seal = receipt
            .seals
            .iter()
            .find(|s| s.body.seal_number == proof.seal_number)
            .ok_or_else(|| {
                format!(
                    "{at}: its proof names seal {}, not in the receipt",
                    proof.seal_number
                )
            })?;
        if i64::try_from(proof.tree_size).ok() != Some(seal.body.event_count) {
            return Err(format!(
                "{at}: tree_size is not seal {}'s event_count",
                proof.seal_number
            ));
        }
        let root = decode_hash(&seal.body.merkle_root, "merkle_root")?;
        let path = proof
            .audit_path
            .iter()
            .map(|h| decode_hash(h, "an audit path hash"))
            .collect::<Result<Vec<_>, _>>()?;
        if !merkle::verify_inclusion(hash, proof.leaf_index, proof.tree_size, &path, &root) {
            return Err(format!(
                "{at}: the audit path does not lead to seal {}'s root",
                proof.seal_number
            ));
        }
    }
    let used = receipt.seals.iter().all(|s| {
        receipt
            .events
            .iter()
            .any(|e| e.proof.seal_number == s.body.seal_number)
    });
    if !used {
        return Err("a seal in the receipt proves none of its events".into());
    }
    Ok(format!("{} inclusion proofs verify", hashes.len()))
}

fn content(receipt: &Receipt) -> Result<String, String> {
    let derived = document::derive(&receipt.events, &receipt.seals).map_err(|e| e.to_string())?;
    let Some((facts, id, issued_at, mut expected)) = derived else {
        return Err("the events do not end the debate".into());
    };
    if receipt.receipt_id != id {
        return Err(format!("receipt_id is not {id}"));
    }
    if receipt.issued_at != issued_at {
        return Err("issued_at is not the newest seal's sealed_at".into());
    }
    // Compared as canonical bytes: parsed `1` and computed `1.0` are one JSON number.
    let same =
        |a: &serde_json::Value, b: &serde_json::Value| canonical::to_vec(a) == canonical::to_vec(b);
    if !same(
        &receipt.debate,
        &serde_json::to_value(&facts).map_err(|e| e.to_string())?,
    ) {
        return Err("debate does not say what the events say".into());
    }
    expected["signatures"] = receipt.odr["signatures"].clone();
    if !same(&receipt.odr, &expected) {
        return Err("the ODR view does not say what the events say".into());
    }
    if receipt.odr_digest != odr::digest(&receipt.odr) {
        return Err("odr_digest is not the ODR view's digest".into());
    }
    Ok(format!(
        "content equals the events; odr_digest sha-256:{}",
        receipt.odr_digest
    ))
}
