//! The deliveries table (`webhook_deliveries`): delivery jobs and their
//! outcome. Jobs are written by the delivery consumer with its checkpoint
//! ([`super::dispatch`]); here the worker claims due ones and records what
//! happened, and the service lists and re-sends them.
//!
//! Order per subscription: only a subscription's earliest pending job (in
//! feed order) can be claimed, so a receiver sees its events in order and a
//! failing receiver holds back only its own jobs. A claim is a lease (a
//! time in `lease_until`): a worker that dies mid-send leaves the job
//! pending, and another claims it once the lease lapses. PostgreSQL claims
//! with `FOR UPDATE SKIP LOCKED`, so replicas never wait on each other.

use sqlx::FromRow;

use crate::store::db::with_pool;
use crate::store::{EventLog, StoreError};

pub const PENDING: &str = "pending";
pub const DELIVERED: &str = "delivered";
pub const FAILED: &str = "failed";

/// One delivery as listed.
#[derive(Debug, Clone, FromRow)]
pub struct DeliveryRow {
    pub delivery_id: String,
    pub subscription_id: String,
    pub message_id: String,
    pub event_type: String,
    pub status: String,
    pub attempts: i64,
    pub response_code: Option<i64>,
    pub last_error: Option<String>,
    /// Unix milliseconds.
    pub created_at: i64,
    pub last_attempt_at: Option<i64>,
    pub next_attempt_at: i64,
}

/// A claimed job: what the worker needs to send it.
#[derive(Debug, Clone, FromRow)]
pub struct Job {
    pub delivery_id: String,
    pub subscription_id: String,
    pub message_id: String,
    pub body: String,
    pub failures: i64,
    pub first_attempt_at: Option<i64>,
}

/// What one attempt ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub response_code: Option<i64>,
    /// Why it failed; `None` when the receiver answered 2xx.
    pub error: Option<String>,
}

impl Attempt {
    pub fn succeeded(&self) -> bool {
        self.error.is_none()
    }
}

const COLUMNS: &str = "delivery_id, subscription_id, message_id, event_type, status, attempts, \
     response_code, last_error, created_at, last_attempt_at, next_attempt_at";

/// The due heads of their subscriptions' queues, of active subscriptions,
/// short of the failure threshold (`$4`: a job that reached it waits for
/// its owner to enable the subscription again, even before the disable
/// command shows in the projection).
const DUE: &str = "SELECT d.delivery_id FROM webhook_deliveries d \
     JOIN webhook_subscriptions s ON s.subscription_id = d.subscription_id \
     WHERE d.status = 'pending' AND d.next_attempt_at <= $2 AND d.lease_until <= $2 \
     AND d.failures < $4 AND s.active = 1 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e \
         WHERE e.subscription_id = d.subscription_id AND e.status = 'pending' \
         AND (e.feed_txid, e.feed_position) < (d.feed_txid, d.feed_position)) \
     ORDER BY d.next_attempt_at LIMIT $3";

/// Claims up to `limit` due jobs until `lease_until` (Unix ms).
pub async fn claim(
    log: &EventLog,
    now: i64,
    lease_until: i64,
    limit: i64,
    threshold: i64,
) -> Result<Vec<Job>, StoreError> {
    let lock = match log.backend() {
        crate::store::Backend::Postgres => " FOR UPDATE OF d SKIP LOCKED",
        crate::store::Backend::Sqlite => "",
    };
    let sql = format!(
        "UPDATE webhook_deliveries SET lease_until = $1 WHERE delivery_id IN ({DUE}{lock}) \
         RETURNING delivery_id, subscription_id, message_id, body, failures, first_attempt_at"
    );
    let jobs = with_pool!(log.db().writer(), pool => {
        sqlx::query_as::<_, Job>(&sql)
            .bind(lease_until)
            .bind(now)
            .bind(limit)
            .bind(threshold)
            .fetch_all(pool)
            .await?
    });
    Ok(jobs)
}

/// Records an attempt of `job`: delivered, or pending again at
/// `retry_at` (`None`: given up, `failed`).
pub async fn record(
    log: &EventLog,
    job: &Job,
    attempt: &Attempt,
    now: i64,
    retry_at: Option<i64>,
) -> Result<(), StoreError> {
    let (status, failures, next) = match (attempt.succeeded(), retry_at) {
        (true, _) => (DELIVERED, 0, now),
        (false, Some(at)) => (PENDING, job.failures + 1, at),
        (false, None) => (FAILED, job.failures + 1, now),
    };
    with_pool!(log.db().writer(), pool => {
        sqlx::query(
            "UPDATE webhook_deliveries SET status = $2, attempts = attempts + 1, failures = $3, \
             next_attempt_at = $4, lease_until = 0, response_code = $5, last_error = $6, \
             last_attempt_at = $7, first_attempt_at = COALESCE(first_attempt_at, $7) \
             WHERE delivery_id = $1",
        )
        .bind(&job.delivery_id)
        .bind(status)
        .bind(failures)
        .bind(next)
        .bind(attempt.response_code)
        .bind(&attempt.error)
        .bind(now)
        .execute(pool)
        .await?;
    });
    Ok(())
}

