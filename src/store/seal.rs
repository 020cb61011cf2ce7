//! Seals: signed RFC 6962 Merkle roots over the event hashes of the feed,
//! each linked to the one before, so that deleting, reordering or rewriting
//! events (even with their hashes recomputed) shows.
//!
//! Seal n covers every event whose feed cursor lies in `(from, to]`, in feed
//! order. Sealing reads only the feed, which never returns a transaction that
//! could still commit behind it, so no event is ever left between two seals.

use agon_projections::Cursor;
use chrono::{SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::chain::{GENESIS, Hash, canonical_json};
use super::db::with_pool;
use super::{EventLog, StoreError, merkle};
use crate::crypto::signing::SealKey;

/// Most events one seal covers; a longer backlog is sealed in several seals.
pub const MAX_EVENTS_PER_SEAL: usize = 100_000;
const PAGE: i64 = 5_000;

/// What a seal states; its canonical JSON is what is hashed and signed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SealBody {
    pub seal_number: i64,
    pub from: Cursor,
    pub to: Cursor,
    pub event_count: i64,
    /// Hex RFC 6962 tree head over the covered events' hashes.
    pub merkle_root: String,
    /// Hex `seal_hash` of the previous seal; 64 zeros for seal 1.
    pub prev_seal_hash: String,
    pub sealed_at: String,
    /// Hex ed25519 public key that signed this seal.
    pub public_key: String,
}

/// A seal as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StoredSeal {
    pub seal_number: i64,
    pub body: String,
    pub seal_hash: Vec<u8>,
    pub signature: Vec<u8>,
    pub to_txid: i64,
    pub to_position: i64,
}

impl SealBody {
    pub fn canonical_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        canonical_json(&serde_json::to_value(self)?)
    }
}

/// `SHA-256` of a seal body's canonical bytes.
pub fn seal_hash(canonical_body: &[u8]) -> Hash {
    Sha256::digest(canonical_body).into()
}

impl EventLog {
    /// Seals the events committed since the last seal; `None` when there are none.
    pub async fn seal_now(&self, key: &SealKey) -> Result<Option<SealBody>, StoreError> {
        let last = self.last_seal().await?;
        let (seal_number, from, prev_seal_hash) = match &last {
            Some(seal) => (
                seal.seal_number + 1,
                Cursor {
                    txid: seal.to_txid,
                    position: seal.to_position,
                },
                hex::encode(&seal.seal_hash),
            ),
            None => (1, Cursor::START, hex::encode(GENESIS)),
        };
        let mut leaves: Vec<Hash> = Vec::new();
        let mut to = from;
        while leaves.len() < MAX_EVENTS_PER_SEAL {
            let room = i64::try_from(MAX_EVENTS_PER_SEAL - leaves.len()).unwrap_or(PAGE);
            let page = self.read_feed_hashes(to, PAGE.min(room)).await?;
            let Some(last_event) = page.last() else { break };
            to = last_event.cursor();
            for event in page {
                leaves.push(event.stored_hash()?);
            }
        }
        if leaves.is_empty() {
            return Ok(None);
        }
        let body = SealBody {
            seal_number,
            from,
            to,
            event_count: i64::try_from(leaves.len()).unwrap_or(i64::MAX),
            merkle_root: hex::encode(merkle::root(&leaves)),
            prev_seal_hash,
            sealed_at: Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true),
            public_key: key.public_hex(),
        };
        let canonical = body.canonical_bytes()?;
        let body_text = String::from_utf8_lossy(&canonical).into_owned();
        let inserted = with_pool!(self.db().writer(), pool => {
            sqlx::query(
                "INSERT INTO seals (seal_number, body, seal_hash, signature, to_txid, to_position) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (seal_number) DO NOTHING",
            )
            .bind(seal_number)
            .bind(&body_text)
            .bind(&seal_hash(&canonical)[..])
            .bind(&key.sign(&canonical)[..])
            .bind(to.txid)
            .bind(to.position)
            .execute(pool)
            .await?
            .rows_affected()
        });
        self.db().sync_log().await?;
        // Another replica sealing at the same moment wins the number; its seal
        // covers the same events, so nothing is lost by standing aside.
        Ok((inserted == 1).then_some(body))
    }

    /// The newest seal, if any.
    pub async fn last_seal(&self) -> Result<Option<StoredSeal>, StoreError> {
        Ok(with_pool!(self.db().reader(), pool => {
            sqlx::query_as(
                "SELECT seal_number, body, seal_hash, signature, to_txid, to_position \
                 FROM seals ORDER BY seal_number DESC LIMIT 1",
            )
            .fetch_optional(pool)
            .await?
        }))
    }

    /// The first seal covering the event at `cursor`; `None` while it is unsealed.
    pub async fn seal_covering(&self, cursor: Cursor) -> Result<Option<StoredSeal>, StoreError> {
        Ok(with_pool!(self.db().reader(), pool => {
            sqlx::query_as(
                "SELECT seal_number, body, seal_hash, signature, to_txid, to_position \
                 FROM seals WHERE to_txid > $1 OR (to_txid = $1 AND to_position >= $2) \
                 ORDER BY seal_number LIMIT 1",
            )
            .bind(cursor.txid)
            .bind(cursor.position)
            .fetch_optional(pool)
            .await?
        }))
    }

    /// The event hashes a seal covers, in its leaf order: the feed in
    /// `(from, to]`, as it was read when the seal was made.
    pub async fn seal_leaves(&self, body: &SealBody) -> Result<Vec<(Cursor, Hash)>, StoreError> {
        let mut leaves = Vec::new();
        let mut at = body.from;
        while at < body.to {
            let page = self.read_feed_hashes(at, PAGE).await?;
            let Some(last) = page.last() else { break };
            at = last.cursor();
            for event in page.into_iter().take_while(|e| e.cursor() <= body.to) {
                leaves.push((event.cursor(), event.stored_hash()?));
            }
        }
        Ok(leaves)
    }

    /// Every seal in order.
    pub async fn seals(&self) -> Result<Vec<StoredSeal>, StoreError> {
        Ok(with_pool!(self.db().reader(), pool => {
            sqlx::query_as(
                "SELECT seal_number, body, seal_hash, signature, to_txid, to_position \
                 FROM seals ORDER BY seal_number",
            )
            .fetch_all(pool)
            .await?
        }))
    }
}
