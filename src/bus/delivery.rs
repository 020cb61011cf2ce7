//! What the bus does when a consumer fails, by what the failure says:
//!
//! - a store failure: the bus loop resumes the consumer from its checkpoint
//!   after a pause, without bound (outages end);
//! - transient: the bus hands the rest of the batch again with exponential
//!   back-off, at most [`RetryPolicy::attempts`] times, then treats it as
//!   permanent;
//! - permanent: a dead letter (consumer, event, cursor, reason, attempts,
//!   time) is written, the consumer moves past the event, and the batch goes on;
//! - undecodable: the consumer stops at that event (a read model must never
//!   miss one), says so once in the log at error level, shows in
//!   [`Delivery::stalls`] and the `service_projections_stalled` gauge, and
//!   tries again now and then (a fixed build, `agon replay`).
//!
//! A dead letter whose retry an admin asked for is handed to its consumer
//! again ([`Consumer::retry`]) by the consumer's bus loop.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agon_projections::{Cursor, DecodeError, EventRecord};
use serde::Serialize;
use thiserror::Error;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Consumer, pause};
use crate::errors::chain;
use crate::store::dead_letters::DeadLetter;
use crate::store::{EventLog, StoreError};

/// Any error a consumer's own work can raise.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The gauge of consumers stopped at an event they cannot decode.
pub const STALLED_GAUGE: &str = "service_projections_stalled";

/// The first and the longest wait before a stalled consumer tries again.
const STALL_RETRY_FIRST: Duration = Duration::from_secs(1);
const STALL_RETRY_MOST: Duration = Duration::from_secs(60);

/// Why a consumer did not handle a batch; the variant decides what the bus
/// does next. Events of the batch before the one named are done: their
/// effects (and the checkpoint up to them) are durable.
#[derive(Debug, Error)]
pub enum ConsumerError {
    /// The store failed: resume from the checkpoint after a pause.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Might work later: retry with back-off, then dead-letter.
    #[error("event {event_id} failed, may work later")]
    Transient {
        event_id: String,
        #[source]
        source: BoxError,
    },
    /// Will never work: dead-letter the event and move past it.
    #[error("event {event_id} cannot be handled")]
    Permanent {
        event_id: String,
        #[source]
        source: BoxError,
    },
    /// The event cannot be decoded: stop there, never pass it.
    #[error(
        "cannot decode event {event_id} ({event_type} v{event_version}) at position {}, txid {}",
        cursor.position,
        cursor.txid
    )]
    Undecodable {
        cursor: Cursor,
        event_id: String,
        event_type: String,
        event_version: String,
        /// Boxed: it is large, and rare.
        #[source]
        source: Box<DecodeError>,
    },
}

impl ConsumerError {
    pub fn transient(event: &EventRecord, source: impl Into<BoxError>) -> Self {
        Self::Transient {
            event_id: event.event_id.clone(),
            source: source.into(),
        }
    }

    pub fn permanent(event: &EventRecord, source: impl Into<BoxError>) -> Self {
        Self::Permanent {
            event_id: event.event_id.clone(),
            source: source.into(),
        }
    }

    pub fn undecodable(event: &EventRecord, source: DecodeError) -> Self {
        Self::Undecodable {
            cursor: event.cursor,
            event_id: event.event_id.clone(),
            event_type: event.event_type.clone(),
            event_version: event.event_version.clone(),
            source: Box::new(source),
        }
    }

    /// The event of the batch this error names, if any.
    fn event_id(&self) -> Option<&str> {
        match self {
            Self::Store(_) => None,
            Self::Transient { event_id, .. }
            | Self::Permanent { event_id, .. }
            | Self::Undecodable { event_id, .. } => Some(event_id),
        }
    }
}

/// How transient failures are retried (`SERVICE_CONSUMER_RETRY_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Deliveries tried before the event is dead-lettered.
    pub attempts: u32,
    /// The wait after the first failure; each later one doubles it.
    pub first_delay: Duration,
    /// The longest wait.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 5,
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The wait after failure number `failures` (from 1).
    pub fn delay(&self, failures: u32) -> Duration {
        let doubling = 2u32.saturating_pow(failures.saturating_sub(1));
        self.first_delay
            .saturating_mul(doubling)
            .min(self.max_delay)
    }
}

/// A consumer stopped at an event it cannot decode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stall {
    pub cursor: Cursor,
    pub event_id: String,
    pub event_type: String,
    pub event_version: String,
    /// The decode error and its causes.
    pub error: String,
}

/// The failure handling every consumer of one bus shares.
#[derive(Debug, Clone, Default)]
pub struct Delivery {
    policy: RetryPolicy,
    stalls: Arc<Mutex<BTreeMap<String, Stall>>>,
    /// Bumped when an admin asks for a dead letter to be retried.
    retries: Arc<watch::Sender<u64>>,
}

impl Delivery {
    pub fn new(policy: RetryPolicy) -> Self {
        Self {
            policy,
            ..Self::default()
        }
    }

