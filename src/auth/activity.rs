//! Last-use times of sessions (for the inactivity timeout) and of API keys
//! (for their lists; a key's row is named `api_key:<key id>`). Kept beside
//! the log rather than in it: a request is not a domain event, and
//! recording one per request would bloat every account's stream.

use super::{Auth, AuthError};
use crate::store::db::with_pool;

/// A session's or key's last-use time is rewritten at most this often.
pub(super) const TOUCH_EVERY_SECONDS: i64 = 60;

impl Auth {
    /// When `session_id` (or a key's row) was last used, if it ever was.
    pub async fn last_activity(&self, session_id: &str) -> Result<Option<i64>, AuthError> {
        let last: Option<i64> = with_pool!(self.log().db().reader(), pool => {
            sqlx::query_scalar("SELECT last_activity FROM session_activity WHERE session_id = $1")
                .bind(session_id)
                .fetch_optional(pool)
                .await
                .map_err(crate::store::StoreError::from)?
        });
        Ok(last)
    }

    /// Records a use of `session_id` at `now` unless one was recorded lately
    /// (the condition is repeated in SQL for two replicas racing).
    pub async fn touch(&self, session_id: &str, now: i64) -> Result<(), AuthError> {
        with_pool!(self.log().db().writer(), pool => {
            sqlx::query(
                "INSERT INTO session_activity (session_id, last_activity) VALUES ($1, $2) \
                 ON CONFLICT (session_id) DO UPDATE SET last_activity = excluded.last_activity \
                 WHERE session_activity.last_activity <= $3",
            )
            .bind(session_id)
            .bind(now)
            .bind(now - TOUCH_EVERY_SECONDS)
            .execute(pool)
            .await
            .map_err(crate::store::StoreError::from)?;
        });
        Ok(())
    }

    /// Records a use of `id` now, unless one was recorded within the last
    /// [`TOUCH_EVERY_SECONDS`] (a read, and a write at most once a minute).
    pub(super) async fn touch_unless_recent(&self, id: &str) -> Result<(), AuthError> {
        let now = self.clock().unix();
        let last = self.last_activity(id).await?;
        if recent(last, now) {
            return Ok(());
        }
        self.touch(id, now).await
    }
}

/// Whether a use recorded at `last` is recent enough at `now` to skip
/// recording another.
pub(super) fn recent(last: Option<i64>, now: i64) -> bool {
    last.is_some_and(|last| now.saturating_sub(last) < TOUCH_EVERY_SECONDS)
}
