//! Outages of the servers the service depends on, with the real servers
//! stopped and started: while NATS is away creates answer at once and
//! their debates read back straight away; while PostgreSQL is away requests
//! answer 503 with `Retry-After` within about a second, and provider answers
//! received meanwhile are recorded once it is back, not asked for again.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::serve::spawn_with;
use crate::support::accounts::{admin_get, call};
use crate::support::binary::Serve;
use crate::support::provider::{Behavior, FakeProvider, quiet_limits, wait_finished};
use crate::support::{Kind, LoopbackServer, TEST_TOKEN, client, free_port, on_both_backends};

on_both_backends! {
    creates_read_back_at_once_while_nats_is_down => creates_read_back_at_once_while_nats_is_down;
}

/// A create and its read-back while NATS is down: the projections follow
/// the store, so this is milliseconds; before, the create waited 5 s for a
/// read model that never moved.
const NATS_DOWN_CREATE_BOUND: Duration = Duration::from_secs(2);
/// A request while PostgreSQL is down: the pool gives up acquiring after
/// `SERVICE_DATABASE_ACQUIRE_TIMEOUT_MS` (1 s by default), so about a
/// second; the bound leaves room for a loaded machine.
const PG_DOWN_ANSWER_BOUND: Duration = Duration::from_secs(3);

fn demo(topic: &str) -> Value {
    json!({"topic": topic, "agents": ["demo-a", "demo-b", "demo-c"], "rounds": 1})
}

/// Creates a debate and reads it back at once; both within the bound.
async fn create_and_read(base: &str, topic: &str) -> String {
    let started = Instant::now();
    let (status, body) = call(
        Method::POST,
        &format!("{base}/api/debates"),
        Some(TEST_TOKEN),
        Some(demo(topic)),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().unwrap().to_owned();
    let url = format!("{base}/api/debates/{id}");
    let (status, detail) = call(Method::GET, &url, Some(TEST_TOKEN), None).await;
    assert_eq!(status, 200, "read right after the create: {detail}");
    assert!(
        started.elapsed() < NATS_DOWN_CREATE_BOUND,
        "create took {took:?}, with the read {:?}",
        started.elapsed()
    );
    id
}

/// `count` concurrent creates, each read back at once.
async fn create_many(base: &str, prefix: &str, count: usize) -> Vec<String> {
    let tasks: Vec<_> = (0..count)
        .map(|n| {
            let (base, topic) = (base.to_owned(), format!("{prefix} {n}"));
            tokio::spawn(async move { create_and_read(&base, &topic).await })
        })
        .collect();
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.unwrap());
    }
    ids
}

