//! The seal half of verification: the seals' own chain, whole, and each
//! seal over the range recomputed from the events stored under it.

use agon_projections::Cursor;

use super::fold::Folded;
use super::{Check, PositionRange, Problem, Scope, VerifyReport};
use crate::crypto::signing::verify_signature;
use crate::store::chain::{GENESIS, Hash, hash_from_slice};
use crate::store::db::with_pool;
use crate::store::scan::{PositionHash, scan};
use crate::store::seal::{SealBody, StoredSeal, seal_hash};
use crate::store::{EventLog, StoreError, merkle};

/// A failed check and what it found.
pub type Fault = (Check, String);

impl EventLog {
    /// Checks every seal's header and link, and recomputes those over an
    /// event of `scope` (from `folded` when the chain scan added them up);
    /// the end of the last seal when they all hold.
    pub(super) async fn verify_seals(
        &self,
        trusted_key: &str,
        seals: Vec<StoredSeal>,
        scope: &Scope<'_>,
        folded: Option<&Folded>,
        report: &mut VerifyReport,
    ) -> Result<Result<Cursor, Problem>, StoreError> {
        let mut prev_hash = hex::encode(GENESIS);
        let mut prev_to = Cursor::START;
        for (index, seal) in seals.into_iter().enumerate() {
            report.seals_checked += 1;
            let expected_number = i64::try_from(index).unwrap_or(i64::MAX) + 1;
            let checked =
                match header_fault(&seal, expected_number, &prev_hash, prev_to, trusted_key)? {
                    Ok(body) => self.content_fault(body, scope, folded).await?,
                    Err(fault) => Err(fault),
                };
            match checked {
                Ok(body) => {
                    prev_hash = hex::encode(&seal.seal_hash);
                    prev_to = body.to;
                }
                Err((check, fault)) => {
                    return Ok(Err(Problem::Seal {
                        seal_number: seal.seal_number,
                        check,
                        fault,
                    }));
                }
            }
        }
        Ok(Ok(prev_to))
    }

    /// The body when the events stored under the seal match it (or none of
    /// them is in `scope`), else what differs.
    async fn content_fault(
        &self,
        body: SealBody,
        scope: &Scope<'_>,
        folded: Option<&Folded>,
    ) -> Result<Result<SealBody, Fault>, StoreError> {
        let (count, head) = match folded.and_then(|f| f.seal(body.seal_number)) {
            Some((count, head)) => (i64::try_from(count).unwrap_or(i64::MAX), head),
            None => {
                let leaves = self.hashes_between(body.from, body.to).await?;
                // A seal over none of the scope's events is left to other
                // runs; one whose events are all gone is reported by every run.
                if !leaves.is_empty() && !leaves.iter().any(|(p, _)| scope.touches(*p)) {
                    return Ok(Ok(body));
                }
                let hashes: Vec<Hash> = leaves.iter().map(|(_, hash)| *hash).collect();
                (
                    i64::try_from(leaves.len()).unwrap_or(i64::MAX),
                    merkle::root(&hashes),
                )
            }
        };
        if count != body.event_count {
            return Ok(Err((
                Check::SealEventCount,
                format!(
                    "covers {} events but {count} are stored between positions {} and {}",
                    body.event_count, body.from.position, body.to.position
                ),
            )));
        }
        if hex::encode(head) != body.merkle_root {
            return Ok(Err((
                Check::SealMerkleRoot,
                format!(
                    "Merkle root differs from the events stored between positions {} and {}",
                    body.from.position, body.to.position
                ),
            )));
        }
        Ok(Ok(body))
    }

    /// Positions and stored hashes of the events in `(from, to]`, in feed order.
    pub(crate) async fn hashes_between(
        &self,
        from: Cursor,
        to: Cursor,
    ) -> Result<Vec<(i64, Hash)>, StoreError> {
        let filter = format!(
            "(txid, position) > ({}, {}) AND (txid, position) <= ({}, {})",
            from.txid, from.position, to.txid, to.position
        );
        let mut batches = scan::<PositionHash>(self.db(), filter, "txid, position");
        let mut leaves = Vec::new();
        while let Some(batch) = batches.recv().await {
            let batch = batch?;
            for row in &batch {
                let hash = hash_from_slice(&row.hash).ok_or(StoreError::Malformed {
                    position: row.position,
                    what: "hash is not 32 bytes",
                })?;
                leaves.push((row.position, hash));
            }
            batches.recycle(batch);
        }
        Ok(leaves)
    }

    /// Events of `range` after `cursor`: chained, not sealed yet.
    pub(super) async fn count_after(
        &self,
        cursor: Cursor,
        range: PositionRange,
    ) -> Result<u64, StoreError> {
        let count: i64 = with_pool!(self.db().reader(), pool => {
            sqlx::query_scalar(
                "SELECT COUNT(*) FROM events WHERE (txid, position) > ($1, $2) \
                 AND position >= $3 AND position <= $4",
            )
            .bind(cursor.txid)
            .bind(cursor.position)
            .bind(range.from)
            .bind(range.to)
            .fetch_one(pool)
            .await?
        });
        Ok(u64::try_from(count).unwrap_or_default())
    }
}

/// Checks a seal on its own and against the one before it: its body, number,
/// hash, key, signature and link. Returns its body when they hold.
pub fn header_fault(
    seal: &StoredSeal,
    expected_number: i64,
    prev_hash: &str,
    prev_to: Cursor,
    trusted_key: &str,
) -> Result<Result<SealBody, Fault>, StoreError> {
    let Ok(body) = serde_json::from_str::<SealBody>(&seal.body) else {
        return Ok(Err((
            Check::SealBody,
            "body is not a valid seal".to_owned(),
        )));
    };
    let canonical = body.canonical_bytes()?;
    let checks = [
        (
            seal.seal_number == expected_number && body.seal_number == expected_number,
            Check::SealNumber,
            format!("expected seal number {expected_number}"),
        ),
        (
            canonical == seal.body.as_bytes(),
            Check::SealBody,
            "body is not in canonical form".to_owned(),
        ),
        (
            seal_hash(&canonical)[..] == seal.seal_hash[..],
            Check::SealHash,
            "seal_hash does not match its body".to_owned(),
        ),
        (
            body.public_key == trusted_key,
            Check::SealKey,
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
            Check::SealSignature,
            "signature is invalid".to_owned(),
        ),
        (
            body.prev_seal_hash == prev_hash,
            Check::SealLink,
            "prev_seal_hash does not link to the previous seal".to_owned(),
        ),
        (
            body.from == prev_to,
            Check::SealLink,
            "does not start where the previous seal ended".to_owned(),
        ),
        (
            seal.to_txid == body.to.txid && seal.to_position == body.to.position,
            Check::SealBody,
            "stored end cursor differs from its body".to_owned(),
        ),
    ];
    if let Some((_, check, fault)) = checks.into_iter().find(|(ok, _, _)| !ok) {
        return Ok(Err((check, fault)));
    }
    Ok(Ok(body))
}
