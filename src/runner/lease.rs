//! Claims on running debates, so that of several replicas on one PostgreSQL
//! database exactly one drives each debate, and another takes over when the
//! holder stops renewing (it crashed). The embedded store has one process
//! and needs none.

use std::time::Duration;

use crate::store::db::{PoolRef, with_pool};
use crate::store::{EventLog, StoreError};

#[derive(Debug, Clone)]
pub struct Leases {
    log: EventLog,
    holder: String,
    ttl: Duration,
}

impl Leases {
    /// Leases on PostgreSQL; `None` on the embedded store.
    pub fn for_store(log: &EventLog, ttl: Duration) -> Option<Self> {
        matches!(log.db().writer(), PoolRef::Postgres(_)).then(|| Self {
            log: log.clone(),
            holder: uuid::Uuid::new_v4().to_string(),
            ttl,
        })
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Takes or renews the claim on `debate_id`; false while another holder's claim lasts.
    /// Expiry follows the wall clock: replicas share it, not the service clock tests move.
    pub async fn claim(&self, debate_id: &str) -> Result<bool, StoreError> {
        let now = chrono::Utc::now().timestamp_millis();
        let expires = now + i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX / 2);
        let claimed = with_pool!(self.log.db().writer(), pool => {
            sqlx::query(
                "INSERT INTO debate_leases (debate_id, holder, expires_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (debate_id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at \
                 WHERE debate_leases.holder = excluded.holder OR debate_leases.expires_at < $4",
            )
            .bind(debate_id)
            .bind(&self.holder)
            .bind(expires)
            .bind(now)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(claimed == 1)
    }

    /// Gives the claim up (the debate finished or paused).
    pub async fn release(&self, debate_id: &str) -> Result<(), StoreError> {
        with_pool!(self.log.db().writer(), pool => {
            sqlx::query("DELETE FROM debate_leases WHERE debate_id = $1 AND holder = $2")
                .bind(debate_id)
                .bind(&self.holder)
                .execute(pool)
                .await?;
        });
        Ok(())
    }
}
