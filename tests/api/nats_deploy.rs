//! Deployments on a shared NATS server: each sees only its own events, and
//! restarts bind the same consumers again, at their checkpoints.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use agon::store::{Db, EventLog};
use agon_projections::{Accounts, Cursor};
use reqwest::Method;
use serde_json::{Value, json};

use crate::nats::consumer_names;
use crate::serve::spawn_with;
use crate::support::accounts::{admin_get, call, register};
use crate::support::binary::{Serve, Served};
use crate::support::{
    Kind, LoopbackServer, TEST_TOKEN, free_port, fresh_postgres_database, on_both_backends,
    write_concurrently,
};

/// Every consumer a service runs: the read models (one group), the
/// WebSocket push, the webhook delivery consumer, the debate runner, the
/// public stream's publisher and the review settler.
const CONSUMERS: usize = 6;

/// Polls `path` until `done` holds for its body (30 s at most).
async fn until(base: &str, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let body = admin_get(base, path).await;
        if done(&body) || Instant::now() > deadline {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn events_in(log: &EventLog) -> usize {
    log.read_feed(Cursor::START, 100_000).await.unwrap().len()
}

async fn deployment_id(log: &EventLog) -> String {
    let agon::store::Db::Postgres(pool) = log.db() else {
        panic!("PostgreSQL only")
    };
    sqlx::query_scalar("SELECT value FROM deployment WHERE name = 'id'")
        .fetch_one(pool)
        .await
        .unwrap()
}

on_both_backends! {
    two_deployments_on_one_nats_server_each_see_only_their_own => two_deployments_on_one_nats_server_each_see_only_their_own;
}

/// The deployment id the app runs under.
fn running_deployment(app: &agon::app::App) -> String {
    let agon::bus::Bus::Nats(bus) = &app.bus else {
        panic!("not on NATS")
    };
    bus.identity().deployment().to_owned()
}

async fn two_deployments_on_one_nats_server_each_see_only_their_own(kind: Kind) {
    let server = LoopbackServer::nats().await;
    let url = server.url();
    let mut vars = crate::auth::ROOMY.to_vec();
    vars.push(("SERVICE_RATE_LIMIT_DEBATE_CREATE", "1000000"));
    vars.push(("SERVICE_NATS_URL", &url));
    let a = spawn_with(kind, &vars).await;
    // One generated and kept in its database, one given.
    vars.push(("SERVICE_DEPLOYMENT_ID", "blue"));
    let b = spawn_with(kind, &vars).await;

    let demo = |topic: &str| json!({"topic": topic, "agents": ["demo-a", "demo-b", "demo-c"], "rounds": 1});
    for (base, topics) in [(&a.base, &["a1", "a2"][..]), (&b.base, &["b1"][..])] {
        for topic in topics {
            let url = format!("{base}/api/debates");
            let (status, body) =
                call(Method::POST, &url, Some(TEST_TOKEN), Some(demo(topic))).await;
            assert_eq!(status, 201, "{body}");
        }
    }
    let b_user = register(&b.base, "only-b@example.com", "correct horse battery").await;

    // Each deployment's own work shows up; then everything is settled.
    for (spawned, own) in [(&a, 2), (&b, 1)] {
        until(&spawned.base, "/api/debates", |l| l["total"] == own).await;
        let events = events_in(&spawned.app.log).await;
        until(&spawned.base, "/api/admin/stats", |s| {
            s["total_events"] == events
        })
        .await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;

    for (spawned, own) in [(&a, ["a1", "a2"].as_slice()), (&b, ["b1"].as_slice())] {
        let listed = admin_get(&spawned.base, "/api/debates").await;
        let mut topics: Vec<&str> = listed["debates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["topic"].as_str().unwrap())
            .collect();
        topics.sort_unstable();
        assert_eq!(topics, own, "{listed}");
        let stats = admin_get(&spawned.base, "/api/admin/stats").await;
        assert_eq!(
            stats["total_events"],
            events_in(&spawned.app.log).await,
            "only its own events are counted: {stats}"
        );
    }
    let documents = agon::projection::Documents::new(a.app.log.clone());
    assert!(
        documents.get::<Accounts>(&b_user).await.unwrap().is_none(),
        "an account of the other deployment"
    );
    assert!(
        agon::projection::Documents::new(b.app.log.clone())
            .get::<Accounts>(&b_user)
            .await
            .unwrap()
            .is_some()
    );

    // Each on a stream of its own, named after its id.
    let (a_id, b_id) = (running_deployment(&a.app), running_deployment(&b.app));
    assert_ne!(a_id, b_id);
    assert_eq!(b_id, "blue");
    for id in [&a_id, &b_id] {
        let names = consumer_names(&url, &format!("AGON_{id}_EVENTS")).await;
        assert_eq!(names.len(), CONSUMERS, "{names:?}");
        assert!(names.iter().all(|n| n.starts_with(&format!("{id}_"))));
    }
    a.stop.cancel();
    b.stop.cancel();
}

/// `agon serve` with the test's database, NATS and data directory.
async fn start_binary(database_url: &str, nats_url: &str, data_dir: &std::path::Path) -> Served {
    Serve::on_free_ports()
        .loopback()
        .env("DATABASE_URL", database_url)
        .env("SERVICE_NATS_URL", nats_url)
        .data_dir(data_dir)
        .env("SERVICE_API_TOKEN", TEST_TOKEN)
        .env("SERVICE_LOG_LEVEL", "WARNING")
        .env("SERVICE_IP_RATE_LIMIT", "1000000")
        .env("SERVICE_RATE_LIMIT_DEFAULT", "1000000")
        .stderr(std::process::Stdio::null())
        .start()
        .await
}

/// Each durable's creation time and delivery count.
async fn durables(url: &str, stream: &str) -> BTreeMap<String, (String, u64)> {
    let client = async_nats::connect(url).await.unwrap();
    let stream = async_nats::jetstream::new(client)
        .get_stream(stream)
        .await
        .unwrap();
    let mut found = BTreeMap::new();
    for name in consumer_names(url, stream.cached_info().config.name.as_str()).await {
        let info = stream.consumer_info(&name).await.unwrap();
        found.insert(
            name,
            (
                format!("{:?}", info.created),
                info.delivered.consumer_sequence,
            ),
        );
    }
    found
}

/// Waits until every durable has handed out and seen acked all it holds.
async fn wait_until_drained(url: &str, stream: &str) {
    let client = async_nats::connect(url).await.unwrap();
    let stream = async_nats::jetstream::new(client)
        .get_stream(stream)
        .await
        .unwrap();
    for _ in 0..600 {
        let mut drained = true;
        for name in consumer_names(url, stream.cached_info().config.name.as_str()).await {
            let info = stream.consumer_info(&name).await.unwrap();
            drained &= info.num_pending == 0 && info.num_ack_pending == 0;
        }
        if drained {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the consumers never caught up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_restarts_keep_the_consumers_and_start_them_at_their_checkpoints() {
    const SEEDED: usize = 2_000;
    let server = LoopbackServer::nats().await;
    let nats_url = server.url();
    let database_url = fresh_postgres_database().await;
    let data_dir = tempfile::tempdir().unwrap();
    let log = EventLog::new(Db::connect_postgres(&database_url, 4).await.unwrap());
    write_concurrently(&log, "seed", 4, SEEDED / 4).await;

    let mut stream = String::new();
    let mut names_before: Vec<String> = Vec::new();
    let mut before: BTreeMap<String, (String, u64)> = BTreeMap::new();
    for start in 0..5 {
        let served = start_binary(&database_url, &nats_url, data_dir.path()).await;
        let base = served.base.clone();
        let began = Instant::now();
        admin_get(&base, "/api/admin/stats").await;
        let first = began.elapsed();
        let mut later = Duration::ZERO;
        for _ in 0..5 {
            let began = Instant::now();
            admin_get(&base, "/api/admin/stats").await;
            later = later.max(began.elapsed());
        }

        // New work each time; then every consumer drained, and one more
        // event over a second later so that even projections that ignore
        // these events save their checkpoints (they do so once a second).
        write_concurrently(&log, &format!("start{start}-"), 1, 5).await;
        let events = events_in(&log).await;
        until(&base, "/api/admin/stats", |s| s["total_events"] == events).await;
        if start == 0 {
            stream = format!("AGON_{}_EVENTS", deployment_id(&log).await);
        }
        wait_until_drained(&nats_url, &stream).await;
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        write_concurrently(&log, &format!("late{start}-"), 1, 1).await;
        let events = events_in(&log).await;
        until(&base, "/api/admin/stats", |s| s["total_events"] == events).await;
        wait_until_drained(&nats_url, &stream).await;

        let now = durables(&nats_url, &stream).await;
        let names: Vec<String> = now.keys().cloned().collect();
        assert_eq!(names.len(), CONSUMERS, "start {start}: {names:?}");
        if start > 0 {
            assert_eq!(names, names_before, "start {start}: the same durables");
            for (name, (created, delivered)) in &now {
                // Delivered during this run: since creation, or since the
                // last run when the durable was kept.
                let this_run = match before.get(name) {
                    Some((was_created, was_delivered)) if was_created == created => {
                        delivered - was_delivered
                    }
                    _ => *delivered,
                };
                assert!(
                    this_run <= 20,
                    "start {start}: {name} was handed {this_run} messages, not only the new ones"
                );
            }
            assert!(
                first <= later * 10 + Duration::from_secs(1),
                "start {start}: the first request took {first:?}, later ones at most {later:?}"
            );
        }
        names_before = names;
        before = now;
        let output = served.stop(Duration::from_secs(30)).await;
        assert!(output.status.success(), "{output:?}");
    }
    assert_eq!(
        consumer_names(&nats_url, &stream).await.len(),
        CONSUMERS,
        "no consumers piled up"
    );
}

#[tokio::test]
async fn a_bad_deployment_id_stops_the_start_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_agon"))
        .args(["serve", "--host", "127.0.0.1"])
        .args(["--api-port", &free_port().to_string()])
        .args(["--ws-port", &free_port().to_string()])
        .env_clear()
        .env("SERVICE_DATA_DIR", dir.path())
        .env("SERVICE_DEPLOYMENT_ID", "blue.green")
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("SERVICE_DEPLOYMENT_ID"), "{stderr}");
}
