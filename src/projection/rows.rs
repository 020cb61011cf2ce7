//! A batch's row changes as few statements (the same SQL on SQLite and
//! PostgreSQL): a run of changes of one shape to one table is one
//! multi-row statement. Each statement is a round trip to the database (on
//! SQLite, two thread wake-ups through the driver's worker thread), and a
//! batch used to make one per changed row: the audit index alone made
//! three per event.
//!
//! Only the order of changes within a table is kept: the read-model tables
//! have no foreign keys or triggers between them, so changes to different
//! tables commute. A run never holds one row twice (PostgreSQL refuses to
//! update a row twice in one statement, and the order of two changes to a
//! row matters), and a delete is a statement of its own.

use agon_projections::tables::{Cell, Change, RowChange};

use crate::store::value_rows;

/// Values bound per statement at most (under SQLite's lowest limit, 999).
const MAX_VALUES: usize = 900;

/// One value to bind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bind<'a> {
    Cell(&'a Cell),
    /// An increment's amount.
    Int(i64),
}

/// One statement and its values in bind order.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Statement<'a> {
    pub sql: String,
    pub values: Vec<Bind<'a>>,
}

/// The statements that make `changes`.
pub(crate) fn plan<'a>(changes: impl IntoIterator<Item = &'a RowChange>) -> Vec<Statement<'a>> {
    let changes: Vec<&RowChange> = changes.into_iter().collect();
    let mut tables: Vec<&str> = Vec::new();
    for change in &changes {
        if !tables.contains(&change.table) {
            tables.push(change.table);
        }
    }
    let mut statements = Vec::new();
    for table in tables {
        let mut run: Vec<&RowChange> = Vec::new();
        for &change in changes.iter().filter(|c| c.table == table) {
            let fits = run.first().is_some_and(|first| {
                !matches!(change.change, Change::Delete)
                    && same_shape(first, change)
                    && !run.iter().any(|c| c.key == change.key)
                    && (run.len() + 1) * width(change) <= MAX_VALUES
            });
            if !fits && !run.is_empty() {
                statements.push(statement(&run));
                run.clear();
            }
            run.push(change);
        }
        if !run.is_empty() {
            statements.push(statement(&run));
        }
    }
    statements
}

/// Whether `a` and `b` can share a statement's column list and action.
fn same_shape(a: &RowChange, b: &RowChange) -> bool {
    // Compared in place: this runs for every change of every batch.
    let same = |x: &[(&'static str, Cell)], y: &[(&'static str, Cell)]| {
        x.iter().map(|(n, _)| n).eq(y.iter().map(|(n, _)| n))
    };
    same(&a.key, &b.key)
        && match (&a.change, &b.change) {
            (Change::Upsert(x), Change::Upsert(y)) => same(x, y),
            (Change::Increment { column: x, .. }, Change::Increment { column: y, .. }) => x == y,
            _ => false,
        }
}

/// The values a change binds.
fn width(change: &RowChange) -> usize {
    change.key.len()
        + match &change.change {
            Change::Upsert(columns) => columns.len(),
            Change::Increment { .. } => 1,
            Change::Delete => 0,
        }
}