    /// The consumers of this process that are stopped, by name.
    pub fn stalls(&self) -> BTreeMap<String, Stall> {
        self.stalls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Asks for dead letter `id` to be handed to its consumer again; `None`
    /// when there is no such dead letter.
    pub async fn retry_dead_letter(
        &self,
        log: &EventLog,
        id: &str,
    ) -> Result<Option<DeadLetter>, StoreError> {
        let letter = log.request_dead_letter_retry(id).await?;
        if letter.is_some() {
            self.retries.send_modify(|n| *n = n.wrapping_add(1));
        }
        Ok(letter)
    }

    /// Changes when a retry is asked for; bus loops then call [`Self::redeliver`].
    pub(crate) fn subscribe_retries(&self) -> watch::Receiver<u64> {
        self.retries.subscribe()
    }

    /// Hands `consumer` its dead letters whose retry was asked for: a success
    /// removes the dead letter, a failure updates it (and ends the request).
    pub(crate) async fn redeliver(
        &self,
        log: &EventLog,
        consumer: &dyn Consumer,
    ) -> Result<(), StoreError> {
        for (letter, event) in log.dead_letters_to_retry(consumer.name()).await? {
            match consumer.retry(&event).await {
                Ok(()) => {
                    tracing::info!(consumer = consumer.name(), event_id = %event.event_id, "dead letter handled on retry");
                    log.resolve_dead_letter(&letter.id).await?;
                }
                Err(ConsumerError::Store(e)) => return Err(e),
                Err(e) => {
                    log.dead_letter(consumer.name(), &event, &chain(&e), 1)
                        .await?
                }
            }
        }
        Ok(())
    }

    /// Hands `batch` to `consumer`, acting on each failure as the module
    /// says. Returns once every event is handled, dead-lettered or (stopped)
    /// not; the error is a store failure, or the stall `stop` ended.
    #[tracing::instrument(level = "debug", skip_all, fields(
        consumer = consumer.name(),
        events = batch.len(),
        from = batch.first().map(|e| e.cursor.position),
    ))]
    pub(crate) async fn deliver(
        &self,
        log: &EventLog,
        consumer: &dyn Consumer,
        batch: &[EventRecord],
        stop: &CancellationToken,
    ) -> Result<(), ConsumerError> {
        let name = consumer.name();
        if tracing::enabled!(tracing::Level::DEBUG) {
            // Follows a request from its handler to every consumer.
            let requests: Vec<&str> = batch
                .iter()
                .filter_map(|e| e.metadata.get("request_id").and_then(|r| r.as_str()))
                .collect();
            tracing::debug!(?requests, "delivering");
        }
        let mut rest = batch;
        let mut failures = 0u32;
        let mut stall_wait = STALL_RETRY_FIRST;
        while !rest.is_empty() {
            let error = match consumer.handle(rest).await {
                Ok(()) => {
                    self.clear_stall(name);
                    return Ok(());
                }
                Err(error @ ConsumerError::Store(_)) => return Err(error),
                Err(error) => error,
            };
            // Events before the one named are done.
            let at = error
                .event_id()
                .and_then(|id| rest.iter().position(|e| e.event_id == id))
                .unwrap_or(0);
            rest = &rest[at..];
            if at > 0 {
                failures = 0;
            }
            failures += 1;
            let wait = match &error {
                ConsumerError::Undecodable { .. } => {
                    self.record_stall(name, &error);
                    let wait = stall_wait;
                    stall_wait = (stall_wait * 2).min(STALL_RETRY_MOST);
                    Some(wait)
                }
                ConsumerError::Transient { .. } if failures < self.policy.attempts => {
                    let wait = self.policy.delay(failures);
                    tracing::warn!(consumer = name, error = %chain(&error), attempt = failures, retry_in_ms = wait.as_millis(), "consumer failed; retrying");
                    Some(wait)
                }
                _ => None,
            };
            if let Some(wait) = wait {
                if !pause(stop, wait).await {
                    return Err(error);
                }
                continue;
            }
            let event = &rest[0];
            let reason = chain(&error);
            tracing::error!(consumer = name, event_id = %event.event_id, position = event.cursor.position, txid = event.cursor.txid, attempts = failures, error = %reason, "consumer gave up on an event; dead-lettered");
            log.dead_letter(name, event, &reason, failures).await?;
            consumer.pass(event).await?;
            rest = &rest[1..];
            failures = 0;
        }
        Ok(())
    }

    fn record_stall(&self, name: &str, error: &ConsumerError) {
        let ConsumerError::Undecodable {
            cursor,
            event_id,
            event_type,
            event_version,
            source,
        } = error
        else {
            return;
        };
        let stall = Stall {
            cursor: *cursor,
            event_id: event_id.clone(),
            event_type: event_type.clone(),
            event_version: event_version.clone(),
            error: chain(source.as_ref()),
        };
        let mut stalls = self.stalls.lock().unwrap_or_else(PoisonError::into_inner);
        if stalls.get(name) == Some(&stall) {
            tracing::debug!(consumer = name, event_id = %event_id, "still stalled");
            return;
        }
        tracing::error!(
            consumer = name,
            position = cursor.position,
            txid = cursor.txid,
            event_id = %event_id,
            event_type = %event_type,
            event_version = %event_version,
            error = %stall.error,
            "projection stalled: it cannot decode this event and will not pass it"
        );
        stalls.insert(name.to_owned(), stall);
        metrics::gauge!(STALLED_GAUGE).set(stalls.len() as f64);
    }

    fn clear_stall(&self, name: &str) {
        let mut stalls = self.stalls.lock().unwrap_or_else(PoisonError::into_inner);
        if stalls.remove(name).is_some() {
            tracing::info!(consumer = name, "projection no longer stalled");
            metrics::gauge!(STALLED_GAUGE).set(stalls.len() as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_doubles_up_to_its_bound() {
        let policy = RetryPolicy {
            attempts: 9,
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(500),
        };
        let waits: Vec<u128> = (1..=5).map(|n| policy.delay(n).as_millis()).collect();
        assert_eq!(waits, vec![100, 200, 400, 500, 500]);
    }
}
