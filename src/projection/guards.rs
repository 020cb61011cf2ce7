//! Which events of a batch are new to a projection, decided per stream in
//! three statements whatever the batch size (two on SQLite): create missing
//! guard rows (PostgreSQL only), read (and on PostgreSQL lock) them, advance
//! them. The row lock makes two replicas handling one batch take turns; the
//! second then finds the events applied and skips them, as a per-event guard
//! would, without a round trip per event. The checkpoint commits in the same
//! transaction.

use std::collections::HashMap;

use agon_projections::{Cursor, EventRecord};

use crate::store::StoreError;

/// Streams per statement (two or three parameters each).
const CHUNK: usize = 200;

type Stream<'e> = (&'e str, &'e str);

fn stream(event: &EventRecord) -> Stream<'_> {
    (&event.aggregate_type, &event.aggregate_id)
}

/// `(… $2, $3 …), (… $4, $5 …)` for `rows` rows of `width` parameters after `$1`.
fn placeholders(rows: usize, width: usize, row: impl Fn(&[String]) -> String) -> String {
    (0..rows)
        .map(|r| {
            let params: Vec<String> = (0..width)
                .map(|c| format!("${}", 2 + r * width + c))
                .collect();
            row(&params)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// For each event of `events` (in feed order), whether projection `name`
/// has yet to apply it; records the newest sequence per stream. The guard
/// rows are locked on PostgreSQL; SQLite has one writer.
pub(super) async fn fresh_events<DB>(
    tx: &mut sqlx::Transaction<'_, DB>,
    name: &str,
    events: &[&EventRecord],
) -> Result<Vec<bool>, StoreError>
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    i64: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    String: for<'r> sqlx::Decode<'r, DB> + sqlx::Type<DB>,
    i64: for<'r> sqlx::Decode<'r, DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
    StoreError: From<sqlx::Error>,
{
    // PostgreSQL locks the guard rows, so they must exist before the read;
    // SQLite has one writer and needs neither the rows nor the lock (a
    // stream without a row has applied nothing yet).
    let postgres = DB::NAME == "PostgreSQL";
    let lock = if postgres { " FOR UPDATE" } else { "" };
    let mut newest: HashMap<Stream<'_>, i64> = HashMap::new();
    for event in events {
        let seen = newest.entry(stream(event)).or_insert(0);
        *seen = (*seen).max(event.sequence);
    }
    let streams: Vec<Stream<'_>> = newest.keys().copied().collect();
    let mut applied: HashMap<Stream<'_>, i64> = HashMap::new();
    for chunk in streams.chunks(CHUNK) {
        if postgres {
            let rows = placeholders(chunk.len(), 2, |p| format!("($1, {}, {}, 0)", p[0], p[1]));
            let sql = format!(
                "INSERT INTO projection_guards (projection, aggregate_type, aggregate_id, last_sequence) \
                 VALUES {rows} ON CONFLICT (projection, aggregate_type, aggregate_id) DO NOTHING"
            );
            let mut query = sqlx::query(&sql).bind(name);
            for (kind, id) in chunk {
                query = query.bind(*kind).bind(*id);
            }
            query.execute(&mut **tx).await?;
        }
        let matches = placeholders(chunk.len(), 2, |p| {
            format!("(aggregate_type = {} AND aggregate_id = {})", p[0], p[1])
        })
        .replace(", (", " OR (");
        let sql = format!(
            "SELECT aggregate_type, aggregate_id, last_sequence FROM projection_guards \
             WHERE projection = $1 AND ({matches}){lock}"
        );
        let mut query = sqlx::query(&sql).bind(name);
        for (kind, id) in chunk {
            query = query.bind(*kind).bind(*id);
        }
        for row in query.fetch_all(&mut **tx).await? {
            use sqlx::Row;
            let kind: String = row.try_get(0)?;
            let id: String = row.try_get(1)?;
            let last: i64 = row.try_get(2)?;
            if let Some(key) = chunk.iter().find(|(k, i)| *k == kind && *i == id) {
                applied.insert(*key, last);
            }
        }
    }
    let fresh: Vec<bool> = events
        .iter()
        .map(|event| {
            let last = applied.entry(stream(event)).or_insert(0);
            let new = event.sequence > *last;
            if new {
                *last = event.sequence;
            }
            new
        })
        .collect();
    let advanced: Vec<(Stream<'_>, i64)> = newest
        .into_iter()
        .filter(|(key, _)| {
            events
                .iter()
                .zip(&fresh)
                .any(|(e, f)| *f && stream(e) == *key)
        })
        .collect();
    for chunk in advanced.chunks(CHUNK) {
        let rows = placeholders(chunk.len(), 3, |p| {
            format!("($1, {}, {}, {})", p[0], p[1], p[2])
        });
        let sql = format!(
            "INSERT INTO projection_guards (projection, aggregate_type, aggregate_id, last_sequence) \
             VALUES {rows} ON CONFLICT (projection, aggregate_type, aggregate_id) \
             DO UPDATE SET last_sequence = excluded.last_sequence \
             WHERE projection_guards.last_sequence < excluded.last_sequence"
        );
        let mut query = sqlx::query(&sql).bind(name);
        for ((kind, id), sequence) in chunk {
            query = query.bind(*kind).bind(*id).bind(*sequence);
        }
        query.execute(&mut **tx).await?;
    }
    Ok(fresh)
}

/// Saves the checkpoints of the projections `saves` names inside their
/// batch's transaction, so each read model and the point it reached commit
/// together: in one statement (a group's batch saves a dozen).
pub(super) async fn save_checkpoints<DB>(
    tx: &mut sqlx::Transaction<'_, DB>,
    saves: &[(&str, Cursor)],
) -> Result<(), StoreError>
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> <DB as sqlx::Database>::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    String: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    i64: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    StoreError: From<sqlx::Error>,
{
    let now = crate::store::now();
    for chunk in saves.chunks(CHUNK) {
        let sql = crate::store::checkpoint_upsert(chunk.len());
        let mut query = sqlx::query(&sql);
        for (name, cursor) in chunk {
            query = query
                .bind(super::checkpoint_name(name))
                .bind(cursor.txid)
                .bind(cursor.position)
                .bind(now.clone());
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::placeholders;

    #[test]
    fn placeholders_number_rows_after_the_first_parameter() {
        let rows = placeholders(2, 2, |p| format!("($1, {}, {})", p[0], p[1]));
        assert_eq!(rows, "($1, $2, $3), ($1, $4, $5)");
    }
}
