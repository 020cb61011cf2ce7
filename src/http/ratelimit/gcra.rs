//! The generic cell rate algorithm (GCRA), the one bucket rule both stores
//! apply: each key keeps only its "theoretical arrival time" (TAT), a request
//! is admitted when the TAT minus the burst tolerance is not in the future.
//! The Redis store runs the same rule as a Lua script (`redis.rs`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use super::Quota;

/// Microseconds; both stores count in them.
pub type Micros = u64;

/// The outcome of one check, before it is tied to a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub allowed: bool,
    pub remaining: u32,
    /// Until a denied request would be admitted; zero when allowed.
    pub retry_after: Micros,
    /// Until the bucket is full again.
    pub reset_after: Micros,
}

impl Quota {
    /// Microseconds between two cells at the sustained rate.
    pub fn emission(&self) -> Micros {
        // Settings cap the rate at one a microsecond; never divide by zero.
        (60_000_000 / Micros::from(self.per_minute.max(1))).max(1)
    }

    fn tolerance(&self) -> Micros {
        self.emission() * Micros::from(self.burst.max(1))
    }
}

/// Takes one cell if the bucket allows it; returns the outcome and the new
/// TAT to store (unchanged when denied).
pub fn take(quota: Quota, tat: Option<Micros>, now: Micros) -> (Outcome, Micros) {
    let emission = quota.emission();
    let tat = tat.unwrap_or(now).max(now);
    let next = tat + emission;
    let allow_at = next.saturating_sub(quota.tolerance());
    if allow_at > now {
        let outcome = Outcome {
            allowed: false,
            remaining: 0,
            retry_after: allow_at - now,
            reset_after: tat - now,
        };
        return (outcome, tat);
    }
    let outcome = Outcome {
        allowed: true,
        remaining: ((now + quota.tolerance() - next) / emission) as u32,
        retry_after: 0,
        reset_after: next - now,
    };
    (outcome, next)
}

/// Gives back one cell taken earlier: the TAT moves back one emission
/// interval, never below `now` (a bucket cannot hold more than it holds
/// when full). `None` when the bucket is then full and needs no entry.
pub fn refund(quota: Quota, tat: Option<Micros>, now: Micros) -> Option<Micros> {
    let tat = tat?.saturating_sub(quota.emission());
    (tat > now).then_some(tat)
}

/// What a check would say now, without taking a cell.
pub fn peek(quota: Quota, tat: Option<Micros>, now: Micros) -> Outcome {
    let emission = quota.emission();
    let tat = tat.unwrap_or(now).max(now);
    let remaining = ((now + quota.tolerance()).saturating_sub(tat) / emission) as u32;
    let retry_after = if remaining == 0 {
        (tat + emission)
            .saturating_sub(quota.tolerance())
            .saturating_sub(now)
    } else {
        0
    };
    Outcome {
        allowed: remaining > 0,
        remaining,
        retry_after,
        reset_after: tat - now,
    }
}

/// Buckets of one process: a map from key to TAT, swept of full buckets
/// about once a minute so idle clients cost nothing.
#[derive(Debug)]
pub struct MemoryStore {
    origin: Instant,
    state: Mutex<MemoryState>,
}

#[derive(Debug, Default)]
struct MemoryState {
    tats: HashMap<String, Micros>,
    last_sweep: Micros,
}

const SWEEP_EVERY: Micros = 60_000_000;

impl Default for MemoryStore {
    fn default() -> Self {
        Self {
            origin: Instant::now(),
            state: Mutex::new(MemoryState::default()),
        }
    }
}

impl MemoryStore {
    fn now(&self) -> Micros {
        // Start at one sweep interval so the first sweep waits a minute.
        Micros::try_from(self.origin.elapsed().as_micros()).unwrap_or(Micros::MAX) + SWEEP_EVERY
    }

    pub fn take(&self, key: &str, quota: Quota) -> Outcome {
        let now = self.now();
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // `now` is read before the lock: another thread may have swept at a
        // later instant meanwhile, so the difference can be "negative".
        if now.saturating_sub(state.last_sweep) >= SWEEP_EVERY {
            state.tats.retain(|_, tat| *tat > now);
            state.last_sweep = now;
        }
        let (outcome, tat) = take(quota, state.tats.get(key).copied(), now);
        state.tats.insert(key.to_owned(), tat);
        outcome
    }

