//! Full verification of the log: every stream's hash chain, then every seal.
//! Used by `agon verify` and, later, by the audit endpoints.
//!
//! It reports the first problem found: the first broken event in position
//! order, or, when every chain holds, the first seal that does not.

use std::collections::HashMap;
use std::fmt;

use agon_projections::Cursor;
use futures::StreamExt;
use serde::Serialize;

use super::chain::{GENESIS, Hash};
use super::db::with_pool;
use super::feed::FeedHash;
use super::rows::{EVENT_COLUMNS, StoredEvent};
use super::seal::{SealBody, StoredSeal, seal_hash};
use super::{EventLog, StoreError, merkle};
use crate::crypto::signing::verify_signature;

/// The outcome of a verification run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerifyReport {
    pub events_checked: u64,
    pub streams_checked: u64,
    pub seals_checked: u64,
    /// Events after the last seal: chained, not yet sealed.
    pub unsealed_events: u64,
    /// The first problem; `None` when the log is intact.
    pub problem: Option<Problem>,
    /// The seal given by `--expect-seal`, when it was found as saved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saved_seal: Option<SavedSealFound>,
}

/// A saved seal found in the log exactly as saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SavedSealFound {
    pub seal_number: i64,
    /// Seals after it, each linked back to it.
    pub later_seals: i64,
}

impl VerifyReport {
    pub fn intact(&self) -> bool {
        self.problem.is_none()
    }
}

/// The first thing found wrong.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Problem {
    Event {
        aggregate_type: String,
        aggregate_id: String,
        sequence: i64,
        position: i64,
        fault: String,
    },
    Seal {
        seal_number: i64,
        fault: String,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Event {
                aggregate_type,
                aggregate_id,
                sequence,
                position,
                fault,
            } => write!(
                f,
                "event {aggregate_type}/{aggregate_id} sequence {sequence} (position {position}): {fault}"
            ),
            Problem::Seal { seal_number, fault } => write!(f, "seal {seal_number}: {fault}"),
        }
    }
}

impl EventLog {
    /// Checks every chain, then every seal against `trusted_key` (hex public key).
    pub async fn verify(&self, trusted_key: &str) -> Result<VerifyReport, StoreError> {
        let mut report = VerifyReport {
            events_checked: 0,
            streams_checked: 0,
            seals_checked: 0,
            unsealed_events: 0,
            problem: None,
            saved_seal: None,
        };
        report.problem = self.verify_chains(&mut report).await?;
        if report.problem.is_none() {
            report.problem = self.verify_seals(trusted_key, &mut report).await?;
        }
        Ok(report)
    }

    async fn verify_chains(
        &self,
        report: &mut VerifyReport,
    ) -> Result<Option<Problem>, StoreError> {
        let sql = format!("SELECT {EVENT_COLUMNS} FROM events ORDER BY position");
        let mut heads: HashMap<(String, String), (i64, Hash)> = HashMap::new();
        with_pool!(self.db().reader(), pool => {
            let mut rows = sqlx::query_as::<_, StoredEvent>(&sql).fetch(pool);
            while let Some(row) = rows.next().await {
                let event = row?;
                report.events_checked += 1;
                let key = (event.aggregate_type.clone(), event.aggregate_id.clone());
                let (last_sequence, last_hash) = heads.get(&key).copied().unwrap_or((0, GENESIS));
                if let Some(fault) = chain_fault(&event, last_sequence, &last_hash) {
                    return Ok(Some(Problem::Event {
                        aggregate_type: event.aggregate_type,
                        aggregate_id: event.aggregate_id,
                        sequence: event.sequence,
                        position: event.position,
                        fault,
                    }));
                }
                let hash = event.stored_hash()?;
                heads.insert(key, (event.sequence, hash));
            }
        });
        report.streams_checked = heads.len() as u64;
        Ok(None)
    }

    async fn verify_seals(
        &self,
        trusted_key: &str,
        report: &mut VerifyReport,
    ) -> Result<Option<Problem>, StoreError> {
        let mut prev_hash = hex::encode(GENESIS);
        let mut prev_to = Cursor::START;
        let mut sealed = 0u64;
        for (index, seal) in self.seals().await?.into_iter().enumerate() {
            report.seals_checked += 1;
            let expected_number = i64::try_from(index).unwrap_or(i64::MAX) + 1;
            let fault = match self
                .seal_fault(&seal, expected_number, &prev_hash, prev_to, trusted_key)
                .await?
            {
                Ok(body) => {
                    sealed += u64::try_from(body.event_count).unwrap_or_default();
                    prev_hash = hex::encode(&seal.seal_hash);
                    prev_to = body.to;
                    continue;
                }
                Err(fault) => fault,
            };
            return Ok(Some(Problem::Seal {
                seal_number: seal.seal_number,
                fault,
            }));
        }
        report.unsealed_events = report.events_checked.saturating_sub(sealed);
        Ok(None)
    }

