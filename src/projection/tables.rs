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

use agon_projections::tables::{Cell, Change, RowChange};
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

/// The statement that makes `change`, its values bound in the order they are listed.
pub(crate) fn statement(change: &RowChange) -> (String, Vec<&Cell>) {
    let table = change.table;
    let keys: Vec<&str> = change.key.iter().map(|(name, _)| *name).collect();
    let mut values: Vec<&Cell> = change.key.iter().map(|(_, cell)| cell).collect();
    let params = |from: usize, n: usize| {
        (from..from + n)
            .map(|i| format!("${i}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let conflict = keys.join(", ");
    let sql = match &change.change {
        Change::Delete => {
            let matches: Vec<String> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| format!("{k} = ${}", i + 1))
                .collect();
            format!("DELETE FROM {table} WHERE {}", matches.join(" AND "))
        }
        Change::Upsert(columns) => {
            let names: Vec<&str> = keys
                .iter()
                .copied()
                .chain(columns.iter().map(|(n, _)| *n))
                .collect();
            values.extend(columns.iter().map(|(_, cell)| cell));
            let action = if columns.is_empty() {
                "NOTHING".to_owned()
            } else {
                let sets: Vec<String> = columns
                    .iter()
                    .map(|(n, _)| format!("{n} = excluded.{n}"))
                    .collect();
                format!("UPDATE SET {}", sets.join(", "))
            };
            format!(
                "INSERT INTO {table} ({}) VALUES ({}) ON CONFLICT ({conflict}) DO {action}",
                names.join(", "),
                params(1, names.len()),
            )
        }
        Change::Increment { column, .. } => format!(
            "INSERT INTO {table} ({conflict}, {column}) VALUES ({}) \
             ON CONFLICT ({conflict}) DO UPDATE SET {column} = {table}.{column} + excluded.{column}",
            params(1, keys.len() + 1),
        ),
    };
    (sql, values)
}

/// The amount an increment adds (bound after its key).
pub(crate) fn increment_of(change: &RowChange) -> Option<i64> {
    match change.change {
        Change::Increment { by, .. } => Some(by),
        _ => None,
    }
}

/// Runs `$changes` in `$tx` (a transaction of either back end).
macro_rules! write_changes {
    ($tx:expr, $changes:expr) => {
        for change in $changes.iter() {
            let (sql, values) = $crate::projection::tables::statement(change);
            let mut query = sqlx::query(&sql);
            for value in values {
                query = match value {
                    agon_projections::tables::Cell::Text(text) => query.bind(text.as_deref()),
                    agon_projections::tables::Cell::Int(n) => query.bind(*n),
                };
            }
            if let Some(by) = $crate::projection::tables::increment_of(change) {
                query = query.bind(by);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn change(change: Change) -> RowChange {
        RowChange {
            table: "t",
            key: vec![("a", "x".into()), ("b", 1.into())],
            change,
        }
    }

    /// The statement of `kind` and how many values it binds before an increment.
    fn sql_of(kind: Change) -> (String, usize) {
        let change = change(kind);
        let (sql, values) = statement(&change);
        (sql, values.len())
    }

    #[test]
    fn each_change_is_one_statement_both_back_ends_read() {
        assert_eq!(
            sql_of(Change::Upsert(vec![("c", "v".into())])),
            (
                "INSERT INTO t (a, b, c) VALUES ($1, $2, $3) ON CONFLICT (a, b) DO UPDATE SET c = excluded.c".to_owned(),
                3
            )
        );
        let (sql, _) = sql_of(Change::Upsert(Vec::new()));
        assert!(sql.ends_with("ON CONFLICT (a, b) DO NOTHING"), "{sql}");
        assert_eq!(
            sql_of(Change::Delete),
            ("DELETE FROM t WHERE a = $1 AND b = $2".to_owned(), 2)
        );
        assert_eq!(
            sql_of(Change::Increment { column: "n", by: 2 }),
            (
                "INSERT INTO t (a, b, n) VALUES ($1, $2, $3) ON CONFLICT (a, b) DO UPDATE SET n = t.n + excluded.n".to_owned(),
                2
            )
        );
    }
}
