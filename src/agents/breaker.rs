//! A circuit breaker per agent, so that an agent whose provider keeps failing
//! is refused at once instead of costing every debate a full timeout.
//!
//! Closed → n consecutive failures → Open (calls refused) → after the
//! recovery time → HalfOpen (calls go through) → m consecutive successes →
//! Closed (the deployment's [`Policy`]: 5, 60 s and 2 by default); any failure while half-open reopens it with a fresh timer.
//! Throttling (429, quota) is neither a success nor a failure: the provider
//! works, it is just busy, and the fallback may cover for it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;

/// When a breaker opens, how long it stays open, and when it closes
/// again (`SERVICE_CIRCUIT_BREAKER_FAILURES`, `_RECOVERY_SECONDS`,
/// `_SUCCESSES`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Policy {
    /// Consecutive failures that open a closed breaker.
    pub failures_to_open: u32,
    /// How long an open breaker refuses calls.
    pub recovery: Duration,
    /// Consecutive successes that close a half-open breaker.
    pub successes_to_close: u32,
}

/// How one attempt counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    Success,
    Failure,
    /// Rate limited or out of quota: does not count either way.
    Neutral,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed,
    Open { until: Instant },
    HalfOpen,
}

/// One agent's breaker: a pure state machine driven by the caller's clock.
#[derive(Debug, Clone)]
pub(super) struct Breaker {
    state: State,
    policy: Policy,
    consecutive_failures: u32,
    consecutive_successes: u32,
    total_failures: u64,
    total_successes: u64,
}

impl Breaker {
    /// Closed with no failure since the last success: decides as a new one.
    fn resting(&self) -> bool {
        matches!(self.state, State::Closed) && self.consecutive_failures == 0
    }

    pub(super) fn new(policy: Policy) -> Self {
        Self {
            state: State::Closed,
            policy,
            consecutive_failures: 0,
            consecutive_successes: 0,
            total_failures: 0,
            total_successes: 0,
        }
    }

    /// Lets a call through, or says how long until one may try.
    pub(super) fn admit(&mut self, now: Instant) -> Result<(), Duration> {
        match self.state {
            State::Open { until } if now < until => Err(until - now),
            State::Open { .. } => {
                self.state = State::HalfOpen;
                self.consecutive_successes = 0;
                Ok(())
            }
            State::Closed | State::HalfOpen => Ok(()),
        }
    }

    pub(super) fn record(&mut self, outcome: Outcome, now: Instant) {
        match outcome {
            Outcome::Neutral => {}
            Outcome::Success => {
                self.total_successes += 1;
                self.consecutive_successes = self.consecutive_successes.saturating_add(1);
                self.consecutive_failures = 0;
                if self.state == State::HalfOpen
                    && self.consecutive_successes >= self.policy.successes_to_close
                {
                    self.state = State::Closed;
                }
            }
            Outcome::Failure => {
                self.total_failures += 1;
                self.consecutive_failures = self.consecutive_failures.saturating_add(1);
                self.consecutive_successes = 0;
                let reopen = match self.state {
                    State::Closed => self.consecutive_failures >= self.policy.failures_to_open,
                    State::HalfOpen => true,
                    // A call admitted before the breaker opened: the timer
                    // already runs; restarting it would punish slow calls.
                    State::Open { .. } => false,
                };
                if reopen {
                    // An absurd recovery setting must not panic on overflow.
                    let until = now.checked_add(self.policy.recovery).unwrap_or(now);
                    self.state = State::Open { until };
                }
            }
        }
    }

    pub(super) fn state_name(&self) -> &'static str {
        match self.state {
            State::Closed => "closed",
            State::Open { .. } => "open",
            State::HalfOpen => "half_open",
        }
    }

    /// The `service_circuit_breaker_state` value: 0 closed, 1 half-open, 2 open.
    fn gauge(&self) -> f64 {
        match self.state {
            State::Closed => 0.0,
            State::HalfOpen => 1.0,
            State::Open { .. } => 2.0,
        }
    }

    fn status(&self, agent: &str, now: Instant) -> BreakerStatus {
        BreakerStatus {
            agent: agent.to_owned(),
            state: self.state_name(),
            consecutive_failures: self.consecutive_failures,
            consecutive_successes: self.consecutive_successes,
            retry_in_seconds: match self.state {
                State::Open { until } => Some(whole_seconds(until.saturating_duration_since(now))),
                _ => None,
            },
            total_failures: self.total_failures,
            total_successes: self.total_successes,
        }
    }
}

