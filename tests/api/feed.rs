//! The feed never skips an event whose transaction commits late, and
//! projections rebuild to the view they reached live.

use std::time::Duration;

use agon::projection::{self, TableRunner};
use agon::store::chain::{ChainedFields, GENESIS, canonical_text};
use agon_projections::AdminStats;
use serde_json::json;
use sqlx::Connection;

use crate::support::{Kind, event, fill_stream, fresh, on_both_backends, settled_feed};
use agon::bus::Consumer;

on_both_backends! {
    a_late_commit_is_not_skipped => a_late_commit_is_not_skipped;
    projection_rebuild_matches_live_view => projection_rebuild_matches_live_view;
    projection_skips_redelivered_events => projection_skips_redelivered_events;
    two_replicas_share_one_view_exactly => two_replicas_share_one_view_exactly;
}

const INSERT: &str = "INSERT INTO events (event_id, aggregate_type, aggregate_id, sequence, event_type, \
     event_version, payload, metadata, prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";

/// Binds a valid first event of stream `tally/late` to [`INSERT`].
macro_rules! bind_late_event {
    ($query:expr) => {{
        let payload = canonical_text(&json!({"Added": {"n": 1}})).unwrap();
        let metadata = canonical_text(&json!({"actor": "test", "event_id": "late-1"})).unwrap();
        let fields = ChainedFields {
            aggregate_type: "tally",
            aggregate_id: "late",
            sequence: 1,
            event_type: "Added",
            event_version: "1",
            payload: &payload,
            metadata: &metadata,
        };
        let hash = fields.hash(&GENESIS).unwrap();
        $query
            .bind("late-1")
            .bind("tally")
            .bind("late")
            .bind(1_i64)
            .bind("Added")
            .bind("1")
            .bind(payload.clone())
            .bind(metadata.clone())
            .bind(GENESIS.to_vec())
            .bind(hash.to_vec())
    }};
}