    /// The seal's body when it holds, else what is wrong with it.
    async fn seal_fault(
        &self,
        seal: &StoredSeal,
        expected_number: i64,
        prev_hash: &str,
        prev_to: Cursor,
        trusted_key: &str,
    ) -> Result<Result<SealBody, String>, StoreError> {
        let Ok(body) = serde_json::from_str::<SealBody>(&seal.body) else {
            return Ok(Err("body is not a valid seal".to_owned()));
        };
        let canonical = body.canonical_bytes()?;
        let checks = [
            (
                seal.seal_number == expected_number && body.seal_number == expected_number,
                format!("expected seal number {expected_number}"),
            ),
            (
                canonical == seal.body.as_bytes(),
                "body is not in canonical form".to_owned(),
            ),
            (
                seal_hash(&canonical)[..] == seal.seal_hash[..],
                "seal_hash does not match its body".to_owned(),
            ),
            (
                body.public_key == trusted_key,
                format!(
                    "signed by key {} which is not the trusted key {trusted_key}",
                    body.public_key
                ),
            ),
            (
                verify_signature(
                    &hex::decode(&body.public_key).unwrap_or_default(),
                    &canonical,
                    &seal.signature,
                ),
                "signature is invalid".to_owned(),
            ),
            (
                body.prev_seal_hash == prev_hash,
                "prev_seal_hash does not link to the previous seal".to_owned(),
            ),
            (
                body.from == prev_to,
                "does not start where the previous seal ended".to_owned(),
            ),
            (
                seal.to_txid == body.to.txid && seal.to_position == body.to.position,
                "stored end cursor differs from its body".to_owned(),
            ),
        ];
        if let Some((_, fault)) = checks.into_iter().find(|(ok, _)| !ok) {
            return Ok(Err(fault));
        }
        let leaves = self.hashes_between(body.from, body.to).await?;
        let count = i64::try_from(leaves.len()).unwrap_or(i64::MAX);
        if count != body.event_count {
            return Ok(Err(format!(
                "covers {} events but {count} are stored between positions {} and {}",
                body.event_count, body.from.position, body.to.position
            )));
        }
        if hex::encode(merkle::root(&leaves)) != body.merkle_root {
            return Ok(Err(format!(
                "Merkle root differs from the events stored between positions {} and {}",
                body.from.position, body.to.position
            )));
        }
        Ok(Ok(body))
    }

    /// Stored hashes of the events in `(from, to]`, in feed order.
    async fn hashes_between(&self, from: Cursor, to: Cursor) -> Result<Vec<Hash>, StoreError> {
        let rows: Vec<FeedHash> = with_pool!(self.db().reader(), pool => {
            sqlx::query_as(
                "SELECT txid, position, hash FROM events \
                 WHERE (txid, position) > ($1, $2) AND (txid, position) <= ($3, $4) \
                 ORDER BY txid, position",
            )
            .bind(from.txid)
            .bind(from.position)
            .bind(to.txid)
            .bind(to.position)
            .fetch_all(pool)
            .await?
        });
        rows.iter().map(FeedHash::stored_hash).collect()
    }
}

/// What is wrong with `event` given its stream's previous sequence and hash.
fn chain_fault(event: &StoredEvent, last_sequence: i64, last_hash: &Hash) -> Option<String> {
    let expected = last_sequence + 1;
    if event.sequence != expected {
        return Some(if event.sequence > expected {
            format!("sequence {expected} is missing before it")
        } else {
            format!("sequence out of order: expected {expected}")
        });
    }
    let Ok(prev_hash) = event.stored_prev_hash() else {
        return Some("prev_hash is not 32 bytes".to_owned());
    };
    if &prev_hash != last_hash {
        return Some("prev_hash does not match the hash of the previous event".to_owned());
    }
    match (event.recompute_hash(&prev_hash), event.stored_hash()) {
        (Ok(computed), Ok(stored)) if computed == stored => None,
        (Ok(_), Ok(_)) => Some("hash does not match the event's contents".to_owned()),
        (Err(e), _) | (_, Err(e)) => Some(e.to_string()),
    }
}