/// The statement of a run of changes of one shape (see [`plan`]).
fn statement<'a>(run: &[&'a RowChange]) -> Statement<'a> {
    let first = run[0];
    let table = first.table;
    let keys: Vec<&str> = first.key.iter().map(|(name, _)| *name).collect();
    let conflict = keys.join(", ");
    let mut values: Vec<Bind<'a>> = Vec::new();
    for change in run {
        values.extend(change.key.iter().map(|(_, cell)| Bind::Cell(cell)));
        match &change.change {
            Change::Upsert(columns) => values.extend(columns.iter().map(|(_, c)| Bind::Cell(c))),
            Change::Increment { by, .. } => values.push(Bind::Int(*by)),
            Change::Delete => {}
        }
    }
    let sql = match &first.change {
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
                "INSERT INTO {table} ({}) VALUES {} ON CONFLICT ({conflict}) DO {action}",
                names.join(", "),
                value_rows(run.len(), names.len()),
            )
        }
        Change::Increment { column, .. } => format!(
            "INSERT INTO {table} ({conflict}, {column}) VALUES {} \
             ON CONFLICT ({conflict}) DO UPDATE SET {column} = {table}.{column} + excluded.{column}",
            value_rows(run.len(), keys.len() + 1),
        ),
    };
    Statement { sql, values }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(table: &'static str, key: &str, change: Change) -> RowChange {
        RowChange {
            table,
            key: vec![("a", key.into()), ("b", 1.into())],
            change,
        }
    }

    fn upsert(table: &'static str, key: &str, value: &str) -> RowChange {
        change(table, key, Change::Upsert(vec![("c", value.into())]))
    }

    fn sql_of(changes: &[RowChange]) -> Vec<String> {
        plan(changes).into_iter().map(|s| s.sql).collect()
    }

    #[test]
    fn one_change_is_one_statement_both_back_ends_read() {
        let one = [upsert("t", "x", "v")];
        let planned = plan(&one);
        assert_eq!(
            planned[0].sql,
            "INSERT INTO t (a, b, c) VALUES ($1, $2, $3) ON CONFLICT (a, b) DO UPDATE SET c = excluded.c"
        );
        assert_eq!(planned[0].values.len(), 3);
        let keep = [change("t", "x", Change::Upsert(Vec::new()))];
        assert!(sql_of(&keep)[0].ends_with("ON CONFLICT (a, b) DO NOTHING"));
        let delete = [change("t", "x", Change::Delete)];
        assert_eq!(sql_of(&delete), ["DELETE FROM t WHERE a = $1 AND b = $2"]);
        let add = [change("t", "x", Change::Increment { column: "n", by: 2 })];
        let planned = plan(&add);
        assert_eq!(
            planned[0].sql,
            "INSERT INTO t (a, b, n) VALUES ($1, $2, $3) ON CONFLICT (a, b) DO UPDATE SET n = t.n + excluded.n"
        );
        assert_eq!(planned[0].values[2], Bind::Int(2));
    }

    #[test]
    fn runs_of_one_shape_share_a_statement_and_each_table_keeps_its_order() {
        let changes = [
            upsert("t", "x", "1"),
            change("u", "x", Change::Increment { column: "n", by: 1 }),
            upsert("t", "y", "2"),
            change("u", "y", Change::Increment { column: "n", by: 3 }),
            // The same row again: a statement of its own, after the first.
            upsert("t", "x", "3"),
            change("t", "z", Change::Delete),
            upsert("t", "z", "4"),
        ];
        let planned = plan(&changes);
        let sql: Vec<&str> = planned.iter().map(|s| s.sql.as_str()).collect();
        assert_eq!(
            sql,
            [
                "INSERT INTO t (a, b, c) VALUES ($1, $2, $3), ($4, $5, $6) ON CONFLICT (a, b) DO UPDATE SET c = excluded.c",
                "INSERT INTO t (a, b, c) VALUES ($1, $2, $3) ON CONFLICT (a, b) DO UPDATE SET c = excluded.c",
                "DELETE FROM t WHERE a = $1 AND b = $2",
                "INSERT INTO t (a, b, c) VALUES ($1, $2, $3) ON CONFLICT (a, b) DO UPDATE SET c = excluded.c",
                "INSERT INTO u (a, b, n) VALUES ($1, $2, $3), ($4, $5, $6) ON CONFLICT (a, b) DO UPDATE SET n = u.n + excluded.n",
            ]
        );
        let x: Cell = "x".into();
        let y: Cell = "y".into();
        let (one, two): (Cell, Cell) = ("1".into(), "2".into());
        let b: Cell = 1.into();
        assert_eq!(
            planned[0].values,
            [
                Bind::Cell(&x),
                Bind::Cell(&b),
                Bind::Cell(&one),
                Bind::Cell(&y),
                Bind::Cell(&b),
                Bind::Cell(&two)
            ]
        );
        assert_eq!(planned[4].values[5], Bind::Int(3));
    }

    #[test]
    fn different_columns_and_long_runs_split() {
        let other = change("t", "y", Change::Upsert(vec![("d", "v".into())]));
        assert_eq!(sql_of(&[upsert("t", "x", "1"), other]).len(), 2);
        let many: Vec<RowChange> = (0..700).map(|i| upsert("t", &i.to_string(), "v")).collect();
        let planned = plan(&many);
        assert_eq!(planned.len(), 3, "300 rows of 3 values a statement");
        assert!(planned.iter().all(|s| s.values.len() <= MAX_VALUES));
        assert_eq!(planned.iter().map(|s| s.values.len()).sum::<usize>(), 2_100);
    }
}
