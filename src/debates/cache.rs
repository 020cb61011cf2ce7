//! Recent answers of the debates list and the leaderboard, the reads that
//! polling clients repeat most. An answer is kept while no read model of
//! this process has moved since it was read (the log counts their commits),
//! and never longer than its time to live, so a replica whose read models
//! are written by another one still sees their changes within that time.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use agon_projections::leaderboard::LeaderboardView;

pub use crate::config::ReadCacheSettings;
use crate::projection::reads::DebatePage;
use crate::store::{EventLog, StoreError};

/// Which page of the list: the owner it is limited to (none for admins),
/// the state, the limit and the offset.
pub type PageKey = (Option<String>, Option<String>, u32, u64);

#[derive(Default)]
struct Kept {
    /// The read-model commits of this process when these answers were read.
    version: u64,
    pages: HashMap<PageKey, (Instant, Arc<DebatePage>)>,
    leaderboard: Option<(Instant, Arc<LeaderboardView>)>,
}

/// The kept answers; cheap to clone (one set per service).
#[derive(Clone, Default)]
pub struct ReadCache {
    settings: ReadCacheSettings,
    kept: Arc<Mutex<Kept>>,
}

impl std::fmt::Debug for ReadCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadCache")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl ReadCache {
    pub fn new(settings: ReadCacheSettings) -> Self {
        Self {
            settings,
            kept: Arc::default(),
        }
    }

    fn enabled(&self) -> bool {
        !self.settings.ttl.is_zero() && self.settings.max_entries > 0
    }

    /// The kept answers, emptied first when a read model moved since. An
    /// older `version` (a request that read it before another one saw a
    /// newer) leaves them as they are; such a request does not keep its answer.
    fn kept(&self, version: u64) -> std::sync::MutexGuard<'_, Kept> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.version < version {
            *kept = Kept {
                version,
                ..Kept::default()
            };
        }
        kept
    }

    fn fresh<T>(&self, entry: Option<&(Instant, Arc<T>)>) -> Option<Arc<T>> {
        entry
            .filter(|(at, _)| at.elapsed() < self.settings.ttl)
            .map(|(_, value)| Arc::clone(value))
    }

    /// The page `key`, kept or loaded by `load`.
    pub async fn page<F>(
        &self,
        log: &EventLog,
        key: PageKey,
        load: F,
    ) -> Result<Arc<DebatePage>, StoreError>
    where
        F: Future<Output = Result<DebatePage, StoreError>>,
    {
        if !self.enabled() {
            return load.await.map(Arc::new);
        }
        // Read before the load: a commit during it makes the answer stale at once.
        let version = log.read_models_version();
        if let Some(page) = self.fresh(self.kept(version).pages.get(&key)) {
            return Ok(page);
        }
        let page = Arc::new(load.await?);
        let mut kept = self.kept(version);
        if kept.version == version {
            if kept.pages.len() >= self.settings.max_entries {
                kept.pages.clear();
            }
            kept.pages.insert(key, (Instant::now(), Arc::clone(&page)));
        }
        Ok(page)
    }

    /// The leaderboard, kept or loaded by `load`.
    pub async fn leaderboard<F>(
        &self,
        log: &EventLog,
        load: F,
    ) -> Result<Arc<LeaderboardView>, StoreError>
    where
        F: Future<Output = Result<LeaderboardView, StoreError>>,
    {
        if !self.enabled() {
            return load.await.map(Arc::new);
        }
        let version = log.read_models_version();
        if let Some(view) = self.fresh(self.kept(version).leaderboard.as_ref()) {
            return Ok(view);
        }
        let view = Arc::new(load.await?);
        let mut kept = self.kept(version);
        if kept.version == version {
            kept.leaderboard = Some((Instant::now(), Arc::clone(&view)));
        }
        Ok(view)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::store::Db;

    fn page(total: u64) -> DebatePage {
        DebatePage {
            items: Vec::new(),
            total,
        }
    }

    #[tokio::test]
    async fn a_page_is_kept_until_a_read_model_moves_or_it_expires() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::new(Db::open_sqlite(dir.path()).await.unwrap());
        let loads = &AtomicUsize::new(0);
        let load = |total| async move {
            loads.fetch_add(1, Ordering::SeqCst);
            Ok(page(total))
        };
        let key = || (Some("u1".to_owned()), None, 20, 0);
        let cache = ReadCache::new(ReadCacheSettings {
            ttl: Duration::from_secs(60),
            max_entries: 8,
        });
        assert_eq!(cache.page(&log, key(), load(1)).await.unwrap().total, 1);
        // Kept: the second load is never awaited.
        assert_eq!(cache.page(&log, key(), load(2)).await.unwrap().total, 1);
        let other = (None, None, 20, 0);
        assert_eq!(cache.page(&log, other, load(3)).await.unwrap().total, 3);
        log.read_models_moved();
        assert_eq!(cache.page(&log, key(), load(4)).await.unwrap().total, 4);

        let expiring = ReadCache::new(ReadCacheSettings {
            ttl: Duration::from_millis(1),
            max_entries: 8,
        });
        assert_eq!(expiring.page(&log, key(), load(5)).await.unwrap().total, 5);
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(expiring.page(&log, key(), load(6)).await.unwrap().total, 6);

        let off = ReadCache::default();
        assert_eq!(off.page(&log, key(), load(7)).await.unwrap().total, 7);
        assert_eq!(off.page(&log, key(), load(8)).await.unwrap().total, 8);
        // Every load but the kept one's ran.
        assert_eq!(loads.load(Ordering::SeqCst), 7);
    }
}
