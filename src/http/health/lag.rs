//! Whether a projection is behind: it has an event to apply past its
//! checkpoint. Comparing the checkpoint with the feed head alone would call
//! idle projections `behind`, since they save their checkpoint over events
//! they ignore at most once a second (and not at all after the last batch).
//!
//! Every projection is answered from one pass over the feed, from the
//! lowest undecided checkpoint, each event read and decoded once: a query
//! and a decode per projection made the health report (and the console
//! pages showing it) a dozen round trips to the store. And each pass
//! remembers how far it found nothing to apply ([`Memo`]), so the next one
//! reads only what was appended since: an idle projection's checkpoint may
//! stay below the head for good, and the probes ask every few seconds.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use agon_projections::{Cursor, EventRecord};

use crate::store::{EventLog, StoreError};

/// Events read per query while looking past a checkpoint.
const PAGE: i64 = 500;
/// Most events looked at past a checkpoint; a projection this far below
/// the head counts as behind without reading further.
const MOST: usize = 10_000;

/// For each `(name, checkpoint)`, whether `name` would change anything
/// with the events in (`checkpoint`, `head`].
pub(super) async fn behind(
    log: &EventLog,
    memo: &Memo,
    checkpoints: &[(&str, Cursor)],
    head: Cursor,
) -> Result<Vec<bool>, StoreError> {
    let mut scan = Scan::new(memo.starts(checkpoints).into_iter(), head, MOST);
    while let Some(after) = scan.next_read() {
        let page = log.read_feed(after, PAGE).await?;
        let Some(last) = page.last().map(|e| e.cursor()) else {
            break;
        };
        for event in page {
            let cursor = event.cursor();
            if scan.wants(cursor) {
                let record = event.into_record()?;
                scan.see(cursor, |i| applies(checkpoints[i].0, &record));
            }
        }
        scan.read_through(last);
    }
    let answers = scan.finish();
    memo.learn(checkpoints, &answers, head);
    Ok(answers)
}

/// What earlier passes found, per projection: a stored checkpoint and the
/// cursor through which nothing past it applies. The log is append-only
/// and the feed up to its head final, so that holds until the checkpoint
/// moves.
#[derive(Debug, Default)]
pub struct Memo(Mutex<HashMap<String, (Cursor, Cursor)>>);

impl Memo {
    /// Where each projection's look starts: past what an earlier pass
    /// found for the same checkpoint.
    fn starts(&self, checkpoints: &[(&str, Cursor)]) -> Vec<Cursor> {
        let known = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        checkpoints
            .iter()
            .map(|(name, at)| match known.get(*name) {
                Some((from, through)) if from == at => (*through).max(*at),
                _ => *at,
            })
            .collect()
    }

    /// Records the projections found with nothing to apply through `head`.
    fn learn(&self, checkpoints: &[(&str, Cursor)], answers: &[bool], head: Cursor) {
        let mut known = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for ((name, at), behind) in checkpoints.iter().zip(answers) {
            if !behind {
                known.insert((*name).to_owned(), (*at, head.max(*at)));
            }
        }
    }
}

/// The projections' own filters: what their runners do not skip.
fn applies(name: &str, event: &EventRecord) -> bool {
    // An unknown name: only the head can tell.
    crate::projection::registry::find(name).is_none_or(|p| (p.relevant)(event))
}

/// The pass's state, apart from the reads: which checkpoints are decided,
/// how many events each has looked at, and where the feed was read to.
#[derive(Debug)]
struct Scan {
    checkpoints: Vec<Cursor>,
    decided: Vec<Option<bool>>,
    seen: Vec<usize>,
    after: Cursor,
    head: Cursor,
    most: usize,
}

impl Scan {
    fn new(checkpoints: impl Iterator<Item = Cursor>, head: Cursor, most: usize) -> Self {
        let checkpoints: Vec<Cursor> = checkpoints.collect();
        let decided = checkpoints
            .iter()
            .map(|c| (*c >= head).then_some(false))
            .collect();
        Self {
            seen: vec![0; checkpoints.len()],
            checkpoints,
            decided,
            after: Cursor::START,
            head,
            most,
        }
    }

