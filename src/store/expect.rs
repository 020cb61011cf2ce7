//! Saved seals: a seal copied out of the log (`agon seal --json`) and kept
//! elsewhere, so that a later `agon verify --expect-seal FILE` can tell that
//! the newest events were not cut off together with the seals over them.
//!
//! Verification alone cannot see such a truncation: a log whose tail events
//! and tail seals are both gone is still a consistent, shorter log. A saved
//! seal names a point the log must still reach. Seals chain by
//! `prev_seal_hash` and each starts where the one before ended, so once the
//! log holds seal n exactly as saved and verifies, every event sealed through
//! seal n is still there and every later seal extends it.

use serde::{Deserialize, Serialize};

use super::chain::hash_from_slice;
use super::seal::{SealBody, StoredSeal, seal_hash};
use super::verify::{Check, Problem};
use super::{EventLog, StoreError};
use crate::crypto::signing::verify_signature;

/// The file a user keeps: the seal's body as JSON, its hash and signature in
/// lower-case hex (schema `event-schemas/saved-seal.v1.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedSeal {
    pub body: SealBody,
    pub seal_hash: String,
    pub signature: String,
}

impl SavedSeal {
    /// The saved form of a stored seal.
    pub fn from_stored(seal: &StoredSeal) -> Result<Self, StoreError> {
        Ok(Self {
            body: serde_json::from_str(&seal.body)?,
            seal_hash: hex::encode(&seal.seal_hash),
            signature: hex::encode(&seal.signature),
        })
    }

    /// What is wrong with the saved seal on its own: its hash must be that
    /// of its body and its signature must verify under its own public key.
    pub fn self_fault(&self) -> Result<Option<&'static str>, StoreError> {
        let canonical = self.body.canonical_bytes()?;
        if hex::encode(seal_hash(&canonical)) != self.seal_hash.to_ascii_lowercase() {
            return Ok(Some("its seal_hash is not the SHA-256 of its body"));
        }
        let signature = hex::decode(&self.signature).unwrap_or_default();
        let key = hex::decode(&self.body.public_key).unwrap_or_default();
        if !verify_signature(&key, &canonical, &signature) {
            return Ok(Some("its signature does not verify under its public_key"));
        }
        Ok(None)
    }
}

impl EventLog {
    /// Checks that the log holds `saved` exactly: the number of later seals
    /// when it does, else the problem, located at the saved seal's number.
    /// Meant to run after [`EventLog::verify`] found the log intact, which
    /// already shows that every later seal links back to it.
    pub async fn find_saved_seal(
        &self,
        saved: &SavedSeal,
    ) -> Result<Result<i64, Problem>, StoreError> {
        let number = saved.body.seal_number;
        let problem = |fault: String| Problem::Seal {
            seal_number: number,
            check: Check::SavedSeal,
            fault,
        };
        let last = self.last_seal().await?.map_or(0, |seal| seal.seal_number);
        let Some(stored) = self.seal_numbered(number).await? else {
            return Ok(Err(problem(format!(
                "the saved seal is missing: the log ends at seal {last}, so events sealed \
                 through position {} (txid {}) may have been removed",
                saved.body.to.position, saved.body.to.txid
            ))));
        };
        let in_log = SavedSeal::from_stored(&stored)?;
        if let Some(field) = first_difference(&in_log.body, &saved.body) {
            return Ok(Err(problem(format!(
                "differs from the saved seal in {field}: the log's events up to it were changed, \
                 removed or re-sealed"
            ))));
        }
        let same_hash = hash_from_slice(&stored.seal_hash)
            .is_some_and(|hash| hex::encode(hash) == saved.seal_hash.to_ascii_lowercase());
        if !same_hash || in_log.signature != saved.signature.to_ascii_lowercase() {
            return Ok(Err(problem(
                "its seal_hash or signature differs from the saved seal".to_owned(),
            )));
        }
        Ok(Ok(last - number))
    }

    async fn seal_numbered(&self, number: i64) -> Result<Option<StoredSeal>, StoreError> {
        Ok(super::db::with_pool!(self.db().reader(), pool => {
            sqlx::query_as(
                "SELECT seal_number, body, seal_hash, signature, to_txid, to_position \
                 FROM seals WHERE seal_number = $1",
            )
            .bind(number)
            .fetch_optional(pool)
            .await?
        }))
    }
}

/// The name of the first field in which two seal bodies differ.
fn first_difference(log: &SealBody, saved: &SealBody) -> Option<&'static str> {
    [
        ("event_count", log.event_count == saved.event_count),
        ("merkle_root", log.merkle_root == saved.merkle_root),
        ("from", log.from == saved.from),
        ("to", log.to == saved.to),
        ("prev_seal_hash", log.prev_seal_hash == saved.prev_seal_hash),
        ("public_key", log.public_key == saved.public_key),
        ("sealed_at", log.sealed_at == saved.sealed_at),
    ]
    .into_iter()
    .find_map(|(field, same)| (!same).then_some(field))
}
