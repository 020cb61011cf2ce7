//! Audit verification throughput against raw SHA-256 over the same bytes:
//! `EventLog::verify` (what `POST /api/audit/verify` and `agon verify` run:
//! every chain link and every seal's Merkle root, read from the store) versus
//! hashing, in memory, each event's `prev_hash ‖ canonical bytes` and the
//! seals' RFC 6962 trees. The goal is a ratio of at least 0.5.
//!
//! `cargo bench --bench audit_verify` measures SQLite; with
//! `AGON_BENCH_DATABASE_URL` (`ops/bench/run.sh audit_verify` starts a
//! server) PostgreSQL too. Each figure is the best of a few rounds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::Instant;

use agon::crypto::signing::SealKey;
use agon::store::chain::{ChainedFields, Hash};
use agon::store::{Db, EventLog, merkle};
use cqrs_es::persist::SerializedEvent;
use serde_json::json;
use sha2::{Digest, Sha256};

/// Rounds when `AGON_BENCH_ROUNDS` does not say (more make a profile of the
/// verification itself).
const ROUNDS: usize = 3;
const STREAMS: usize = 200;
const PER_STREAM: usize = 100;

fn event(stream: &str, sequence: usize) -> SerializedEvent {
    SerializedEvent {
        aggregate_id: stream.to_owned(),
        sequence,
        aggregate_type: "bench".to_owned(),
        event_type: "Measured".to_owned(),
        event_version: "1".to_owned(),
        payload: json!({"Measured": {"n": sequence, "text": "x".repeat(400)}}),
        metadata: json!({"actor": "bench", "request_id": "bench-request"}),
    }
}

/// Fills the log and seals it; returns what the baseline hashes: every
/// event's `prev_hash ‖ canonical bytes`, and its hash (the Merkle leaves).
async fn fill(log: &EventLog, key: &SealKey) -> (Vec<Vec<u8>>, Vec<Hash>) {
    for s in 0..STREAMS {
        let stream = format!("s{s}-{}", uuid::Uuid::new_v4().simple());
        let events: Vec<_> = (1..=PER_STREAM).map(|n| event(&stream, n)).collect();
        log.append(&events).await.unwrap();
    }
    while log.seal_now(key).await.unwrap().is_some() {}
    let links = log.chain_links(i64::MAX).await.unwrap();
    let mut by_position = std::collections::HashMap::new();
    for first in links.iter().filter(|l| l.sequence == 1) {
        for row in log
            .load_stream(&first.aggregate_type, &first.aggregate_id, 0)
            .await
            .unwrap()
        {
            let fields = ChainedFields {
                aggregate_type: &row.aggregate_type,
                aggregate_id: &row.aggregate_id,
                sequence: row.sequence,
                event_type: &row.event_type,
                event_version: &row.event_version,
                payload: &row.payload,
                metadata: &row.metadata,
            };
            let mut bytes = row.prev_hash.clone();
            bytes.extend(fields.canonical_bytes().unwrap());
            by_position.insert(row.position, (bytes, row.stored_hash().unwrap()));
        }
    }
    // Feed order, the order the seals' trees take their leaves in.
    links
        .iter()
        .map(|link| by_position.remove(&link.position).unwrap())
        .unzip()
}

async fn bench_backend(name: &str, log: EventLog) {
    let dir = tempfile::tempdir().unwrap();
    let key = SealKey::load_or_create(None, dir.path()).unwrap();
    let (messages, leaves) = fill(&log, &key).await;
    let bytes: usize = messages.iter().map(Vec::len).sum();
    let (mut verify_rates, mut raw_rates) = (Vec::new(), Vec::new());
    let rounds = std::env::var("AGON_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(ROUNDS);
    for _ in 0..rounds {
        let started = Instant::now();
        let report = log.verify(&key.public_hex()).await.unwrap();
        let seconds = started.elapsed().as_secs_f64();
        assert!(report.intact(), "{report:?}");
        verify_rates.push(report.events_checked as f64 / seconds);

        let started = Instant::now();
        let mut sink = 0u8;
        for message in &messages {
            sink ^= Sha256::digest(message)[0];
        }
        sink ^= merkle::root(&leaves)[0];
        let seconds = started.elapsed().as_secs_f64();
        std::hint::black_box(sink);
        raw_rates.push(messages.len() as f64 / seconds);
    }
    let (best_verify, best_raw) = (best(&verify_rates), best(&raw_rates));
    // Each round's ratio against the raw hashing of the same round.
    let mut ratios: Vec<f64> = verify_rates
        .iter()
        .zip(&raw_rates)
        .map(|(verify, raw)| verify / raw)
        .collect();
    ratios.sort_by(f64::total_cmp);
    let per_event = bytes as f64 / messages.len() as f64;
    println!(
        "{name:<10} {} events of {per_event:.0} bytes  raw SHA-256 {best_raw:>10.0}/s ({:.0} MB/s)  \
         audit verify {best_verify:>9.0}/s ({:.0} MB/s)  ratio {:.2} (goal >= 0.50; \
         median of {} rounds' own ratios {:.2})",
        messages.len(),
        best_raw * per_event / 1e6,
        best_verify * per_event / 1e6,
        best_verify / best_raw,
        ratios.len(),
        ratios[ratios.len() / 2],
    );
}

fn best(rates: &[f64]) -> f64 {
    rates.iter().copied().fold(0.0, f64::max)
}

#[tokio::main]
async fn main() {
    // `cargo test --benches` runs bench targets without `--bench`; only measure when asked.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sqlite = EventLog::new(Db::open_sqlite(dir.path()).await.unwrap());
    bench_backend("sqlite", sqlite).await;
    match std::env::var("AGON_BENCH_DATABASE_URL") {
        Ok(url) => {
            // A database of its own: other benchmarks of the same run leave
            // events sealed with their own keys in the server's default one.
            let url = own_database(&url).await;
            let pg = EventLog::new(Db::connect_postgres(&url, 16).await.unwrap());
            bench_backend("postgres", pg).await;
        }
        Err(_) => {
            println!("postgres   skipped: set AGON_BENCH_DATABASE_URL (ops/bench/run.sh does)")
        }
    }
}

/// A new, empty database on the server of `admin_url`; its URL.
async fn own_database(admin_url: &str) -> String {
    use sqlx::Connection;
    let name = format!("agon_bench_verify_{}", uuid::Uuid::new_v4().simple());
    let mut admin = sqlx::PgConnection::connect(admin_url).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .await
        .unwrap();
    admin.close().await.unwrap();
    format!("{}/{name}", admin_url.rsplit_once('/').unwrap().0)
}