    pub fn refund(&self, key: &str, quota: Quota) {
        let now = self.now();
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match refund(quota, state.tats.get(key).copied(), now) {
            Some(tat) => state.tats.insert(key.to_owned(), tat),
            None => state.tats.remove(key),
        };
    }

    pub fn peek(&self, key: &str, quota: Quota) -> Outcome {
        let now = self.now();
        let state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        peek(quota, state.tats.get(key).copied(), now)
    }

    /// Keys whose buckets are not full.
    pub fn tracked(&self) -> usize {
        let now = self.now();
        let state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        state.tats.values().filter(|tat| **tat > now).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: Quota = Quota {
        per_minute: 60,
        burst: 3,
    };

    /// Two requests at once once panicked (subtract with overflow): the
    /// later one swept first, leaving `last_sweep` after the earlier one's
    /// `now`.
    #[test]
    fn a_sweep_by_a_later_request_does_not_break_an_earlier_one() {
        let store = MemoryStore::default();
        store.state.lock().unwrap().last_sweep = store.now() + SWEEP_EVERY;
        assert!(store.take("key", Q).allowed);
    }

    #[test]
    fn a_full_bucket_admits_its_burst_then_refuses() {
        let mut tat = None;
        let now = 1_000_000_000;
        let mut remaining = Vec::new();
        for _ in 0..3 {
            let (outcome, next) = take(Q, tat, now);
            assert!(outcome.allowed);
            remaining.push(outcome.remaining);
            tat = Some(next);
        }
        assert_eq!(remaining, [2, 1, 0]);
        let (denied, same) = take(Q, tat, now);
        assert!(!denied.allowed);
        assert_eq!(Some(same), tat, "a refusal takes nothing");
        assert_eq!(
            denied.retry_after, 1_000_000,
            "one cell per second at 60/min"
        );
        assert_eq!(denied.reset_after, 3_000_000);
    }

    #[test]
    fn cells_come_back_at_the_sustained_rate() {
        let now = 1_000_000_000;
        let mut tat = None;
        for _ in 0..3 {
            tat = Some(take(Q, tat, now).1);
        }
        assert!(!take(Q, tat, now + 999_999).0.allowed);
        let (later, _) = take(Q, tat, now + 1_000_000);
        assert!(later.allowed);
        assert_eq!(later.remaining, 0);
    }

    #[test]
    fn peek_agrees_with_take_and_takes_nothing() {
        let now = 5_000_000_000;
        assert_eq!(peek(Q, None, now).remaining, 3);
        let (_, tat) = take(Q, None, now);
        assert_eq!(peek(Q, Some(tat), now).remaining, 2);
        assert_eq!(peek(Q, Some(tat), now).remaining, 2);
    }

    #[test]
    fn a_refund_gives_one_cell_back_and_never_more_than_a_full_bucket() {
        let now = 7_000_000_000;
        let mut tat = None;
        for _ in 0..3 {
            tat = Some(take(Q, tat, now).1);
        }
        assert!(!take(Q, tat, now).0.allowed);
        tat = refund(Q, tat, now);
        let (again, next) = take(Q, tat, now);
        assert!(again.allowed, "the refunded cell is there at once");
        assert!(!take(Q, Some(next), now).0.allowed);
        let mut full = Some(next);
        for _ in 0..5 {
            full = refund(Q, full, now);
        }
        assert_eq!(full, None, "refunds stop at a full bucket");
        assert_eq!(peek(Q, full, now).remaining, 3);
        let store = MemoryStore::default();
        assert!(store.take("k", Q).allowed);
        store.refund("k", Q);
        store.refund("k", Q);
        assert_eq!(store.peek("k", Q).remaining, 3);
    }

    #[test]
    fn the_memory_store_keeps_keys_apart() {
        let store = MemoryStore::default();
        for _ in 0..3 {
            assert!(store.take("a", Q).allowed);
        }
        assert!(!store.take("a", Q).allowed);
        assert!(store.take("b", Q).allowed);
        assert_eq!(store.peek("b", Q).remaining, 2);
        assert_eq!(store.tracked(), 2);
    }
}
