//! Backup and restore-test time for a large log (issue 25, item 10).
//!
//! `cargo bench --bench backup` fills a fresh SQLite store with
//! `AGON_BENCH_EVENTS` events (default 1 000 000: streams of 500, sealed),
//! then times a backup, its verification, the comprehensive verification
//! (read models compared with the live ones), a restore test (restore, verify,
//! replay of every projection) and a disaster-recovery drill, printing the
//! drill's measured RPO and RTO. With `AGON_BENCH_DATABASE_URL` (an empty
//! PostgreSQL database; `ops/bench/run.sh backup` starts one) it measures
//! PostgreSQL too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::Instant;

use agon::app::App;
use agon::config::Settings;
use cqrs_es::persist::SerializedEvent;
use serde_json::json;

const STREAM: usize = 500;

fn events(stream: &str) -> Vec<SerializedEvent> {
    (1..=STREAM)
        .map(|sequence| SerializedEvent {
            aggregate_id: stream.to_owned(),
            sequence,
            aggregate_type: "bench".to_owned(),
            event_type: "Measured".to_owned(),
            event_version: "1".to_owned(),
            payload: json!({"Measured": {"n": sequence, "text": "x".repeat(200)}}),
            metadata: json!({"actor": "bench"}),
        })
        .collect()
}

async fn measure(label: &str, database_url: Option<String>, total: usize) {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_str().unwrap().to_owned();
    let settings = Settings::from_lookup(|name| match name {
        "SERVICE_DATA_DIR" => Some(data_dir.clone()),
        "DATABASE_URL" => database_url.clone(),
        // The read models follow 1 M events before a backup is listed.
        "SERVICE_BACKUP_CATCHUP_TIMEOUT_MS" => Some("600000".to_owned()),
        _ => None,
    })
    .unwrap();
    let app = App::build(settings).await.unwrap();
    // The read models run, as in the service: the backups and drills are
    // read back through them.
    let stop = tokio_util::sync::CancellationToken::new();
    let _tasks = app.start_background(&stop).await.unwrap();
    let filled = Instant::now();
    for n in 0..total.div_ceil(STREAM) {
        app.log.append(&events(&format!("s{n}"))).await.unwrap();
    }
    while app.log.seal_now(&app.seal_key).await.unwrap().is_some() {}
    println!(
        "{label}: {total} events written and sealed in {:?}",
        filled.elapsed()
    );

    let backups = &app.backups;
    let started = Instant::now();
    let backup = backups.create("full", None, "bench").await.unwrap();
    println!(
        "{label}: backup of {} events, {} seals, {} MB in {:?}",
        backup.backup.events,
        backup.backup.seals,
        backup.backup.size_bytes / 1_000_000,
        started.elapsed()
    );
    let id = backup.backup.backup_id;
    let started = Instant::now();
    let verified = backups.verify(&id).await.unwrap();
    println!(
        "{label}: verify (valid {}) in {:?}",
        verified.valid,
        started.elapsed()
    );
    let started = Instant::now();
    let compared = backups.verify_comprehensive(&id).await.unwrap();
    println!(
        "{label}: verify-comprehensive (valid {}): {} events replayed, read models identical: {} ({} projections) in {:?}",
        compared.valid,
        compared.replayed_events,
        compared.identical,
        compared.projections.len(),
        started.elapsed()
    );
    let test = backups.restore_test(&id).await.unwrap();
    println!(
        "{label}: restore-test (success {}): restore {} ms, verify {} ms, replay {} ms, total {} ms",
        test.success, test.restore_ms, test.verify_ms, test.replay_ms, test.total_ms
    );
    app.log.append(&events("after")).await.unwrap();
    let drill = backups.drill("bench").await.unwrap();
    println!(
        "{label}: drill (success {}): RPO {:?} events / {:?} s, RTO {:?} ms, objectives met: RPO {} RTO {}",
        drill.success,
        drill.measured.rpo_events,
        drill.measured.rpo_seconds,
        drill.measured.rto_ms,
        drill.rpo_met,
        drill.rto_met
    );
    app.log.db().close().await;
}

fn main() {
    let total: usize = std::env::var("AGON_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        Box::pin(measure("sqlite", None, total)).await;
        if let Ok(url) = std::env::var("AGON_BENCH_DATABASE_URL") {
            Box::pin(measure("postgres", Some(url), total)).await;
        }
    });
}