/// Seconds rounded up, so "retry in 0 s" is never said while still open.
pub(super) fn whole_seconds(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// One agent's breaker as the status API shows it.
#[derive(Clone, Debug, Serialize)]
pub struct BreakerStatus {
    pub agent: String,
    /// `closed`, `open` or `half_open`.
    pub state: &'static str,
    pub consecutive_failures: u32,
    pub consecutive_successes: u32,
    /// Seconds until a call may try again, when open.
    pub retry_in_seconds: Option<u64>,
    pub total_failures: u64,
    pub total_successes: u64,
}

/// Every agent's breaker, created at its first call. The lock is held only
/// for a state update, never across a provider call. At most `capacity`
/// (`SERVICE_MAX_AGENT_BREAKERS`) are kept: agent names are the caller's
/// (`openai:<any model>`), so one breaker per name ever seen would grow
/// without end.
#[derive(Debug)]
pub(super) struct Breakers {
    policy: Policy,
    capacity: usize,
    map: Mutex<HashMap<String, Breaker>>,
}

impl Breakers {
    pub(super) fn new(policy: Policy, capacity: usize) -> Self {
        Self {
            policy,
            capacity: capacity.max(1),
            map: Mutex::new(HashMap::new()),
        }
    }

    /// Frees a place for a new breaker: first every resting one (closed,
    /// no failure since its last success: a fresh breaker decides alike,
    /// only its totals are lost), then, if every breaker is tripped, any.
    fn make_room(&self, map: &mut HashMap<String, Breaker>) {
        if map.len() < self.capacity {
            return;
        }
        map.retain(|_, b| !b.resting());
        while map.len() >= self.capacity {
            let Some(agent) = map.keys().next().cloned() else {
                break;
            };
            map.remove(&agent);
        }
    }

    fn with<T>(&self, agent: &str, f: impl FnOnce(&mut Breaker) -> T) -> T {
        // A panic elsewhere while holding the lock leaves the map usable.
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let breaker = match map.get_mut(agent) {
            Some(b) => b,
            None => {
                self.make_room(&mut map);
                let b = map
                    .entry(agent.to_owned())
                    .or_insert_with(|| Breaker::new(self.policy));
                set_gauge(agent, b);
                b
            }
        };
        let before = breaker.state_name();
        let out = f(breaker);
        if breaker.state_name() != before {
            tracing::warn!(
                agent,
                from = before,
                to = breaker.state_name(),
                "circuit breaker changed state"
            );
            set_gauge(agent, breaker);
        }
        out
    }

    pub(super) fn admit(&self, agent: &str, now: Instant) -> Result<(), Duration> {
        self.with(agent, |b| b.admit(now))
    }

    pub(super) fn record(&self, agent: &str, outcome: Outcome, now: Instant) {
        if outcome != Outcome::Neutral {
            self.with(agent, |b| b.record(outcome, now));
        }
    }

    pub(super) fn statuses(&self, now: Instant) -> Vec<BreakerStatus> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let mut all: Vec<BreakerStatus> = map.iter().map(|(a, b)| b.status(a, now)).collect();
        drop(map);
        all.sort_by(|a, b| a.agent.cmp(&b.agent));
        all
    }
}

