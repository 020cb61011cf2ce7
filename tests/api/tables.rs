//! Table projections: the debates list is read from an index in its order
//! (never a scan and sort of every debate), both back ends hold the same
//! schema after all migrations, and a projection whose version changed is
//! emptied at start so that it rebuilds.

use std::collections::BTreeMap;

use agon::projection::reads::{debate_page_sql, debate_search_sql};
use agon::projection::{ListFilter, REGISTRY, reset_changed};
use agon::store::db::PoolRef;

use crate::support::{Kind, fresh, on_both_backends};

on_both_backends! {
    the_list_is_read_from_an_index => the_list_is_read_from_an_index;
    a_changed_version_empties_the_projection => a_changed_version_empties_the_projection;
    a_search_is_read_in_list_order => a_search_is_read_in_list_order;
}

/// Tables only one back end has, and why.
const POSTGRES_ONLY: [&str; 1] = [
    // The feed order's per-database shift (migration 0005): SQLite's `txid` is always 0.
    "event_order",
];

/// Indexes only PostgreSQL has, and why.
const POSTGRES_ONLY_INDEXES: [&str; 1] = [
    // The feed reads by `(txid, position)`; on SQLite `txid` is always 0
    // and the feed reads by position, the primary key.
    "events_feed",
];

/// Every filter the list serves.
fn filters() -> [ListFilter<'static>; 4] {
    let (owner, state) = (Some("u1"), Some("running"));
    [
        ListFilter::default(),
        ListFilter { owner, state: None },
        ListFilter { owner: None, state },
        ListFilter { owner, state },
    ]
}

/// Many debates (so that PostgreSQL's planner weighs an index against a
/// scan for real), then statistics.
const SEED_SQLITE: &str = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) \
     INSERT INTO debate_list (debate_id, owner, status, sort_key, item) \
     SELECT 'd' || i, 'u' || (i % 100), CASE i % 4 WHEN 0 THEN 'running' ELSE 'completed' END, \
     printf('%08d', i), '{}' FROM n";
const SEED_POSTGRES: &str = "INSERT INTO debate_list (debate_id, owner, status, sort_key, item) \
     SELECT 'd' || i, 'u' || (i % 100), CASE i % 4 WHEN 0 THEN 'running' ELSE 'completed' END, \
     lpad(i::text, 8, '0'), '{}' FROM generate_series(1, 20000) AS i";

async fn the_list_is_read_from_an_index(kind: Kind) {
    let store = fresh(kind).await;
    for filter in filters() {
        let sql = debate_page_sql(filter);
        let plan: Vec<String> = match store.log.db().writer() {
            PoolRef::Sqlite(pool) => {
                sqlx::query(SEED_SQLITE).execute(pool).await.ok();
                sqlx::query("ANALYZE").execute(pool).await.unwrap();
                let rows: Vec<(i64, i64, i64, String)> =
                    sqlx::query_as(&format!("EXPLAIN QUERY PLAN {sql}"))
                        .bind(filter.owner)
                        .bind(filter.state)
                        .bind(20_i64)
                        .bind(0_i64)
                        .fetch_all(pool)
                        .await
                        .unwrap();
                rows.into_iter().map(|r| r.3).collect()
            }
            PoolRef::Postgres(pool) => {
                sqlx::query(SEED_POSTGRES).execute(pool).await.ok();
                sqlx::query("ANALYZE debate_list")
                    .execute(pool)
                    .await
                    .unwrap();
                sqlx::query_scalar(&format!("EXPLAIN {sql}"))
                    .bind(filter.owner)
                    .bind(filter.state)
                    .bind(20_i64)
                    .bind(0_i64)
                    .fetch_all(pool)
                    .await
                    .unwrap()
            }
        };
        let text = plan.join("\n");
        // The list table's own lines (not its counts table's).
        let list: Vec<&String> = plan
            .iter()
            .filter(|l| l.contains("debate_list ") || l.trim_end().ends_with("debate_list"))
            .collect();
        assert!(!list.is_empty(), "{filter:?}: {text}");
        for line in list {
            let indexed = match kind {
                Kind::Sqlite => line.contains("USING INDEX debate_list_"),
                Kind::Postgres => line.contains("Index Scan") && line.contains("debate_list_"),
            };
            assert!(
                indexed,
                "{filter:?} reads the list without its index:\n{text}"
            );
        }
        assert!(
            !text.contains("TEMP B-TREE") && !text.contains("Sort"),
            "{filter:?} sorts the debates:\n{text}"
        );
    }
}

/// Half the seeded debates are about Rust.
const SEED_TOPICS: &str = "UPDATE debate_list SET topic_folded = \
     CASE WHEN sort_key LIKE '%0' OR sort_key LIKE '%2' OR sort_key LIKE '%4' \
     OR sort_key LIKE '%6' OR sort_key LIKE '%8' THEN 'is rust fun?' ELSE 'tea or coffee?' END";