async fn a_late_commit_is_not_skipped(kind: Kind) {
    let store = fresh(kind).await;
    fill_stream(&store.log, "tally", "before", 3).await;
    let seen = settled_feed(&store.log, 3).await;
    let checkpoint = seen.last().unwrap().cursor();

    // Transaction A takes its position first and commits last.
    let (commit_a, a_inserted) = (
        tokio::sync::oneshot::channel::<()>(),
        tokio::sync::oneshot::channel::<()>(),
    );
    let (release, wait_release) = commit_a;
    let (inserted, wait_inserted) = a_inserted;
    let holder = match kind {
        Kind::Postgres => {
            let url = store.database_url.clone().unwrap();
            tokio::spawn(async move {
                let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
                let mut tx = conn.begin().await.unwrap();
                bind_late_event!(sqlx::query(INSERT))
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                inserted.send(()).unwrap();
                wait_release.await.unwrap();
                tx.commit().await.unwrap();
            })
        }
        Kind::Sqlite => {
            let path = store.dir.path().join("agon.db");
            tokio::spawn(async move {
                let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
                let mut conn = sqlx::SqliteConnection::connect_with(&options)
                    .await
                    .unwrap();
                sqlx::query("BEGIN IMMEDIATE")
                    .execute(&mut conn)
                    .await
                    .unwrap();
                bind_late_event!(sqlx::query(INSERT))
                    .execute(&mut conn)
                    .await
                    .unwrap();
                inserted.send(()).unwrap();
                wait_release.await.unwrap();
                sqlx::query("COMMIT").execute(&mut conn).await.unwrap();
            })
        }
    };
    wait_inserted.await.unwrap();
    // Transaction B starts after A and commits first (on SQLite it must wait for A).
    let writer_b = tokio::spawn({
        let log = store.log.clone();
        async move { log.append(&[event("tally", "after", 1)]).await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let while_a_open = store.log.read_feed(checkpoint, 100).await.unwrap();
    assert!(
        while_a_open.is_empty(),
        "nothing may pass A while it is in flight: {while_a_open:?}"
    );

    release.send(()).unwrap();
    holder.await.unwrap();
    writer_b.await.unwrap();
    let after = settled_feed(&store.log, 5).await.split_off(3);
    let ids: Vec<(&str, i64)> = after
        .iter()
        .map(|e| (e.aggregate_id.as_str(), e.sequence))
        .collect();
    assert_eq!(ids, vec![("late", 1), ("after", 1)]);
    // The trap was real: B holds the higher position, yet committed first on PostgreSQL.
    assert!(after[0].position < after[1].position);
    assert!(store.log.verify("unused").await.unwrap().intact());
}

async fn projection_rebuild_matches_live_view(kind: Kind) {
    let store = fresh(kind).await;
    fill_stream(&store.log, "tally", "x", 5).await;
    fill_stream(&store.log, "budget", "y", 2).await;
    const EXPECTED: usize = 7;
    let runner = TableRunner::<AdminStats>::new(store.log.clone());
    let records: Vec<_> = settled_feed(&store.log, EXPECTED)
        .await
        .into_iter()
        .map(|e| e.into_record().unwrap())
        .collect();
    runner.handle(&records).await.unwrap();
    let live = runner.view().await.unwrap();
    assert_eq!(live.total_events, 7);
    assert_eq!(live.events_by_aggregate_type.get("budget"), Some(&2));

    let replayed = projection::rebuild(&store.log, "admin_stats")
        .await
        .unwrap();
    assert_eq!(replayed, Some(7));
    assert_eq!(runner.view().await.unwrap(), live);
    assert_eq!(
        runner.checkpoint().await.unwrap(),
        records.last().unwrap().cursor
    );
    assert_eq!(projection::rebuild(&store.log, "nope").await.unwrap(), None);
}

async fn projection_skips_redelivered_events(kind: Kind) {
    let store = fresh(kind).await;
    fill_stream(&store.log, "tally", "r", 4).await;
    const EXPECTED: usize = 4;
    let records: Vec<_> = settled_feed(&store.log, EXPECTED)
        .await
        .into_iter()
        .map(|e| e.into_record().unwrap())
        .collect();
    let runner = TableRunner::<AdminStats>::new(store.log.clone());
    runner.handle(&records[..3]).await.unwrap();
    // At-least-once delivery: the whole run again, overlapping what was applied.
    runner.handle(&records).await.unwrap();
    runner.handle(&records[1..2]).await.unwrap();
    assert_eq!(runner.view().await.unwrap().total_events, 4);
}

async fn two_replicas_share_one_view_exactly(kind: Kind) {
    use agon::bus::{Bus, LocalBus};
    use agon::store::{Db, EventLog};
    use std::sync::Arc;
    use tokio_util::sync::CancellationToken;

    let store = fresh(kind).await;
    // A second replica: its own pools, cache and bus on the same database.
    let other_db = match &store.database_url {
        Some(url) => Db::connect_postgres(url, 8).await.unwrap(),
        None => Db::open_sqlite(store.dir.path()).await.unwrap(),
    };
    let replicas = [store.log.clone(), EventLog::new(other_db)];
    let stop = CancellationToken::new();
    for log in &replicas {
        let bus = Bus::Local(LocalBus::new(log.backend()));
        let runner: Arc<dyn Consumer> = Arc::new(TableRunner::<AdminStats>::new(log.clone()));
        bus.spawn_relay(log, &stop);
        bus.spawn_consumer(log, runner, &stop);
    }
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let log = replicas[w % 2].clone();
            tokio::spawn(async move { fill_stream(&log, "tally", &format!("r{w}"), 100).await })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let runner = TableRunner::<AdminStats>::new(store.log.clone());
    let mut total = 0;
    for _ in 0..500 {
        total = runner.view().await.unwrap().total_events;
        if total >= 800 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Let both replicas finish whatever they hold, then check nothing was doubled.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        runner.view().await.unwrap().total_events,
        800,
        "after {total}"
    );
    stop.cancel();
}
