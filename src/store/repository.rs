//! cqrs-es's persistence seam: aggregates load and commit through this and
//! never see the hash chain. Events leave it raised to their current version
//! by the upcasters every projection also decodes through
//! (`agon_aggregates::wire`).

use agon_aggregates::wire::{self, Stored};
use cqrs_es::Aggregate;
use cqrs_es::persist::{
    PersistedEventRepository, PersistenceError, ReplayStream, SerializedEvent, SerializedSnapshot,
};
use futures::StreamExt;
use serde_json::Value;

use super::db::with_pool;
use super::rows::{EVENT_COLUMNS, StoredEvent};
use super::{EventLog, StoreError};

/// The store's error travels boxed through cqrs-es and is unboxed again on
/// the way out (`commands.rs`), so callers match on its type.
impl From<StoreError> for PersistenceError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Conflict { .. } => PersistenceError::OptimisticLockError,
            e @ (StoreError::Database(_) | StoreError::Unavailable { .. }) => {
                PersistenceError::ConnectionError(Box::new(e))
            }
            e @ StoreError::Json(_) => PersistenceError::DeserializationError(Box::new(e)),
            e @ StoreError::Undecodable(_) => PersistenceError::DeserializationError(Box::new(e)),
            other => PersistenceError::UnknownError(Box::new(other)),
        }
    }
}

/// A stored event as cqrs-es reads it, raised to its current version.
fn to_serialized(row: StoredEvent) -> Result<SerializedEvent, StoreError> {
    let upgraded = wire::upgrade(
        Stored {
            aggregate_type: &row.aggregate_type,
            event_type: &row.event_type,
            event_version: &row.event_version,
        },
        row.payload_value()?,
    )?;
    Ok(SerializedEvent {
        payload: upgraded.payload,
        metadata: row.metadata_value()?,
        sequence: usize::try_from(row.sequence).unwrap_or_default(),
        aggregate_id: row.aggregate_id,
        aggregate_type: row.aggregate_type,
        event_type: row.event_type,
        event_version: upgraded.version.to_string(),
    })
}

impl PersistedEventRepository for EventLog {
    async fn get_events<A: Aggregate>(
        &self,
        aggregate_id: &str,
    ) -> Result<Vec<SerializedEvent>, PersistenceError> {
        self.get_last_events::<A>(aggregate_id, 0).await
    }

    async fn get_last_events<A: Aggregate>(
        &self,
        aggregate_id: &str,
        last_sequence: usize,
    ) -> Result<Vec<SerializedEvent>, PersistenceError> {
        let after = i64::try_from(last_sequence).unwrap_or(i64::MAX);
        let rows = self.load_stream(A::TYPE, aggregate_id, after).await?;
        Ok(rows
            .into_iter()
            .map(to_serialized)
            .collect::<Result<_, _>>()?)
    }

    async fn get_snapshot<A: Aggregate>(
        &self,
        aggregate_id: &str,
    ) -> Result<Option<SerializedSnapshot>, PersistenceError> {
        let row: Option<(i64, i64, String)> = with_pool!(self.db().reader(), pool => {
            sqlx::query_as(
                "SELECT last_sequence, snapshot_version, payload FROM snapshots \
                 WHERE aggregate_type = $1 AND aggregate_id = $2",
            )
            .bind(A::TYPE)
            .bind(aggregate_id)
            .fetch_optional(pool)
            .await
            .map_err(StoreError::from)?
        });
        let Some((last_sequence, snapshot_version, payload)) = row else {
            return Ok(None);
        };
        let aggregate: Value = serde_json::from_str(&payload).map_err(StoreError::from)?;
        Ok(Some(SerializedSnapshot {
            aggregate_id: aggregate_id.to_owned(),
            aggregate,
            current_sequence: usize::try_from(last_sequence).unwrap_or_default(),
            current_snapshot: usize::try_from(snapshot_version).unwrap_or_default(),
        }))
    }

    async fn persist<A: Aggregate>(
        &self,
        events: &[SerializedEvent],
        snapshot_update: Option<(String, Value, usize)>,
    ) -> Result<(), PersistenceError> {
        let snapshot = snapshot_update
            .map(|(_, aggregate, version)| (aggregate, i64::try_from(version).unwrap_or(i64::MAX)));
        Ok(self.append_with_snapshot(events, snapshot).await?)
    }

    async fn stream_events<A: Aggregate>(
        &self,
        aggregate_id: &str,
    ) -> Result<ReplayStream, PersistenceError> {
        let (mut feed, stream) = ReplayStream::new(256);
        let rows = self.load_stream(A::TYPE, aggregate_id, 0).await?;
        tokio::spawn(async move {
            for row in rows {
                let item = to_serialized(row).map_err(PersistenceError::from);
                if feed.push(item).await.is_err() {
                    break;
                }
            }
        });
        Ok(stream)
    }

    async fn stream_all_events<A: Aggregate>(&self) -> Result<ReplayStream, PersistenceError> {
        let (mut feed, stream) = ReplayStream::new(256);
        let db = self.db().clone();
        tokio::spawn(async move {
            let sql = format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE aggregate_type = $1 ORDER BY position"
            );
            with_pool!(db.reader(), pool => {
                let mut rows = sqlx::query_as::<_, StoredEvent>(&sql).bind(A::TYPE).fetch(pool);
                while let Some(row) = rows.next().await {
                    let item = row
                        .map_err(StoreError::from)
                        .and_then(to_serialized)
                        .map_err(PersistenceError::from);
                    if feed.push(item).await.is_err() {
                        break;
                    }
                }
            });
        });
        Ok(stream)
    }
}
