//! The service's one source of the current time. Tests move it forward
//! instead of sleeping (lockout ladders, token expiry, inactivity).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Duration, Utc};

/// Wall-clock time plus an offset that only tests change.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    offset_ms: Arc<AtomicI64>,
}

impl Clock {
    pub fn now(&self) -> DateTime<Utc> {
        Utc::now() + Duration::milliseconds(self.offset_ms.load(Ordering::Relaxed))
    }

    pub fn unix(&self) -> i64 {
        self.now().timestamp()
    }

    /// Moves this clock (and every clone of it) forward.
    pub fn advance(&self, by: std::time::Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.offset_ms.fetch_add(ms, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advancing_moves_every_clone() {
        let clock = Clock::default();
        let other = clock.clone();
        let before = other.now();
        clock.advance(std::time::Duration::from_secs(3_600));
        assert!(other.now() - before >= Duration::seconds(3_600));
    }
}
