//! The log's links without their contents: what an outside verifier needs
//! to recompute every seal's Merkle root and check every stream's links
//! (the SOC 2 evidence package), without payloads leaving the service.

use serde::Serialize;

use crate::store::db::with_pool;
use crate::store::{EventLog, StoreError};

/// One event's place, stream, type and hashes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainLink {
    pub position: i64,
    pub txid: i64,
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub sequence: i64,
    pub event_type: String,
    /// Hex.
    pub prev_hash: String,
    /// Hex.
    pub hash: String,
}

type LinkRow = (i64, i64, String, String, i64, String, Vec<u8>, Vec<u8>);

impl EventLog {
    /// The links of up to `limit` events in feed order (seal order).
    pub async fn chain_links(&self, limit: i64) -> Result<Vec<ChainLink>, StoreError> {
        let rows: Vec<LinkRow> = with_pool!(self.db().reader(), pool => {
            sqlx::query_as(
                "SELECT position, txid, aggregate_type, aggregate_id, sequence, event_type, \
                 prev_hash, hash FROM events ORDER BY txid, position LIMIT $1",
            )
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(|r| ChainLink {
                position: r.0,
                txid: r.1,
                aggregate_type: r.2,
                aggregate_id: r.3,
                sequence: r.4,
                event_type: r.5,
                prev_hash: hex::encode(r.6),
                hash: hex::encode(r.7),
            })
            .collect())
    }

    /// How many events the log holds.
    pub async fn event_count(&self) -> Result<i64, StoreError> {
        Ok(with_pool!(self.db().reader(), pool => {
            sqlx::query_scalar("SELECT COUNT(*) FROM events").fetch_one(pool).await?
        }))
    }
}