    fn undecided(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.checkpoints.len()).filter(|&i| self.decided[i].is_none())
    }

    /// Where to read on from, skipping what no undecided checkpoint needs;
    /// `None` when nothing is left to read.
    fn next_read(&mut self) -> Option<Cursor> {
        let lowest = self.undecided().map(|i| self.checkpoints[i]).min()?;
        self.after = self.after.max(lowest);
        (self.after < self.head).then_some(self.after)
    }

    /// Whether an undecided checkpoint lies below `cursor` (so the event
    /// is worth decoding).
    fn wants(&self, cursor: Cursor) -> bool {
        self.undecided().any(|i| self.checkpoints[i] < cursor)
    }

    /// The event at `cursor`, `applies` telling whether the i-th
    /// projection would apply it.
    fn see(&mut self, cursor: Cursor, applies: impl Fn(usize) -> bool) {
        let waiting: Vec<usize> = self.undecided().collect();
        for i in waiting {
            if cursor > self.head {
                self.decided[i] = Some(false);
            } else if self.checkpoints[i] < cursor {
                self.seen[i] += 1;
                if applies(i) || self.seen[i] >= self.most {
                    self.decided[i] = Some(true);
                }
            }
        }
    }

    fn read_through(&mut self, last: Cursor) {
        self.after = self.after.max(last);
    }

    /// Each checkpoint's answer: one the feed ended before deciding has
    /// nothing to apply.
    fn finish(self) -> Vec<bool> {
        self.decided
            .into_iter()
            .map(|d| d.unwrap_or(false))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(position: i64) -> Cursor {
        Cursor {
            txid: position,
            position,
        }
    }

    /// Runs a scan over events 1..=`last` (pages of `page`), the i-th
    /// projection applying the positions in `applied[i]`; returns the
    /// answers and the positions read.
    fn run(
        checkpoints: &[i64],
        head: i64,
        last: i64,
        applied: &[&[i64]],
        most: usize,
    ) -> (Vec<bool>, Vec<i64>) {
        let mut scan = Scan::new(checkpoints.iter().map(|&p| at(p)), at(head), most);
        let mut read = Vec::new();
        while let Some(after) = scan.next_read() {
            let page: Vec<i64> = (after.position + 1..=last).take(3).collect();
            let Some(&end) = page.last() else { break };
            for p in page {
                read.push(p);
                if scan.wants(at(p)) {
                    scan.see(at(p), |i| applied[i].contains(&p));
                }
            }
            scan.read_through(at(end));
        }
        (scan.finish(), read)
    }

    #[test]
    fn each_projection_is_behind_only_with_an_event_it_applies_past_its_checkpoint() {
        // 0: applies 4, past its checkpoint; 1: applies 2, before its own
        // checkpoint, and nothing after; 2: at the head; 3: applies 9,
        // beyond the head.
        let (answers, read) = run(&[1, 3, 8, 5], 8, 9, &[&[4], &[2], &[], &[9]], 100);
        assert_eq!(answers, vec![true, false, false, false]);
        // One pass from the lowest checkpoint, no event read twice.
        assert_eq!(read, vec![2, 3, 4, 5, 6, 7, 8, 9]);
    }

    #[test]
    fn a_decided_checkpoint_s_events_are_skipped() {
        // 0 is decided at 2; the next read starts at 1's checkpoint, 20.
        let (answers, read) = run(&[1, 20], 30, 30, &[&[2], &[]], 100);
        assert_eq!(answers, vec![true, false]);
        assert_eq!(read.first(), Some(&2));
        assert!(!read.contains(&10), "{read:?}");
        assert_eq!(read.iter().filter(|&&p| p > 20).count(), 10);
    }

    #[test]
    fn too_far_below_the_head_counts_as_behind() {
        let (answers, _) = run(&[0, 6], 20, 20, &[&[], &[]], 5);
        assert_eq!(answers, vec![true, true]);
        let (answers, _) = run(&[0, 16], 20, 20, &[&[], &[]], 5);
        assert_eq!(answers, vec![true, false]);
    }

    #[test]
    fn a_later_look_starts_where_the_last_found_nothing_until_the_checkpoint_moves() {
        let memo = Memo::default();
        let checkpoints = [("a", at(5)), ("b", at(3))];
        assert_eq!(memo.starts(&checkpoints), vec![at(5), at(3)]);
        // `a` had nothing to apply through 20; `b` had.
        memo.learn(&checkpoints, &[false, true], at(20));
        assert_eq!(memo.starts(&checkpoints), vec![at(20), at(3)]);
        // A saved checkpoint starts afresh.
        assert_eq!(memo.starts(&[("a", at(7))]), vec![at(7)]);
        // Unread past the head: a checkpoint above it is its own start.
        memo.learn(&[("c", at(30))], &[false], at(20));
        assert_eq!(memo.starts(&[("c", at(30))]), vec![at(30)]);
    }

    #[test]
    fn a_feed_ending_early_leaves_nothing_to_apply() {
        let (answers, _) = run(&[0], 10, 4, &[&[]], 100);
        assert_eq!(answers, vec![false]);
    }
}
