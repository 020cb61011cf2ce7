//! The sealing loop: seals what earlier runs left unsealed at start, then
//! the new events every interval, so that no committed event waits long for
//! a signed seal (the service also seals at shutdown).

use tokio_util::sync::CancellationToken;

use super::EventLog;
use super::seal::MAX_EVENTS_PER_SEAL;
use crate::crypto::signing::SealKey;

/// Seals new events at once (what earlier runs left unsealed), then every
/// `interval` until `stop`.
pub async fn run(
    log: EventLog,
    key: SealKey,
    interval: std::time::Duration,
    stop: CancellationToken,
) {
    // The first tick is immediate.
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticker.tick() => {}
        }
        seal_backlog(&log, &key).await;
    }
}

/// Seals everything committed so far, in as many seals as the backlog needs.
/// Failures are logged: the next attempt seals the same events.
pub async fn seal_backlog(log: &EventLog, key: &SealKey) {
    loop {
        match log.seal_now(key).await {
            Ok(Some(seal)) => {
                tracing::info!(seal = seal.seal_number, events = seal.event_count, "sealed");
                // A full seal may have left more behind; a partial one took all.
                if usize::try_from(seal.event_count).ok() != Some(MAX_EVENTS_PER_SEAL) {
                    return;
                }
            }
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "sealing failed; will retry");
                return;
            }
        }
    }
}
