//! Append throughput of the event store against a raw-INSERT baseline,
//! measured in the same run on the same pool.
//!
//! `cargo bench --bench append` measures SQLite; with `AGON_BENCH_DATABASE_URL`
//! (a PostgreSQL server with default durability settings; `ops/bench/run.sh`
//! starts one) it measures PostgreSQL too. Each figure is the best of a few
//! alternating rounds, reported with its ratio to the baseline.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::Instant;

use agon::store::db::PoolRef;
use agon::store::{Db, EventLog};
use cqrs_es::persist::SerializedEvent;
use serde_json::json;

const ROUNDS: usize = 3;

/// Runs `$body` on whichever pool `$db` holds (the library's macro is private).
macro_rules! with_pool {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db {
            PoolRef::Sqlite($pool) => $body,
            PoolRef::Postgres($pool) => $body,
        }
    };
}

fn event(stream: &str, sequence: usize) -> SerializedEvent {
    SerializedEvent {
        aggregate_id: stream.to_owned(),
        sequence,
        aggregate_type: "bench".to_owned(),
        event_type: "Measured".to_owned(),
        event_version: "1".to_owned(),
        payload: json!({"Measured": {"n": sequence, "text": "x".repeat(400)}}),
        metadata: json!({"actor": "bench"}),
    }
}

/// One raw row of the same size as an event, without chain, framework or hashing.
async fn raw_insert(pool: PoolRef<'_>, stream: &str, sequence: usize, payload: &str) {
    with_pool!(pool, pool => {
        sqlx::query(
            "INSERT INTO bench_raw (event_id, aggregate_type, aggregate_id, sequence, event_type, \
             event_version, payload, metadata, prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(format!("{stream}-{sequence}-{}", uuid::Uuid::new_v4()))
        .bind("bench")
        .bind(stream)
        .bind(i64::try_from(sequence).unwrap())
        .bind("Measured")
        .bind("1")
        .bind(payload)
        .bind(r#"{"actor":"bench","event_id":"00000000-0000-0000-0000-000000000000","recorded_at":"2026-11-21T00:00:00.000000Z"}"#)
        .bind(vec![0u8; 32])
        .bind(vec![1u8; 32])
        .execute(pool)
        .await
        .unwrap();
    });
}

async fn create_raw_table(db: &Db) {
    let (drop, create) = match db {
        Db::Sqlite { .. } => (
            "DROP TABLE IF EXISTS bench_raw",
            "CREATE TABLE bench_raw (position INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT, aggregate_type TEXT, aggregate_id TEXT, sequence BIGINT, event_type TEXT, event_version TEXT, payload TEXT, metadata TEXT, prev_hash BLOB, hash BLOB)",
        ),
        Db::Postgres(_) => (
            "DROP TABLE IF EXISTS bench_raw",
            "CREATE TABLE bench_raw (position BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, event_id TEXT, aggregate_type TEXT, aggregate_id TEXT, sequence BIGINT, event_type TEXT, event_version TEXT, payload TEXT, metadata TEXT, prev_hash BYTEA, hash BYTEA)",
        ),
    };
    for sql in [drop, create] {
        with_pool!(db.writer(), pool => { sqlx::query(sql).execute(pool).await.unwrap(); });
    }
}

/// Events (or rows) per second with `writers` tasks doing `per_writer` each.
async fn measure(
    log: &EventLog,
    raw: bool,
    writers: usize,
    per_writer: usize,
    round: usize,
) -> f64 {
    let payload = agon::store::canonical::to_string(&event("p", 1).payload);
    let start = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|w| {
            let (log, payload) = (log.clone(), payload.clone());
            tokio::spawn(async move {
                let stream = format!("r{round}-w{w}-{}", if raw { "raw" } else { "log" });
                for sequence in 1..=per_writer {
                    if raw {
                        raw_insert(log.db().writer(), &stream, sequence, &payload).await;
                    } else {
                        log.append(&[event(&stream, sequence)]).await.unwrap();
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    (writers * per_writer) as f64 / start.elapsed().as_secs_f64()
}

async fn bench_backend(name: &str, log: EventLog, per_writer: usize) {
    create_raw_table(log.db()).await;
    for writers in [1, 8] {
        let (mut best_raw, mut best_log) = (0f64, 0f64);
        for round in 0..ROUNDS {
            let tag = round * 10 + writers;
            best_raw = best_raw.max(measure(&log, true, writers, per_writer, tag).await);
            best_log = best_log.max(measure(&log, false, writers, per_writer, tag).await);
        }
        println!(
            "{name:<10} writers={writers}  raw INSERT {best_raw:>9.0}/s  agon append {best_log:>9.0}/s  ratio {:.2}",
            best_log / best_raw
        );
    }
}

#[tokio::main]
async fn main() {
    // `cargo test --benches` runs bench targets with `--bench`-less args; only measure when asked.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sqlite = EventLog::new(Db::open_sqlite(dir.path()).await.unwrap());
    bench_backend("sqlite", sqlite, 300).await;
    match std::env::var("AGON_BENCH_DATABASE_URL") {
        Ok(url) => {
            let pg = EventLog::new(Db::connect_postgres(&url, 16).await.unwrap());
            bench_backend("postgres", pg, 1_000).await;
        }
        Err(_) => {
            println!("postgres   skipped: set AGON_BENCH_DATABASE_URL (ops/bench/run.sh does)")
        }
    }
}
