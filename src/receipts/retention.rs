//! The receipt-retention scheduler: every `SERVICE_RECEIPT_CLEANUP_INTERVAL_HOURS`
//! (and when an admin asks) it expires the receipts of debates that finished
//! more than `SERVICE_RECEIPT_RETENTION_DAYS` ago. Expiry is an event
//! (`ReceiptExpired` on the receipt's stream): the receipt is no longer
//! served, and the debate's events stay, so the log and its seals still verify.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agon_aggregates::CommandMeta;
use agon_aggregates::receipt::{Receipt, ReceiptCommand, ReceiptError as ExpiryRefused};
use agon_projections::Debates as DebateDocs;
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

use super::{ReceiptError, Receipts, document};
use crate::projection::ListFilter;
use crate::store::CommandError;

/// Debates read per page while looking for expired receipts.
const PAGE: u32 = 500;

/// What the scheduler has done since the process started.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct RetentionStats {
    pub total_runs: u64,
    pub total_receipts_deleted: u64,
    pub failures: u64,
    /// Successful runs over all runs, 0 to 1 (1 before the first run).
    pub success_rate: f64,
}

/// `GET /api/admin/schedulers/receipt-retention/status` (spec §2.3).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RetentionStatus {
    pub running: bool,
    pub interval_hours: u64,
    pub retention_days: u32,
    pub stats: RetentionStats,
}

/// The policy and the counters the scheduler and the admin routes share.
#[derive(Debug)]
pub struct Retention {
    pub days: u32,
    pub interval: Duration,
    stats: Mutex<RetentionStats>,
    running: std::sync::atomic::AtomicBool,
}

impl Retention {
    pub fn new(days: u32, interval: Duration) -> Arc<Self> {
        Arc::new(Self {
            days,
            interval,
            stats: Mutex::new(RetentionStats {
                success_rate: 1.0,
                ..RetentionStats::default()
            }),
            running: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn record(&self, outcome: Result<u64, &ReceiptError>) {
        let mut stats = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
        stats.total_runs += 1;
        match outcome {
            Ok(expired) => stats.total_receipts_deleted += expired,
            Err(_) => stats.failures += 1,
        }
        stats.success_rate = (stats.total_runs - stats.failures) as f64 / stats.total_runs as f64;
    }
}

impl Receipts {
    /// The scheduler's state.
    pub fn retention_status(&self) -> RetentionStatus {
        let stats = self
            .retention
            .stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        RetentionStatus {
            running: self
                .retention
                .running
                .load(std::sync::atomic::Ordering::Relaxed),
            interval_hours: self.retention.interval.as_secs() / 3_600,
            retention_days: self.retention.days,
            stats,
        }
    }

    /// Expires every receipt past its retention; how many it expired.
    pub async fn cleanup(&self) -> Result<u64, ReceiptError> {
        let started = Instant::now();
        let outcome = self.expire_due().await;
        metrics::counter!("service_receipt_cleanup_total", "outcome" => if outcome.is_ok() { "success" } else { "failure" })
            .increment(1);
        metrics::histogram!("service_receipt_cleanup_duration_seconds")
            .record(started.elapsed().as_secs_f64());
        if let Ok(expired) = outcome {
            metrics::counter!("service_receipts_deleted_total").increment(expired);
        }
        self.retention.record(outcome.as_ref().copied());
        outcome
    }

    async fn expire_due(&self) -> Result<u64, ReceiptError> {
        let now = self.clock.now();
        let days = self.retention.days;
        let cutoff = now - chrono::Duration::days(i64::from(days));
        let mut expired = 0;
        for state in ["completed", "failed"] {
            let mut offset = 0u64;
            loop {
                let filter = ListFilter {
                    owner: None,
                    state: Some(state),
                };
                let (page, _) = self
                    .documents
                    .list::<DebateDocs>(filter, PAGE, offset)
                    .await?;
                offset += page.len() as u64;
                for debate in &page {
                    let Some(finished_at) = debate.finished_at.filter(|at| *at <= cutoff) else {
                        continue;
                    };
                    let command = ReceiptCommand::Expire {
                        receipt_id: document::receipt_id(&debate.id),
                        debate_id: debate.id.clone(),
                        retention_days: days,
                        finished_at,
                        at: now,
                    };
                    match self
                        .log
                        .execute::<Receipt>(&debate.id, command, CommandMeta::system())
                        .await
                    {
                        Ok(done) => expired += done.events.len() as u64,
                        Err(CommandError::Rejected(ExpiryRefused::NotDue)) => {}
                        Err(e) => return Err(ReceiptError::Expiry(e.to_string())),
                    }
                }
                if page.len() < PAGE as usize {
                    break;
                }
            }
        }
        Ok(expired)
    }

    /// Runs [`Self::cleanup`] at once and then every interval until `stop`.
    pub async fn run_retention(self, stop: CancellationToken) {
        self.retention
            .running
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let mut ticker = tokio::time::interval(self.retention.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = ticker.tick() => {}
            }
            if let Err(e) = self.cleanup().await {
                tracing::warn!(error = %e, "receipt retention cleanup failed; will retry");
            }
        }
        self.retention
            .running
            .store(false, std::sync::atomic::Ordering::Relaxed);
    }
}
