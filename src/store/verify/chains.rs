//! The chain half of verification: every event of the range in position
//! order, each against its stream's previous event.

use std::collections::HashMap;

use agon_projections::Cursor;

use super::fold::SealFold;
use super::row::ChainRow;
use super::{Check, PositionRange, Problem, VerifyReport};
use crate::store::chain::{GENESIS, Hash, hash_from_slice};
use crate::store::db::with_pool;
use crate::store::scan::scan;
use crate::store::{EventLog, StoreError};

/// The first event of a stream met in a range that starts after the stream
/// did: its link to the event before the range is checked after the scan
/// (a second query cannot run while the scan holds its connection).
struct Pending {
    aggregate_type: String,
    aggregate_id: String,
    sequence: i64,
    position: i64,
    prev_hash: Hash,
}

impl EventLog {
    pub(super) async fn verify_chains(
        &self,
        range: PositionRange,
        mut fold: Option<&mut SealFold>,
        report: &mut VerifyReport,
    ) -> Result<Option<Problem>, StoreError> {
        let whole = range.is_all();
        // Keyed by `type NUL id` (aggregate types are the service's own
        // names, never holding NUL), built in one reused buffer, so that
        // looking up an event's stream allocates nothing.
        let mut heads: HashMap<String, (i64, Hash)> = HashMap::new();
        let mut key = String::new();
        let mut pending: Vec<Pending> = Vec::new();
        let mut found: Option<Problem> = None;
        let filter = format!("position >= {} AND position <= {}", range.from, range.to);
        let mut batches = scan::<ChainRow>(self.db(), filter, "position");
        'scan: while let Some(batch) = batches.recv().await {
            let mut batch = batch?;
            for event in &mut batch {
                event.hash_contents();
                let event = &*event;
                report.events_checked += 1;
                key.clear();
                key.push_str(&event.aggregate_type);
                key.push('\0');
                key.push_str(&event.aggregate_id);
                let head = match heads.get(key.as_str()) {
                    Some(head) => *head,
                    None if whole || event.sequence == 1 => (0, GENESIS),
                    None => {
                        // Checked below against the stored predecessor.
                        let Some(prev_hash) = event.prev_hash else {
                            let fault = "prev_hash is not 32 bytes".to_owned();
                            found = Some(event_problem(event, Check::Malformed, fault));
                            break 'scan;
                        };
                        pending.push(Pending {
                            aggregate_type: event.aggregate_type.clone(),
                            aggregate_id: event.aggregate_id.clone(),
                            sequence: event.sequence,
                            position: event.position,
                            prev_hash,
                        });
                        (event.sequence - 1, prev_hash)
                    }
                };
                let hash = match checked_hash(event, head.0, &head.1) {
                    Ok(hash) => hash,
                    Err((check, fault)) => {
                        found = Some(event_problem(event, check, fault));
                        break 'scan;
                    }
                };
                if let Some(fold) = fold.as_deref_mut() {
                    let (txid, position) = (event.txid, event.position);
                    fold.add(Cursor { txid, position }, &hash);
                }
                match heads.get_mut(key.as_str()) {
                    Some(head) => *head = (event.sequence, hash),
                    None => drop(heads.insert(key.clone(), (event.sequence, hash))),
                }
            }
            batches.recycle(batch);
        }
        report.streams_checked = heads.len() as u64;
        // A broken link into the range comes before any later fault.
        let before = found.as_ref().map_or(i64::MAX, position_of);
        for link in pending.iter().filter(|p| p.position < before) {
            if let Some(problem) = self.predecessor_fault(link).await? {
                return Ok(Some(problem));
            }
        }
        Ok(found)
    }

    /// Whether the event before `link` in its stream is stored with the hash
    /// `link` names.
    async fn predecessor_fault(&self, link: &Pending) -> Result<Option<Problem>, StoreError> {
        let stored: Option<Vec<u8>> = with_pool!(self.db().reader(), pool => {
            sqlx::query_scalar(
                "SELECT hash FROM events WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence = $3",
            )
            .bind(&link.aggregate_type)
            .bind(&link.aggregate_id)
            .bind(link.sequence - 1)
            .fetch_optional(pool)
            .await?
        });
        let fault = match stored.as_deref().map(hash_from_slice) {
            None => (
                Check::SequenceGap,
                format!("sequence {} is missing before it", link.sequence - 1),
            ),
            Some(Some(hash)) if hash == link.prev_hash => return Ok(None),
            Some(_) => (
                Check::PrevHash,
                "prev_hash does not match the hash of the previous event".to_owned(),
            ),
        };
        Ok(Some(Problem::Event {
            aggregate_type: link.aggregate_type.clone(),
            aggregate_id: link.aggregate_id.clone(),
            sequence: link.sequence,
            position: link.position,
            check: fault.0,
            fault: fault.1,
        }))
    }
}

fn position_of(problem: &Problem) -> i64 {
    match problem {
        Problem::Event { position, .. } => *position,
        Problem::Seal { .. } => i64::MAX,
    }
}

pub(super) fn event_problem(event: &ChainRow, check: Check, fault: String) -> Problem {
    Problem::Event {
        aggregate_type: event.aggregate_type.clone(),
        aggregate_id: event.aggregate_id.clone(),
        sequence: event.sequence,
        position: event.position,
        check,
        fault,
    }
}

/// The hash of `event` once it follows its stream's previous sequence and
/// hash and its contents give its stored hash; otherwise what is wrong.
pub(super) fn checked_hash(
    event: &ChainRow,
    last_sequence: i64,
    last_hash: &Hash,
) -> Result<Hash, (Check, String)> {
    let expected = last_sequence + 1;
    if event.sequence != expected {
        return Err(if event.sequence > expected {
            (
                Check::SequenceGap,
                format!("sequence {expected} is missing before it"),
            )
        } else {
            (
                Check::SequenceOrder,
                format!("sequence out of order: expected {expected}"),
            )
        });
    }
    let Some(prev_hash) = &event.prev_hash else {
        return Err((Check::Malformed, "prev_hash is not 32 bytes".to_owned()));
    };
    if prev_hash != last_hash {
        return Err((
            Check::PrevHash,
            "prev_hash does not match the hash of the previous event".to_owned(),
        ));
    }
    let Some(stored) = event.hash else {
        return Err((Check::Malformed, "hash is not 32 bytes".to_owned()));
    };
    match event.computed {
        Some(computed) if computed == stored => Ok(stored),
        Some(_) => Err((
            Check::EventHash,
            "hash does not match the event's contents".to_owned(),
        )),
        None => Err((
            Check::Malformed,
            "the event's contents cannot be hashed".to_owned(),
        )),
    }
}
