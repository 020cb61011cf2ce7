//! Decision receipts: for a finished debate, its facts, its events' hashes
//! with RFC 6962 inclusion proofs into signed seals, and a signed Open
//! Decision Receipt (ODR v0.2) view (`event-schemas/RECEIPT.md`).
//!
//! A receipt is derived from the log and the seals alone and is the same
//! bytes every time (ed25519 signatures are deterministic and every time in
//! it comes from a seal), so it is built when asked for rather than stored.
//! A finished debate not yet sealed is sealed at once.

pub mod check;
pub mod document;
pub mod facts;
pub mod odr;
pub mod retention;

use std::collections::BTreeMap;

use agon_aggregates::debate::DebateEvent;
use agon_projections::Cursor;
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::clock::Clock;
use crate::crypto::signing::SealKey;
use crate::debates::Debates;
use crate::projection::Documents;
use crate::store::canonical;
use crate::store::seal::{SealBody, StoredSeal};
use crate::store::sealer::seal_backlog;
use crate::store::{EventLog, StoreError, StoredEvent, merkle};
use document::{AssembleError, Proof, Receipt, ReceiptEvent, ReceiptSeal};

/// The aggregate type of debate streams.
const DEBATE: &str = "debate";

#[derive(Debug, thiserror::Error)]
pub enum ReceiptError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the debate has not finished; its receipt is issued when it completes or fails")]
    NotFinished,
    #[error("the debate's events are not sealed yet")]
    NotSealed,
    #[error("cannot build the receipt: {0}")]
    Assemble(#[from] AssembleError),
    #[error("a stored seal is malformed: {0}")]
    Seal(#[source] serde_json::Error),
    #[error("cannot record a receipt's expiry: {0}")]
    Expiry(String),
}

/// A line of the receipts list.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReceiptSummary {
    pub receipt_id: String,
    pub debate_id: String,
    pub topic: String,
    /// `completed` or `failed`.
    pub status: String,
    /// The retention period passed: the receipt is no longer served.
    pub expired: bool,
}

/// The receipts service (cheap to clone: one shared part).
#[derive(Debug, Clone)]
pub struct Receipts(std::sync::Arc<Parts>);

#[derive(Debug)]
pub struct Parts {
    log: EventLog,
    key: SealKey,
    debates: Debates,
    documents: Documents,
    clock: Clock,
    retention: std::sync::Arc<retention::Retention>,
}

impl Receipts {
    pub fn new(
        log: EventLog,
        key: SealKey,
        debates: Debates,
        clock: Clock,
        retention: std::sync::Arc<retention::Retention>,
    ) -> Self {
        Self(std::sync::Arc::new(Parts {
            documents: Documents::new(log.clone()),
            log,
            key,
            debates,
            clock,
            retention,
        }))
    }

    /// The public key that verifies seals and ODR signatures.
    pub fn public_key(&self) -> [u8; 32] {
        self.key.public_key()
    }

    /// The caller's receipts (all for admins), newest debate first, of debates
    /// in `status` (`completed` or `failed`), with how many there are.
    pub async fn list(
        &self,
        caller: &Caller,
        status: &str,
        limit: u32,
        offset: u64,
    ) -> Result<(Vec<ReceiptSummary>, u64), ReceiptError> {
        let (debates, total) = self
            .debates
            .list(caller, Some(status), limit, offset)
            .await?;
        let mut items = Vec::with_capacity(debates.len());
        for d in debates {
            items.push(ReceiptSummary {
                receipt_id: document::receipt_id(&d.id),
                status: d.status.as_str().to_owned(),
                expired: self.expired(&d.id).await?,
                debate_id: d.id,
                topic: d.topic,
            });
        }
        Ok((items, total))
    }

    /// The receipt `receipt_id`, if the caller owns its
    /// debate (or is an admin).
    pub async fn get(
        &self,
        caller: &Caller,
        receipt_id: &str,
    ) -> Result<Option<Receipt>, ReceiptError> {
        let Some(debate_id) = receipt_id.strip_prefix(document::ID_PREFIX) else {
            return Ok(None);
        };
        let mut events = self.log.load_stream(DEBATE, debate_id, 0).await?;
        let Some(first) = events.first() else {
            return Ok(None);
        };
        if !owns(caller, first) || self.expired(debate_id).await? {
            return Ok(None);
        }
        // The receipt covers the debate up to its end; what follows it
        // (publishing to the gallery) is not part of the decision, and the
        // receipt stays the same bytes whatever follows.
        let Some(end) = events.iter().position(|e| ends_debate(&e.event_type)) else {
            return Err(ReceiptError::NotFinished);
        };
        events.truncate(end + 1);
        let last = &events[end];
        if self.log.seal_covering(last.cursor()).await?.is_none() {
            seal_backlog(&self.log, &self.key).await;
        }
        let (proved, seals) = self.prove(events).await?;
        Ok(Some(document::assemble(proved, seals, &self.key)?))
    }