fn set_gauge(agent: &str, breaker: &Breaker) {
    metrics::gauge!("service_circuit_breaker_state", "agent" => super::label(agent))
        .set(breaker.gauge());
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECOVERY: Duration = Duration::from_secs(60);
    /// The defaults.
    const POLICY: Policy = Policy {
        failures_to_open: 5,
        recovery: RECOVERY,
        successes_to_close: 2,
    };

    fn failures(b: &mut Breaker, n: u32, now: Instant) {
        for _ in 0..n {
            assert_eq!(b.admit(now), Ok(()));
            b.record(Outcome::Failure, now);
        }
    }

    #[test]
    fn five_failures_open_it_and_calls_are_refused_until_recovery() {
        let t0 = Instant::now();
        let mut b = Breaker::new(POLICY);
        failures(&mut b, 4, t0);
        assert_eq!(b.state_name(), "closed");
        failures(&mut b, 1, t0);
        assert_eq!(b.state_name(), "open");
        assert_eq!(b.gauge(), 2.0);
        let later = t0 + Duration::from_millis(500);
        assert_eq!(b.admit(later), Err(RECOVERY - Duration::from_millis(500)));
        let status = b.status("a", later);
        assert_eq!(status.retry_in_seconds, Some(60));
        assert_eq!((status.consecutive_failures, status.total_failures), (5, 5));
    }

    #[test]
    fn open_becomes_half_open_then_two_successes_close_it() {
        let t0 = Instant::now();
        let mut b = Breaker::new(POLICY);
        failures(&mut b, 5, t0);
        let t1 = t0 + RECOVERY;
        assert_eq!(b.admit(t1), Ok(()));
        assert_eq!(b.state_name(), "half_open");
        assert_eq!(b.gauge(), 1.0);
        assert_eq!(b.status("a", t1).retry_in_seconds, None);
        b.record(Outcome::Success, t1);
        assert_eq!(b.state_name(), "half_open");
        assert_eq!(b.admit(t1), Ok(()));
        b.record(Outcome::Success, t1);
        assert_eq!(b.state_name(), "closed");
        assert_eq!(b.gauge(), 0.0);
        assert_eq!(b.total_successes, 2);
    }

    #[test]
    fn a_failure_while_half_open_reopens_with_a_fresh_timer() {
        let t0 = Instant::now();
        let mut b = Breaker::new(POLICY);
        failures(&mut b, 5, t0);
        let t1 = t0 + RECOVERY + Duration::from_secs(5);
        assert_eq!(b.admit(t1), Ok(()));
        b.record(Outcome::Success, t1);
        b.record(Outcome::Failure, t1);
        assert_eq!(b.state_name(), "open");
        assert_eq!(
            b.admit(t1 + Duration::from_secs(59)),
            Err(Duration::from_secs(1))
        );
        assert_eq!(b.admit(t1 + RECOVERY), Ok(()));
    }

    #[test]
    fn throttling_never_counts() {
        let t0 = Instant::now();
        let mut b = Breaker::new(POLICY);
        failures(&mut b, 4, t0);
        for _ in 0..20 {
            b.record(Outcome::Neutral, t0);
        }
        assert_eq!(b.state_name(), "closed");
        assert_eq!(
            (b.consecutive_failures, b.total_failures, b.total_successes),
            (4, 4, 0)
        );
        // Nor does it break a run of failures: the fifth still opens it.
        failures(&mut b, 1, t0);
        assert_eq!(b.state_name(), "open");
    }

    #[test]
    fn a_success_resets_the_failure_count() {
        let t0 = Instant::now();
        let mut b = Breaker::new(POLICY);
        failures(&mut b, 4, t0);
        b.record(Outcome::Success, t0);
        assert_eq!((b.consecutive_failures, b.consecutive_successes), (0, 1));
        failures(&mut b, 4, t0);
        assert_eq!(b.state_name(), "closed");
        assert_eq!(b.consecutive_successes, 0);
        failures(&mut b, 1, t0);
        assert_eq!(b.state_name(), "open");
    }

    #[test]
    fn the_deployment_s_policy_decides_when_it_opens_and_closes() {
        let policy = Policy {
            failures_to_open: 2,
            recovery: Duration::from_secs(3),
            successes_to_close: 3,
        };
        let t0 = Instant::now();
        let mut b = Breaker::new(policy);
        failures(&mut b, 1, t0);
        assert_eq!(b.state_name(), "closed");
        failures(&mut b, 1, t0);
        assert_eq!(b.state_name(), "open");
        let t1 = t0 + Duration::from_secs(3);
        for _ in 0..2 {
            assert_eq!(b.admit(t1), Ok(()));
            b.record(Outcome::Success, t1);
            assert_eq!(b.state_name(), "half_open");
        }
        b.record(Outcome::Success, t1);
        assert_eq!(b.state_name(), "closed");
    }

    #[test]
    fn the_registry_keeps_one_breaker_per_agent_sorted() {
        let breakers = Breakers::new(POLICY, 16);
        let now = Instant::now();
        for _ in 0..5 {
            breakers.record("zed", Outcome::Failure, now);
        }
        assert_eq!(breakers.admit("alpha", now), Ok(()));
        breakers.record("alpha", Outcome::Neutral, now);
        assert!(breakers.admit("zed", now).is_err());
        let statuses = breakers.statuses(now);
        let names: Vec<(&str, &str)> = statuses
            .iter()
            .map(|s| (s.agent.as_str(), s.state))
            .collect();
        assert_eq!(names, [("alpha", "closed"), ("zed", "open")]);
    }

    #[test]
    fn the_registry_never_holds_more_than_its_capacity() {
        let breakers = Breakers::new(POLICY, 8);
        let now = Instant::now();
        // A tripped breaker survives names that come and go.
        for _ in 0..5 {
            breakers.record("tripped", Outcome::Failure, now);
        }
        for n in 0..1_000 {
            let agent = format!("openai:model-{n}");
            assert_eq!(breakers.admit(&agent, now), Ok(()));
            breakers.record(&agent, Outcome::Success, now);
            assert!(breakers.statuses(now).len() <= 8);
        }
        assert!(breakers.admit("tripped", now).is_err());
        // All tripped: the newest still gets a breaker, and the bound holds.
        for n in 0..20 {
            let agent = format!("down-{n}");
            for _ in 0..5 {
                breakers.record(&agent, Outcome::Failure, now);
            }
            assert!(breakers.admit(&agent, now).is_err());
            assert!(breakers.statuses(now).len() <= 8);
        }
    }

    #[test]
    fn agent_labels_stop_at_their_limit() {
        let labels = crate::agents::Labels(Mutex::new(Default::default()));
        let mut given = std::collections::HashSet::new();
        for n in 0..1_000 {
            given.insert(labels.label(&format!("openai:model-{n}"), 8));
        }
        assert_eq!(given.len(), 9, "eight names and `other`");
        assert!(given.contains("other"));
        // A name that has its label keeps it.
        assert_eq!(labels.label("openai:model-3", 8), "openai:model-3");
        assert_eq!(labels.label(&"x".repeat(100), 8), "other");
    }
}