/// A search that many debates match walks the filter's rows in the list's
/// order and tests each topic (no index serves a substring), stopping at
/// the page's end: never a sort of the matches. (For a rare text the
/// planner may rightly sort the few matches instead.)
async fn a_search_is_read_in_list_order(kind: Kind) {
    let store = fresh(kind).await;
    for filter in filters() {
        let sql = debate_search_sql(filter);
        let plan: Vec<String> = match store.log.db().writer() {
            PoolRef::Sqlite(pool) => {
                sqlx::query(SEED_SQLITE).execute(pool).await.ok();
                sqlx::query(SEED_TOPICS).execute(pool).await.unwrap();
                sqlx::query("ANALYZE").execute(pool).await.unwrap();
                let rows: Vec<(i64, i64, i64, String)> =
                    sqlx::query_as(&format!("EXPLAIN QUERY PLAN {sql}"))
                        .bind(filter.owner)
                        .bind(filter.state)
                        .bind(20_i64)
                        .bind(0_i64)
                        .bind("%rust%")
                        .fetch_all(pool)
                        .await
                        .unwrap();
                rows.into_iter().map(|r| r.3).collect()
            }
            PoolRef::Postgres(pool) => {
                sqlx::query(SEED_POSTGRES).execute(pool).await.ok();
                sqlx::query(SEED_TOPICS).execute(pool).await.unwrap();
                sqlx::query("ANALYZE debate_list")
                    .execute(pool)
                    .await
                    .unwrap();
                sqlx::query_scalar(&format!("EXPLAIN {sql}"))
                    .bind(filter.owner)
                    .bind(filter.state)
                    .bind(20_i64)
                    .bind(0_i64)
                    .bind("%rust%")
                    .fetch_all(pool)
                    .await
                    .unwrap()
            }
        };
        let text = plan.join("\n");
        assert!(
            !text.contains("TEMP B-TREE") && !text.contains("Sort"),
            "{filter:?} sorts the matches:\n{text}"
        );
    }
}

async fn a_changed_version_empties_the_projection(kind: Kind) {
    let store = fresh(kind).await;
    // A new database records every version and rebuilds nothing.
    assert!(reset_changed(&store.log).await.unwrap().is_empty());
    assert!(reset_changed(&store.log).await.unwrap().is_empty());
    // The `debates` projection owns the list's tables beside its documents.
    let list = REGISTRY.iter().find(|p| p.name == "debates").unwrap();
    assert!(list.tables.contains(&"debate_list"), "{list:?}");
    let checkpoint = agon::projection::checkpoint_name(list.name);
    let cursor = agon_projections::Cursor {
        txid: 0,
        position: 7,
    };
    store
        .log
        .save_checkpoint(&checkpoint, cursor)
        .await
        .unwrap();
    for sql in [
        "INSERT INTO debate_list (debate_id, status, sort_key, item) VALUES ('d', 'running', 'k', '{}')",
        "UPDATE projection_versions SET version = 0 WHERE projection = 'debates'",
    ] {
        scalar(&store.log, &format!("{sql} RETURNING CAST(0 AS BIGINT)")).await;
    }
    assert_eq!(reset_changed(&store.log).await.unwrap(), ["debates"]);
    let rows = scalar(&store.log, "SELECT COUNT(*) FROM debate_list").await;
    let version = scalar(
        &store.log,
        "SELECT version FROM projection_versions WHERE projection = 'debates'",
    )
    .await;
    assert_eq!((rows, version), (0, list.version));
    let reset = store.log.load_checkpoint(&checkpoint).await.unwrap();
    assert_eq!(reset, agon_projections::Cursor::START);
}

/// The one integer `sql` answers, on either back end.
async fn scalar(log: &agon::store::EventLog, sql: &str) -> i64 {
    match log.db().writer() {
        PoolRef::Sqlite(pool) => sqlx::query_scalar(sql).fetch_one(pool).await.unwrap(),
        PoolRef::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await.unwrap(),
    }
}

/// A column's type as the two back ends may spell it.
fn type_class(declared: &str) -> &'static str {
    match declared.to_ascii_lowercase().as_str() {
        "text" | "character varying" => "text",
        "bigint" | "integer" | "int" | "smallint" => "integer",
        "blob" | "bytea" => "bytes",
        "real" | "double precision" => "real",
        "boolean" => "boolean",
        other => panic!("no class for column type {other}"),
    }
}

type Schema = BTreeMap<String, Vec<String>>;

