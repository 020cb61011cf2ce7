//! One-use tickets in the database, so that every replica redeems what any
//! replica issued: taking a ticket deletes its row, and a row is taken once
//! whichever replica asks first.

use super::db::with_pool;
use super::{EventLog, StoreError};

impl EventLog {
    /// Keeps ticket `hash` standing for `holder` until `expires_at` (Unix
    /// milliseconds), dropping the tickets expired by `now`.
    pub async fn keep_ticket(
        &self,
        hash: &str,
        holder: &str,
        expires_at: i64,
        now: i64,
    ) -> Result<(), StoreError> {
        with_pool!(self.db().writer(), pool => {
            sqlx::query("DELETE FROM ws_tickets WHERE expires_at <= $1")
                .bind(now)
                .execute(pool)
                .await?;
            sqlx::query("INSERT INTO ws_tickets (ticket_hash, caller, expires_at) VALUES ($1, $2, $3)")
                .bind(hash)
                .bind(holder)
                .bind(expires_at)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Keeps ticket `hash` as [`EventLog::keep_ticket`] does, unless one
    /// stands already: false then (the first claim wins, on any replica).
    pub async fn claim_ticket(
        &self,
        hash: &str,
        holder: &str,
        expires_at: i64,
        now: i64,
    ) -> Result<bool, StoreError> {
        let claimed = with_pool!(self.db().writer(), pool => {
            sqlx::query("DELETE FROM ws_tickets WHERE expires_at <= $1")
                .bind(now)
                .execute(pool)
                .await?;
            sqlx::query(
                "INSERT INTO ws_tickets (ticket_hash, caller, expires_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (ticket_hash) DO NOTHING",
            )
            .bind(hash)
            .bind(holder)
            .bind(expires_at)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(claimed == 1)
    }

    /// What ticket `hash` stands for, once, if it has not expired by `now`.
    pub async fn take_ticket(&self, hash: &str, now: i64) -> Result<Option<String>, StoreError> {
        let taken: Option<(String, i64)> = with_pool!(self.db().writer(), pool => {
            sqlx::query_as(
                "DELETE FROM ws_tickets WHERE ticket_hash = $1 RETURNING caller, expires_at",
            )
            .bind(hash)
            .fetch_optional(pool)
            .await?
        });
        Ok(taken.and_then(|(holder, expires_at)| (expires_at > now).then_some(holder)))
    }
}
