//! What a backup's read models are compared with: the live ones at the
//! backup's position, or, for those that later events concern, read models
//! replayed from the live log up to that position.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use agon_projections::Cursor;

use super::archive::{self, Manifest};
use super::digest::{self, Digests};
use super::restore;
use super::{BackupError, Backups};
use crate::projection::checkpoint_name;
use crate::projection::registry;

impl Backups {
    /// The live read models' digests at `manifest`'s position, each with
    /// where it comes from: the service's own read model when no event after
    /// that position concerns it and the read models caught up within
    /// `SERVICE_BACKUP_CATCHUP_TIMEOUT_MS`; else one replayed from the live
    /// log up to that position into a scratch store.
    pub(super) async fn live_digests(
        &self,
        manifest: &Manifest,
    ) -> Result<BTreeMap<String, (&'static str, String)>, BackupError> {
        let log = &self.inner.log;
        let head = manifest.head.unwrap_or_default();
        let window = self.inner.settings.compare_window;
        let later = log.read_feed(head, window).await?;
        let now = later.last().map_or(head, crate::store::StoredEvent::cursor);
        let complete = (later.len() as i64) < window
            && self.live_events().await? == manifest.events + later.len() as u64;
        let records = later
            .into_iter()
            .map(crate::store::StoredEvent::into_record)
            .collect::<Result<Vec<_>, _>>()?;
        let mut out = BTreeMap::new();
        if complete && self.caught_up(now).await? {
            let live = digest::digests(log).await?;
            for projection in &registry::REGISTRY {
                if !records.iter().any(|r| (projection.relevant)(r))
                    && let Some(d) = live.get(projection.name)
                {
                    out.insert(projection.name.to_owned(), ("live", d.clone()));
                }
            }
        }
        if out.len() == registry::REGISTRY.len() {
            return Ok(out);
        }
        let replayed = self.replay_live_log(head).await?;
        for (name, d) in replayed {
            out.entry(name).or_insert(("live_log", d));
        }
        Ok(out)
    }

    /// Digests of read models replayed from the live log up to `head`.
    async fn replay_live_log(&self, head: Cursor) -> Result<Digests, BackupError> {
        let scratch = self.scratch().await?;
        let copy = self
            .dir()
            .join(".scratch")
            .join(format!("live-{}", uuid::Uuid::new_v4().simple()));
        let built = async {
            tokio::fs::create_dir_all(&copy).await?;
            archive::export(self.inner.log.db(), &copy, Some(head)).await?;
            restore::load(scratch.log.db(), &copy, self.inner.settings.batch_rows).await?;
            restore::replay(&scratch.log).await?;
            digest::digests(&scratch.log).await
        }
        .await;
        scratch.drop_store().await;
        let _ = tokio::fs::remove_dir_all(&copy).await;
        built
    }

    /// Waits until no live projection has an event it applies between its
    /// checkpoint and `head` (projections save their checkpoint over events
    /// they ignore only now and then, so the checkpoint alone cannot tell).
    async fn caught_up(&self, head: Cursor) -> Result<bool, BackupError> {
        let deadline = Instant::now() + self.inner.settings.catchup_timeout;
        loop {
            let mut behind = false;
            for projection in &registry::REGISTRY {
                let at = self
                    .inner
                    .log
                    .load_checkpoint(&checkpoint_name(projection.name))
                    .await?;
                if at < head && self.applies_between(projection, at, head).await? {
                    behind = true;
                    break;
                }
            }
            if !behind {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether `projection` applies an event in (`from`, `to`]; past
    /// `SERVICE_BACKUP_COMPARE_WINDOW_EVENTS` events it is taken to.
    async fn applies_between(
        &self,
        projection: &registry::Registered,
        from: Cursor,
        to: Cursor,
    ) -> Result<bool, BackupError> {
        let mut after = from;
        let mut seen = 0i64;
        while after < to {
            let page = self.inner.log.read_feed(after, 500).await?;
            let Some(last) = page.last() else {
                return Ok(false);
            };
            after = last.cursor();
            seen += page.len() as i64;
            for event in page {
                if event.cursor() > to {
                    return Ok(false);
                }
                if (projection.relevant)(&event.into_record()?) {
                    return Ok(true);
                }
            }
            if seen >= self.inner.settings.compare_window {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
