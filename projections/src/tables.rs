//! Table projections: read models that own SQL tables. The fold stays pure:
//! it turns an event into a value describing row upserts, deletes and
//! increments ([`Changes`]), and the service's runner turns that value into
//! SQL for either back end, in the same transaction as the checkpoint. So a
//! projection can write several rows per event, and its readers get indexes,
//! filters and aggregates from the database.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{DecodeError, EventRecord};

/// One value of a row: text or an integer, either possibly null.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    Text(Option<String>),
    Int(Option<i64>),
}

impl From<&str> for Cell {
    fn from(text: &str) -> Self {
        Cell::Text(Some(text.to_owned()))
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Self {
        Cell::Text(Some(text))
    }
}

impl From<Option<String>> for Cell {
    fn from(text: Option<String>) -> Self {
        Cell::Text(text)
    }
}

impl From<i64> for Cell {
    fn from(n: i64) -> Self {
        Cell::Int(Some(n))
    }
}

/// Named values: a row's key, or the columns an upsert sets.
pub type Cells = Vec<(&'static str, Cell)>;

/// What happens to one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Insert the row, or set these columns of the existing one (none: keep it as it is).
    Upsert(Cells),
    /// Remove the row if it exists.
    Delete,
    /// Add `by` to `column` (a row created by it starts from 0).
    Increment { column: &'static str, by: i64 },
}

/// A change to the row of `table` whose primary key is `key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowChange {
    pub table: &'static str,
    pub key: Cells,
    pub change: Change,
}

/// The row changes of a batch, in order. A change to a row merges into the
/// row's last change of its kind (upserts set the union of their columns,
/// increments of one column add up) when every change to the row since
/// then wrote other columns, so a batch writes each row about once however
/// many of its events touch it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    list: Vec<RowChange>,
}

impl Changes {
    pub fn upsert(&mut self, table: &'static str, key: Cells, columns: Cells) {
        self.push(table, key, Change::Upsert(columns));
    }

    pub fn delete(&mut self, table: &'static str, key: Cells) {
        self.push(table, key, Change::Delete);
    }

    pub fn increment(&mut self, table: &'static str, key: Cells, column: &'static str, by: i64) {
        self.push(table, key, Change::Increment { column, by });
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &RowChange> {
        self.list.iter()
    }

    fn push(&mut self, table: &'static str, key: Cells, change: Change) {
        let earlier = self
            .list
            .iter_mut()
            .rev()
            .filter(|c| c.table == table && c.key == key);
        for last in earlier {
            match (&mut last.change, &change) {
                (Change::Upsert(set), Change::Upsert(columns)) => {
                    for (name, value) in columns {
                        match set.iter_mut().find(|(n, _)| n == name) {
                            Some(slot) => slot.1 = value.clone(),
                            None => set.push((name, value.clone())),
                        }
                    }
                    return;
                }
                (Change::Delete, Change::Delete) => return,
                (
                    Change::Increment { column, by },
                    Change::Increment {
                        column: next,
                        by: more,
                    },
                ) if column == next => {
                    *by += more;
                    return;
                }
                _ => {}
            }
            // Past a change to other columns of the row: the row exists by
            // then (an upsert or an increment made it), and changes to
            // different columns of a row commute. So an event's "set these,
            // count one more" interleaved with the next event's still
            // merges into one of each.
            if !commute(&last.change, &change) {
                break;
            }
        }
        self.list.push(RowChange { table, key, change });
    }
}

/// Whether two changes to a row that exists commute: neither deletes it,
/// and they write different columns.
fn commute(a: &Change, b: &Change) -> bool {
    let writes = |change: &Change, column: &str| match change {
        Change::Upsert(columns) => columns.iter().any(|(name, _)| *name == column),
        Change::Increment { column: other, .. } => *other == column,
        Change::Delete => true,
    };
    match a {
        Change::Upsert(columns) => columns.iter().all(|(name, _)| !writes(b, name)),
        Change::Increment { column, .. } => !writes(b, column),
        Change::Delete => false,
    }
}

/// A read model kept in tables of its own.
pub trait TableProjection: Send + Sync + 'static {
    /// The name of its checkpoint, its guards and `agon replay --projection`.
    const NAME: &'static str;
    /// The tables it alone writes; emptied when it is rebuilt.
    const TABLES: &'static [&'static str];
    /// What the fold keeps per key between events (a debate as folded so
    /// far); `()` when rows follow from each event alone.
    type State: Serialize + DeserializeOwned + Default + Send + Sync + 'static;

    /// Whether `event` can change a row; batches with none skip the database.
    fn relevant(event: &EventRecord) -> bool;

    /// The key of the state `event` folds into; `None`: no stored state
    /// (the fold gets `State::default()`).
    fn state_key(_event: &EventRecord) -> Result<Option<String>, DecodeError> {
        Ok(None)
    }

    /// Folds one event into its state and records the row changes it makes.
    /// Called at most once per stream and sequence. An event it cannot
    /// decode is an error: the runner stops before it, never past it.
    fn apply(
        state: &mut Self::State,
        event: &EventRecord,
        changes: &mut Changes,
    ) -> Result<(), DecodeError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: &str) -> Cells {
        vec![("id", id.into())]
    }

    #[test]
    fn upserts_of_one_row_merge_their_columns() {
        let mut changes = Changes::default();
        changes.upsert("t", key("a"), vec![("x", 1.into()), ("y", "old".into())]);
        changes.upsert("t", key("b"), vec![("x", 5.into())]);
        changes.upsert("t", key("a"), vec![("y", "new".into())]);
        let rows: Vec<_> = changes.iter().cloned().collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0].change,
            Change::Upsert(vec![("x", 1.into()), ("y", "new".into())])
        );
    }

    #[test]
    fn increments_add_up_and_kinds_keep_their_order() {
        let mut changes = Changes::default();
        changes.increment("c", key("a"), "n", 1);
        changes.increment("c", key("a"), "n", 2);
        changes.delete("c", key("a"));
        changes.increment("c", key("a"), "n", 4);
        let kinds: Vec<_> = changes.iter().map(|c| c.change.clone()).collect();
        assert_eq!(
            kinds,
            vec![
                Change::Increment { column: "n", by: 3 },
                Change::Delete,
                Change::Increment { column: "n", by: 4 },
            ]
        );
    }

    #[test]
    fn changes_to_other_columns_do_not_keep_a_row_s_changes_apart() {
        let mut changes = Changes::default();
        for n in 1..=3 {
            changes.upsert("t", key("a"), vec![("last", n.into())]);
            changes.increment("t", key("a"), "count", 1);
        }
        // A change to the counted column is not moved past its increments.
        changes.upsert("t", key("a"), vec![("count", 0.into())]);
        changes.increment("t", key("a"), "count", 5);
        let kinds: Vec<_> = changes.iter().map(|c| c.change.clone()).collect();
        assert_eq!(
            kinds,
            vec![
                Change::Upsert(vec![("last", 3.into())]),
                Change::Increment {
                    column: "count",
                    by: 3
                },
                Change::Upsert(vec![("count", 0.into())]),
                Change::Increment {
                    column: "count",
                    by: 5
                },
            ]
        );
    }
}
