//! Digests of the read models: one SHA-256 per projection over what it
//! stores (documents, view, fold states and its own tables), so a restored
//! store can be compared with the live one without shipping the rows.

use std::collections::BTreeMap;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::BackupError;
use crate::projection::registry::REGISTRY;
use crate::store::canonical;
use crate::store::db::with_pool;
use crate::store::{Db, EventLog};

/// Tables of counters, and the count column: a row counted down to zero
/// reads as no row (a live read model keeps it where a replay that folds
/// the same changes in one batch never writes it).
const COUNTERS: [(&str, &str); 2] = [
    ("debate_list_counts", "debates"),
    ("admin_event_counts", "events"),
];

/// The digest of every registered projection, by name.
pub type Digests = BTreeMap<String, String>;

/// JSON text in canonical form, so that equal values digest alike whatever
/// the back end did to their spelling; text that is not JSON stays as it is.
fn canonical_text(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .map_or_else(|_| text.to_owned(), |v| canonical::to_string(&v))
}

/// Digests every projection's stored read model in `log`.
pub async fn digests(log: &EventLog) -> Result<Digests, BackupError> {
    let db = log.db();
    let mut out = Digests::new();
    for projection in &REGISTRY {
        let name = projection.name;
        let mut lines: Vec<String> = Vec::new();
        let documents: Vec<(String, Option<String>, Option<String>, String)> = with_pool!(db.reader(), pool => {
            sqlx::query_as(
                "SELECT doc_key, owner, lookup, doc FROM documents WHERE projection = $1",
            )
            .bind(name)
            .fetch_all(pool)
            .await?
        });
        for (key, owner, lookup, doc) in documents {
            lines.push(canonical::to_string(&serde_json::json!({
                "document": key, "owner": owner, "lookup": lookup, "doc": canonical_text(&doc),
            })));
        }
        let keyed: Vec<(String, String)> = with_pool!(db.reader(), pool => {
            sqlx::query_as(
                "SELECT '' AS k, view FROM projection_views WHERE projection = $1 \
                 UNION ALL SELECT state_key, state FROM projection_states WHERE projection = $1",
            )
            .bind(name)
            .fetch_all(pool)
            .await?
        });
        for (key, value) in keyed {
            lines.push(canonical::to_string(&serde_json::json!({
                "state": key, "value": canonical_text(&value),
            })));
        }
        for table in projection.tables {
            let counter = COUNTERS.iter().find(|(t, _)| t == table).map(|(_, c)| *c);
            for row in table_rows(db, table).await? {
                let row: Value = serde_json::from_str(&row)?;
                if counter.is_some_and(|c| row[c] == 0) {
                    continue;
                }
                lines.push(format!("{table} {}", canonical::to_string(&row)));
            }
        }
        lines.sort_unstable();

        let mut hasher = Sha256::new();
        for line in &lines {
            hasher.update(line.as_bytes());
            hasher.update(b"\n");
        }
        out.insert(name.to_owned(), hex::encode(hasher.finalize()));
    }
    Ok(out)
}

/// Every row of `table` as a JSON object text, on either back end.
async fn table_rows(db: &Db, table: &str) -> Result<Vec<String>, BackupError> {
    Ok(match db {
        Db::Postgres(pool) => {
            sqlx::query_scalar(&format!("SELECT row_to_json(t)::text FROM {table} t"))
                .fetch_all(pool)
                .await?
        }
        Db::Sqlite { reader, .. } => {
            let columns: Vec<String> =
                sqlx::query_scalar("SELECT name FROM pragma_table_info($1) ORDER BY cid")
                    .bind(table)
                    .fetch_all(reader)
                    .await?;
            let pairs = columns
                .iter()
                .map(|c| format!("'{c}', \"{c}\""))
                .collect::<Vec<_>>()
                .join(", ");
            sqlx::query_scalar(&format!("SELECT json_object({pairs}) FROM {table}"))
                .fetch_all(reader)
                .await?
        }
    })
}
