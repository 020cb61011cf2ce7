//! Seals' contents recomputed during the chain scan, so that verifying the
//! whole log reads each event once instead of once more per seal and once
//! more to count what is unsealed.
//!
//! The scan goes in position order and a seal's leaves are in feed order
//! (`txid`, `position`). The two agree on SQLite always, and on PostgreSQL
//! unless transactions committed out of step; the fold notices the first
//! event out of feed order and gives up, and the seals are then read back
//! one by one as before.

use std::collections::HashMap;

use agon_projections::Cursor;

use crate::store::chain::Hash;
use crate::store::merkle::TreeBuilder;
use crate::store::seal::{SealBody, StoredSeal};

/// One seal's range and the tree of the events seen in it so far.
struct Span {
    seal_number: i64,
    from: Cursor,
    to: Cursor,
    tree: TreeBuilder,
}

/// The seals' trees, filled as the scan goes.
pub(super) struct SealFold {
    spans: Vec<Span>,
    at: usize,
    last: Cursor,
    after_last_seal: u64,
    given_up: bool,
}

/// What the stored events under each seal add up to.
pub(super) struct Folded {
    by_seal: HashMap<i64, (u64, Hash)>,
    /// Events after the last seal's end.
    pub unsealed: u64,
}

impl Folded {
    /// The number of events under seal `seal_number` and their tree head.
    pub fn seal(&self, seal_number: i64) -> Option<(u64, Hash)> {
        self.by_seal.get(&seal_number).copied()
    }
}

impl SealFold {
    /// A fold over `seals`; one that gives up at once when their ranges do
    /// not follow each other (the seal checks then name the fault).
    pub fn new(seals: &[StoredSeal]) -> Self {
        let mut spans = Vec::with_capacity(seals.len());
        let mut given_up = false;
        for seal in seals {
            match serde_json::from_str::<SealBody>(&seal.body) {
                Ok(body) if spans.last().is_none_or(|s: &Span| s.to == body.from) => {
                    spans.push(Span {
                        seal_number: seal.seal_number,
                        from: body.from,
                        to: body.to,
                        tree: TreeBuilder::default(),
                    })
                }
                _ => given_up = true,
            }
        }
        Self {
            spans,
            at: 0,
            last: Cursor::START,
            after_last_seal: 0,
            given_up,
        }
    }

    /// Adds the next scanned event.
    pub fn add(&mut self, cursor: Cursor, hash: &Hash) {
        if self.given_up {
            return;
        }
        if cursor <= self.last {
            self.given_up = true;
            return;
        }
        self.last = cursor;
        while self.spans.get(self.at).is_some_and(|span| cursor > span.to) {
            self.at += 1;
        }
        match self.spans.get_mut(self.at) {
            Some(span) if cursor > span.from => span.tree.push(hash),
            // Before the first seal's start: left to the seal checks.
            Some(_) => self.given_up = true,
            None => self.after_last_seal += 1,
        }
    }

    /// The seals' counts and heads, unless the events came out of feed order.
    pub fn finish(self) -> Option<Folded> {
        (!self.given_up).then(|| Folded {
            by_seal: self
                .spans
                .into_iter()
                .map(|span| (span.seal_number, (span.tree.leaves(), span.tree.root())))
                .collect(),
            unsealed: self.after_last_seal,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::merkle;

    fn cursor(txid: i64, position: i64) -> Cursor {
        Cursor { txid, position }
    }

    /// A seal over `(from, to]`; only the fields the fold reads matter.
    fn seal(seal_number: i64, from: Cursor, to: Cursor) -> StoredSeal {
        let body = SealBody {
            seal_number,
            from,
            to,
            event_count: 0,
            merkle_root: String::new(),
            prev_seal_hash: String::new(),
            sealed_at: String::new(),
            public_key: String::new(),
        };
        StoredSeal {
            seal_number,
            body: String::from_utf8(body.canonical_bytes().unwrap()).unwrap(),
            seal_hash: Vec::new(),
            signature: Vec::new(),
            to_txid: to.txid,
            to_position: to.position,
        }
    }

    fn leaf(position: i64) -> Hash {
        [u8::try_from(position).unwrap(); 32]
    }

    #[test]
    fn each_seal_gets_the_head_of_its_own_events_and_the_rest_are_unsealed() {
        let seals = [
            seal(1, Cursor::START, cursor(0, 3)),
            seal(2, cursor(0, 3), cursor(0, 7)),
        ];
        let mut fold = SealFold::new(&seals);
        (1..=9).for_each(|p| fold.add(cursor(0, p), &leaf(p)));
        let folded = fold.finish().unwrap();
        let heads = |range: std::ops::RangeInclusive<i64>| {
            let leaves: Vec<Hash> = range.map(leaf).collect();
            (leaves.len() as u64, merkle::root(&leaves))
        };
        assert_eq!(folded.seal(1), Some(heads(1..=3)));
        assert_eq!(folded.seal(2), Some(heads(4..=7)));
        assert_eq!(folded.seal(3), None);
        assert_eq!(folded.unsealed, 2);
    }

    #[test]
    fn events_out_of_feed_order_leave_the_seals_to_be_read_back() {
        let seals = [seal(1, Cursor::START, cursor(9, 3))];
        let mut fold = SealFold::new(&seals);
        // Position order, but a later transaction committed first.
        fold.add(cursor(8, 1), &leaf(1));
        fold.add(cursor(9, 2), &leaf(2));
        fold.add(cursor(7, 3), &leaf(3));
        assert!(fold.finish().is_none());
    }

    #[test]
    fn seals_that_do_not_follow_each_other_are_not_folded() {
        let apart = [
            seal(1, Cursor::START, cursor(0, 3)),
            seal(2, cursor(0, 4), cursor(0, 7)),
        ];
        assert!(SealFold::new(&apart).finish().is_none());
        let mut broken = vec![seal(1, Cursor::START, cursor(0, 3))];
        broken[0].body = "{}".to_owned();
        assert!(SealFold::new(&broken).finish().is_none());
    }
}
