//! Runs table projections: turns the row changes their pure folds describe
//! into SQL (the same statements on SQLite and PostgreSQL).
//!
//! Per batch, in one transaction, exactly as the other two runners: the
//! stream guards decide which events are new, the fold states those events
//! need are loaded, the events are folded, their row changes written, the
//! states and the checkpoint saved. Re-delivered events are skipped by the
//! guards, so an increment is never applied twice.

use std::collections::HashMap;
use std::marker::PhantomData;

use agon_projections::{Changes, EventRecord, TableProjection};
use async_trait::async_trait;

use super::{IdleCheckpoint, Member, Undecodable, guards};
use crate::store::db::{Tx, with_tx};
use crate::store::{EventLog, StoreError};

/// States loaded or saved per statement.
const STATE_CHUNK: usize = 200;

/// A table projection hooked to the store as a bus consumer.
pub struct TableRunner<P: TableProjection> {
    log: EventLog,
    idle: IdleCheckpoint,
    _projection: PhantomData<P>,
}

impl<P: TableProjection> TableRunner<P> {
    pub fn new(log: EventLog) -> Self {
        Self {
            log,
            idle: IdleCheckpoint::default(),
            _projection: PhantomData,
        }
    }

    pub(super) fn log(&self) -> &EventLog {
        &self.log
    }
}

/// Runs `$changes` in `$tx` (a transaction of either back end), in as few
/// statements as [`super::rows::plan`] makes of them.
macro_rules! write_changes {
    ($tx:expr, $changes:expr) => {
        for statement in $crate::projection::rows::plan($changes.iter()) {
            let mut query = sqlx::query(&statement.sql);
            for value in statement.values {
                use agon_projections::tables::Cell;
                use $crate::projection::rows::Bind;
                query = match value {
                    Bind::Cell(Cell::Text(text)) => query.bind(text.as_deref()),
                    Bind::Cell(Cell::Int(n)) => query.bind(*n),
                    Bind::Int(by) => query.bind(by),
                };
            }
            query.execute(&mut *$tx).await?;
        }
    };
}
pub(super) use write_changes;

super::projection_consumer!(TableRunner, TableProjection);

#[async_trait]
impl<P: TableProjection> Member for TableRunner<P> {
    fn relevant(&self, event: &EventRecord) -> bool {
        P::relevant(event)
    }

    fn idle(&self) -> &IdleCheckpoint {
        &self.idle
    }

    async fn fold(
        &self,
        tx: &mut Tx,
        batch: &[EventRecord],
    ) -> Result<Option<Undecodable>, StoreError> {
        // Each relevant event with its place in the batch.
        let (at, events): (Vec<usize>, Vec<&EventRecord>) = batch
            .iter()
            .enumerate()
            .filter(|(_, e)| P::relevant(e))
            .unzip();
        with_tx!(tx, tx => {
            let fresh = guards::fresh_events(tx, P::NAME, &events).await?;
            let mut keys: Vec<Option<String>> = Vec::with_capacity(events.len());
            for (i, (event, fresh)) in events.iter().zip(&fresh).enumerate() {
                if !*fresh {
                    keys.push(None);
                    continue;
                }
                match P::state_key(event) {
                    Ok(key) => keys.push(key),
                    // Dropping the transaction rolls it back.
                    Err(error) => return Ok(Some((at[i], error))),
                }
            }
            let mut wanted: Vec<&String> = keys.iter().flatten().collect();
            wanted.sort_unstable();
            wanted.dedup();
            let mut states: HashMap<String, P::State> = HashMap::new();
            for chunk in wanted.chunks(STATE_CHUNK) {
                let list = (0..chunk.len())
                    .map(|i| format!("${}", i + 2))
                    .collect::<Vec<_>>()
                    .join(", ");
                let sql = format!(
                    "SELECT state_key, state FROM projection_states \
                     WHERE projection = $1 AND state_key IN ({list})"
                );
                let mut query = sqlx::query_as::<_, (String, String)>(&sql).bind(P::NAME);
                for key in chunk {
                    query = query.bind(key.as_str());
                }
                for (key, text) in query.fetch_all(&mut **tx).await? {
                    states.insert(key, serde_json::from_str(&text)?);
                }
            }
            let mut changes = Changes::default();
            for (i, (event, fresh)) in events.iter().zip(&fresh).enumerate() {
                if !*fresh {
                    continue;
                }
                let applied = match &keys[i] {
                    Some(key) => P::apply(states.entry(key.clone()).or_default(), event, &mut changes),
                    None => P::apply(&mut P::State::default(), event, &mut changes),
                };
                if let Err(error) = applied {
                    return Ok(Some((at[i], error)));
                }
            }
            write_changes!(*tx, changes);
            let saved = states
                .iter()
                .map(|(key, state)| Ok((key.as_str(), serde_json::to_string(state)?)))
                .collect::<Result<Vec<_>, StoreError>>()?;
            for chunk in saved.chunks(STATE_CHUNK) {
                let mut upsert = sqlx::QueryBuilder::new(
                    "INSERT INTO projection_states (projection, state_key, state) ",
                );
                upsert.push_values(chunk, |mut row, (key, state)| {
                    row.push_bind(P::NAME).push_bind(*key).push_bind(state.as_str());
                });
                upsert.push(
                    " ON CONFLICT (projection, state_key) DO UPDATE SET state = excluded.state",
                );
                upsert.build().execute(&mut **tx).await?;
            }
        });
        Ok(None)
    }
}