    /// Whether the debate's receipt expired under the retention policy.
    async fn expired(&self, debate_id: &str) -> Result<bool, ReceiptError> {
        let stream = self
            .log
            .load_stream(agon_aggregates::receipt::RECEIPT, debate_id, 0)
            .await?;
        Ok(!stream.is_empty())
    }

    /// The receipt as canonical text: the bytes served and verified.
    pub fn text(receipt: &Receipt) -> String {
        canonical::to_string(&serde_json::to_value(receipt).unwrap_or_default())
    }

    /// Each event with its inclusion proof, and the seals they prove into.
    async fn prove(
        &self,
        events: Vec<StoredEvent>,
    ) -> Result<(Vec<ReceiptEvent>, Vec<ReceiptSeal>), ReceiptError> {
        let mut seals: BTreeMap<i64, SealTree> = BTreeMap::new();
        let mut proved = Vec::with_capacity(events.len());
        for event in events {
            let cursor = event.cursor();
            let known = seals
                .values()
                .find(|(_, body, _, _)| body.from < cursor && cursor <= body.to)
                .map(|(stored, ..)| stored.seal_number);
            let number = match known {
                Some(number) => number,
                None => {
                    let stored = self
                        .log
                        .seal_covering(cursor)
                        .await?
                        .ok_or(ReceiptError::NotSealed)?;
                    let body: SealBody =
                        serde_json::from_str(&stored.body).map_err(ReceiptError::Seal)?;
                    let leaves = self.log.seal_leaves(&body).await?;
                    let index = leaves
                        .iter()
                        .enumerate()
                        .map(|(i, (c, _))| (*c, i))
                        .collect();
                    let hashes = leaves.into_iter().map(|(_, h)| h).collect();
                    let number = stored.seal_number;
                    seals.insert(number, (stored, body, index, hashes));
                    number
                }
            };
            let (_, _, index, hashes) = &seals[&number];
            let leaf = *index.get(&cursor).ok_or(ReceiptError::NotSealed)?;
            let path = merkle::inclusion_proof(hashes, leaf).ok_or(ReceiptError::NotSealed)?;
            proved.push(ReceiptEvent {
                payload: event.payload_value()?,
                metadata: event.metadata_value()?,
                prev_hash: hex::encode(&event.prev_hash),
                hash: hex::encode(&event.hash),
                proof: Proof {
                    seal_number: number,
                    leaf_index: leaf as u64,
                    tree_size: hashes.len() as u64,
                    audit_path: path.iter().map(hex::encode).collect(),
                },
                aggregate_type: event.aggregate_type,
                aggregate_id: event.aggregate_id,
                sequence: event.sequence,
                event_type: event.event_type,
                event_version: event.event_version,
            });
        }
        let seals = seals
            .into_values()
            .map(|(stored, body, ..)| ReceiptSeal {
                body,
                signature: hex::encode(&stored.signature),
            })
            .collect();
        Ok((proved, seals))
    }
}

impl std::ops::Deref for Receipts {
    type Target = Parts;

    fn deref(&self) -> &Parts {
        &self.0
    }
}

/// A seal as stored, its body, and its leaves: by cursor, and in order.
type SealTree = (
    StoredSeal,
    SealBody,
    BTreeMap<Cursor, usize>,
    Vec<crate::store::chain::Hash>,
);

/// Receipts belong to the debate's creator; admins see all.
fn owns(caller: &Caller, created: &StoredEvent) -> bool {
    if caller.is_admin() {
        return true;
    }
    let created_by = match agon_aggregates::wire::decode::<DebateEvent>(
        agon_aggregates::wire::Stored {
            aggregate_type: &created.aggregate_type,
            event_type: &created.event_type,
            event_version: &created.event_version,
        },
        created.payload_value().unwrap_or_default(),
    ) {
        Ok(DebateEvent::DebateCreated { created_by, .. }) => created_by,
        _ => None,
    };
    created_by.as_deref() == Some(caller.user_id.as_str())
}

/// Whether an event of `event_type` ends a debate (a receipt's last event).
fn ends_debate(event_type: &str) -> bool {
    matches!(event_type, "DebateCompleted" | "DebateFailed")
}

#[cfg(test)]
pub(crate) mod tests;