async fn creates_read_back_at_once_while_nats_is_down(kind: Kind) {
    let mut server = LoopbackServer::nats().await;
    let url = server.url();
    let mut vars = crate::auth::ROOMY.to_vec();
    vars.push(("SERVICE_RATE_LIMIT_DEBATE_CREATE", "1000000"));
    vars.push(("SERVICE_NATS_URL", &url));
    let app = spawn_with(kind, &vars).await;
    let base = app.base.clone();

    let mut ids = create_many(&base, "before", 3).await;
    readiness_becomes(&base, 200).await;
    server.stop();
    // Not ready while the bus is away (its reads may lag), yet alive.
    let not_ready = readiness_becomes(&base, 503).await;
    assert_eq!(not_ready["bus"], false, "{not_ready}");
    let live = crate::support::client()
        .get(format!("{base}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), 200);
    for round in 0..3 {
        ids.extend(create_many(&base, &format!("down {round}"), 4).await);
    }
    server.restart().await;
    readiness_becomes(&base, 200).await;
    ids.extend(create_many(&base, "after", 4).await);

    // Every debate runs to its end, each listed once; the statistics count
    // every event of the log exactly once.
    for id in &ids {
        let path = format!("/api/debates/{id}");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let detail = admin_get(&base, &path).await;
            if detail["status"] == "completed" {
                break;
            }
            assert!(Instant::now() < deadline, "never completed: {detail}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let listed = admin_get(&base, "/api/debates?limit=100").await;
    assert_eq!(listed["total"], ids.len(), "{listed}");
    let mut seen: Vec<&str> = listed["debates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), ids.len());
    let events = app
        .app
        .log
        .read_feed(agon_projections::Cursor::START, 100_000)
        .await
        .unwrap()
        .len();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stats = admin_get(&base, "/api/admin/stats").await;
        if stats["total_events"] == events {
            break;
        }
        assert!(Instant::now() < deadline, "{stats} vs {events} events");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Still working after the restart, over NATS again.
    create_and_read(&base, "last").await;
    app.stop.cancel();
}

/// A throwaway PostgreSQL cluster of the test's own, on a free loopback
/// port, stopped (immediately) on drop.
struct PgCluster {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    _dir: tempfile::TempDir,
}

/// The directory of `initdb` and `pg_ctl`; fails loudly when PostgreSQL is
/// not installed (CI installs it).
/// `/readyz` once it answers `status`, within 30 s; its body.
async fn readiness_becomes(base: &str, status: u16) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response = crate::support::client()
            .get(format!("{base}/readyz"))
            .send()
            .await
            .unwrap();
        let got = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        if got == status {
            assert_eq!(
                body["status"],
                if status == 200 { "ready" } else { "not_ready" }
            );
            return body;
        }
        assert!(Instant::now() < deadline, "/readyz stayed {got}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn postgres_bin() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL server binaries missing: no /usr/lib/postgresql (install postgresql)")
        .filter_map(|entry| Some(entry.ok()?.path().join("bin")))
        .filter(|bin| bin.join("initdb").is_file() && bin.join("pg_ctl").is_file())
        .collect();
    found.sort();
    found
        .pop()
        .expect("PostgreSQL server binaries missing: no initdb under /usr/lib/postgresql/*/bin")
}

/// Runs `command` as the `postgres` user (initdb refuses root).
fn as_postgres(command: &str) {
    let output = Command::new("su")
        .args(["postgres", "-s", "/bin/sh", "-c", command])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{command}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

impl PgCluster {
    fn start() -> Self {
        let bin = postgres_bin();
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let chmod = Command::new("chmod")
            .args(["755", dir.path().to_str().unwrap()])
            .status()
            .unwrap();
        let chown = Command::new("chown")
            .args(["postgres:postgres", data.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(chmod.success() && chown.success());
        as_postgres(&format!(
            "{} -D {} -U postgres --auth=trust -E UTF8 --no-sync >/dev/null",
            bin.join("initdb").display(),
            data.display()
        ));
        let cluster = Self {
            bin,
            data,
            port: free_port(),
            _dir: dir,
        };
        cluster.pg_ctl("start -w -t 60");
        cluster
    }

    fn pg_ctl(&self, action: &str) {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -c fsync=off -c unix_socket_directories={}",
            self.port,
            self.data.display()
        );
        as_postgres(&format!(
            "{} -D {} -l {} -o '{options}' {action}",
            self.bin.join("pg_ctl").display(),
            self.data.display(),
            self.data.join("log").display()
        ));
    }

    fn stop_immediately(&self) {
        self.pg_ctl("stop -m immediate -w");
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let _ = Command::new("su")
            .args(["postgres", "-s", "/bin/sh", "-c"])
            .arg(format!(
                "{} -D {} stop -m immediate",
                self.bin.join("pg_ctl").display(),
                self.data.display()
            ))
            .output();
    }
}

/// `method path` with the test token: its status, `Retry-After`, body and duration.
async fn timed(
    method: Method,
    url: &str,
    body: Option<Value>,
) -> (u16, Option<String>, Value, Duration) {
    let started = Instant::now();
    let mut request = client().request(method, url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = response.json().await.unwrap_or(Value::Null);
    (status, retry_after, body, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_down_answers_503_and_keeps_provider_answers() {
    let cluster = PgCluster::start();
    let fake = FakeProvider::start().await;
    // The openings are held until the database is down, so that they land
    // during the outage.
    fake.script(|c| {
        if c.phase == "opening" {
            Behavior::Held(Box::new(Behavior::Answer))
        } else {
            Behavior::Answer
        }
    });
    let mut env = fake.env();
    env.extend(quiet_limits());
    env.push(("SERVICE_RATE_LIMIT_DEFAULT".into(), "100000".into()));
    let data_dir = tempfile::tempdir().unwrap();
    let service = Serve::on_free_ports()
        .loopback()
        .env("DATABASE_URL", cluster.url())
        .data_dir(data_dir.path())
        .env("SERVICE_API_TOKEN", TEST_TOKEN)
        .env("SERVICE_LOG_LEVEL", "WARNING")
        .envs(env)
        .stderr(std::process::Stdio::null())
        .start()
        .await;
    let base = service.base.clone();

    let (status, _, created, _) = timed(
        Method::POST,
        &format!("{base}/api/debates"),
        Some(json!({"topic": "Outages", "agents": ["claude", "gpt-4o"], "rounds": 1})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    while fake.calls().len() < 2 {
        assert!(Instant::now() < deadline, "the openings were never asked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    cluster.stop_immediately();
    let detail_url = format!("{base}/api/debates/{id}");
    let create_url = format!("{base}/api/debates");
    for (method, url, body) in [
        (Method::GET, &detail_url, None),
        (Method::POST, &create_url, Some(demo("while down"))),
        (Method::GET, &detail_url, None),
    ] {
        let (status, retry_after, body, took) = timed(method.clone(), url, body).await;
        assert_eq!(status, 503, "{method} {url}: {body}");
        assert_eq!(body["code"], "SERVICE_UNAVAILABLE", "{body}");
        let retry_after: u64 = retry_after.expect("Retry-After").parse().unwrap();
        assert!((1..=5).contains(&retry_after), "{retry_after}");
        assert!(took < PG_DOWN_ANSWER_BOUND, "{method} {url} took {took:?}");
    }

    // Under a burst of concurrent requests too.
    let burst: Vec<_> = (0..12)
        .map(|n| {
            let (detail_url, create_url) = (detail_url.clone(), create_url.clone());
            tokio::spawn(async move {
                if n % 3 == 0 {
                    timed(Method::POST, &create_url, Some(demo("burst"))).await
                } else {
                    timed(Method::GET, &detail_url, None).await
                }
            })
        })
        .collect();
    for request in burst {
        let (status, retry_after, body, took) = request.await.unwrap();
        assert_eq!(status, 503, "{body}");
        assert!(retry_after.is_some(), "{body}");
        assert!(took < PG_DOWN_ANSWER_BOUND, "took {took:?}");
    }

    // The openings land while the database is down; their append fails.
    fake.release();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(fake.calls().len(), 2, "nothing further is asked meanwhile");

    cluster.pg_ctl("start -w -t 60");
    // Read models commit without waiting for the disk, so the crashed
    // server may come back without the debate's document (a 404) until the
    // consumers, sent back to their stored checkpoints, redo it: moments.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, _, body, _) = timed(Method::GET, &detail_url, None).await;
        if status == 200 {
            break;
        }
        assert!(status == 503 || status == 404, "{status}: {body}");
        assert!(
            Instant::now() < deadline,
            "never read again: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, _, body, _) = timed(Method::POST, &create_url, Some(demo("after"))).await;
    assert_eq!(status, 201, "{body}");

    let detail = wait_finished(&client(), &base, &id).await;
    assert_eq!(detail["status"], "completed", "{detail}");
    let counts = fake.turn_counts();
    assert!(
        counts.values().all(|n| *n == 1),
        "every turn asked once: {counts:?}"
    );
    assert_eq!(fake.calls().len(), 9, "3 turns each, 1 synthesis, 2 votes");
}