/// Records a test message sent outside the queue, as one finished delivery.
pub async fn record_ping(
    log: &EventLog,
    subscription_id: &str,
    message_id: &str,
    body: &str,
    attempt: &Attempt,
    now: i64,
) -> Result<String, StoreError> {
    let delivery_id = uuid::Uuid::new_v4().to_string();
    let status = if attempt.succeeded() {
        DELIVERED
    } else {
        FAILED
    };
    with_pool!(log.db().writer(), pool => {
        sqlx::query(
            "INSERT INTO webhook_deliveries (delivery_id, subscription_id, message_id, event_type, \
             body, feed_txid, feed_position, status, attempts, failures, next_attempt_at, \
             lease_until, first_attempt_at, last_attempt_at, response_code, last_error, created_at) \
             VALUES ($1, $2, $3, $4, $5, 0, 0, $6, 1, 0, $7, 0, $7, $7, $8, $9, $7)",
        )
        .bind(&delivery_id)
        .bind(subscription_id)
        .bind(message_id)
        .bind(super::payload::PING)
        .bind(body)
        .bind(status)
        .bind(now)
        .bind(attempt.response_code)
        .bind(&attempt.error)
        .execute(pool)
        .await?;
    });
    Ok(delivery_id)
}

/// A subscription's deliveries, newest first, and how many there are.
pub async fn list(
    log: &EventLog,
    subscription_id: &str,
    limit: i64,
    offset: i64,
) -> Result<(Vec<DeliveryRow>, i64), StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM webhook_deliveries WHERE subscription_id = $1 \
         ORDER BY created_at DESC, delivery_id LIMIT $2 OFFSET $3"
    );
    Ok(with_pool!(log.db().reader(), pool => {
        let rows = sqlx::query_as::<_, DeliveryRow>(&sql)
            .bind(subscription_id)
            .bind(limit)
            .bind(offset)
            .fetch_all(pool)
            .await?;
        let total: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM webhook_deliveries WHERE subscription_id = $1",
        )
        .bind(subscription_id)
        .fetch_one(pool)
        .await?;
        (rows, total)
    }))
}

/// One delivery of a subscription.
pub async fn get(
    log: &EventLog,
    subscription_id: &str,
    delivery_id: &str,
) -> Result<Option<DeliveryRow>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM webhook_deliveries WHERE subscription_id = $1 AND delivery_id = $2"
    );
    Ok(with_pool!(log.db().reader(), pool => {
        sqlx::query_as::<_, DeliveryRow>(&sql)
            .bind(subscription_id)
            .bind(delivery_id)
            .fetch_optional(pool)
            .await?
    }))
}

/// Puts a finished delivery back in the queue, due now, with a fresh
/// retry window; one still pending is only made due now.
pub async fn redeliver(
    log: &EventLog,
    subscription_id: &str,
    delivery_id: &str,
    now: i64,
) -> Result<(), StoreError> {
    with_pool!(log.db().writer(), pool => {
        sqlx::query(
            "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $3, failures = 0, \
             first_attempt_at = CASE WHEN status = 'pending' THEN first_attempt_at ELSE NULL END \
             WHERE subscription_id = $1 AND delivery_id = $2",
        )
        .bind(subscription_id)
        .bind(delivery_id)
        .bind(now)
        .execute(pool)
        .await?;
    });
    Ok(())
}

/// A re-enabled subscription's pending jobs: due now, with their failure
/// counts (what disables it again) started afresh.
pub async fn resume(log: &EventLog, subscription_id: &str, now: i64) -> Result<(), StoreError> {
    with_pool!(log.db().writer(), pool => {
        sqlx::query(
            "UPDATE webhook_deliveries SET next_attempt_at = $2, failures = 0 \
             WHERE subscription_id = $1 AND status = 'pending'",
        )
        .bind(subscription_id)
        .bind(now)
        .execute(pool)
        .await?;
    });
    Ok(())
}

/// Forgets a deleted subscription's deliveries.
pub async fn forget(log: &EventLog, subscription_id: &str) -> Result<(), StoreError> {
    with_pool!(log.db().writer(), pool => {
        sqlx::query("DELETE FROM webhook_deliveries WHERE subscription_id = $1")
            .bind(subscription_id)
            .execute(pool)
            .await?;
    });
    Ok(())
}