/// `table -> [column type nullability]` and `index -> table(columns)`.
async fn sqlite_schema() -> (Schema, BTreeMap<String, String>) {
    let store = fresh(Kind::Sqlite).await;
    let PoolRef::Sqlite(pool) = store.log.db().reader() else {
        unreachable!()
    };
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' \
         AND name NOT LIKE 'sqlite_%' AND name <> '_sqlx_migrations'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut schema = Schema::new();
    for table in tables {
        let columns: Vec<(i64, String, String, i64, Option<String>, i64)> =
            sqlx::query_as(&format!("PRAGMA table_info({table})"))
                .fetch_all(pool)
                .await
                .unwrap();
        let mut described: Vec<String> = columns
            .into_iter()
            .map(|(_, name, kind, not_null, _, pk)| {
                let null = if not_null == 1 || pk > 0 {
                    "not null"
                } else {
                    "null"
                };
                format!("{name} {} {null}", type_class(&kind))
            })
            .collect();
        described.sort();
        schema.insert(table, described);
    }
    let indexes: Vec<(String, String)> = sqlx::query_as(
        "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut described = BTreeMap::new();
    for (name, table) in indexes {
        let columns: Vec<String> = sqlx::query_scalar(&format!(
            "SELECT name FROM pragma_index_info('{name}') ORDER BY seqno"
        ))
        .fetch_all(pool)
        .await
        .unwrap();
        described.insert(name, format!("{table}({})", columns.join(", ")));
    }
    (schema, described)
}

async fn postgres_schema() -> (Schema, BTreeMap<String, String>) {
    let store = fresh(Kind::Postgres).await;
    let PoolRef::Postgres(pool) = store.log.db().reader() else {
        unreachable!()
    };
    let columns: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text, data_type::text, is_nullable::text \
         FROM information_schema.columns WHERE table_schema = 'public' \
         AND table_name <> '_sqlx_migrations'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut schema = Schema::new();
    for (table, name, kind, nullable) in columns {
        let null = if nullable == "YES" {
            "null"
        } else {
            "not null"
        };
        let column = format!("{name} {} {null}", type_class(&kind));
        schema.entry(table).or_default().push(column);
    }
    schema.values_mut().for_each(|c| c.sort());
    // Explicit indexes: not those behind primary keys and unique constraints.
    let indexes: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT i.indexname::text, i.tablename::text, i.indexdef FROM pg_indexes i \
         WHERE i.schemaname = 'public' AND i.tablename <> '_sqlx_migrations' \
         AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let described = indexes
        .into_iter()
        .map(|(name, table, def)| {
            let columns = def
                .rsplit_once('(')
                .map(|(_, cols)| cols.trim_end_matches(')').to_owned())
                .unwrap_or_default();
            (name, format!("{table}({columns})"))
        })
        .collect();
    (schema, described)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_and_postgres_schemas_agree() {
    let (mut sqlite, sqlite_indexes) = sqlite_schema().await;
    let (mut postgres, postgres_indexes) = postgres_schema().await;
    for table in POSTGRES_ONLY {
        assert!(
            postgres.remove(table).is_some(),
            "{table} is gone: update POSTGRES_ONLY"
        );
        assert!(sqlite.remove(table).is_none());
    }
    let tables = |s: &Schema| s.keys().cloned().collect::<Vec<_>>();
    assert_eq!(tables(&sqlite), tables(&postgres), "the same tables");
    for (table, columns) in &sqlite {
        assert_eq!(columns, &postgres[table], "the columns of {table}");
    }
    let postgres_indexes: BTreeMap<String, String> = postgres_indexes
        .into_iter()
        .filter(|(name, def)| {
            !POSTGRES_ONLY_INDEXES.contains(&name.as_str())
                && !POSTGRES_ONLY
                    .iter()
                    .any(|t| def.starts_with(&format!("{t}(")))
        })
        .collect();
    assert_eq!(sqlite_indexes, postgres_indexes, "the same indexes");
}

/// Read-model values PostgreSQL rewrites on every batch are compressed
/// with lz4 (migration 0008), not the much slower default pglz; this test
/// server is built with lz4, as PostgreSQL packages are.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn large_read_model_values_are_compressed_with_lz4() {
    let store = fresh(Kind::Postgres).await;
    let PoolRef::Postgres(pool) = store.log.db().reader() else {
        unreachable!()
    };
    let methods: Vec<(String, String)> = sqlx::query_as(
        "SELECT c.relname::text || '.' || a.attname::text, a.attcompression::text \
         FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
         WHERE (c.relname, a.attname) IN \
         (('documents', 'doc'), ('projection_views', 'view'), ('projection_states', 'state')) \
         ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let expected = [
        "documents.doc",
        "projection_states.state",
        "projection_views.view",
    ]
    .map(|column| (column.to_owned(), "l".to_owned()));
    assert_eq!(methods, expected);
}
