//! Reads per second and their p50/p99 latency for the debate detail, the
//! debates list and the leaderboard, each beside a trivial route of the same
//! binary in the same run (`/healthz`, in turns with the route) and reported
//! as a ratio of it; then the list's p50 again once the store holds 100 000
//! debates (seeded through the store's append, many streams at once, not
//! over HTTP).
//!
//! `cargo bench --bench reads` measures the embedded store; with
//! `AGON_BENCH_DATABASE_URL` (`ops/bench/run.sh reads`) PostgreSQL too.
//! `AGON_BENCH_READ_CLIENTS` (default 8) concurrent clients,
//! `AGON_BENCH_READ_SECONDS` (default 3) per route, `AGON_BENCH_DEBATES`
//! (default 100000) debates in the large store.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "service.rs"]
mod service;

use std::time::{Duration, Instant};

use cqrs_es::persist::SerializedEvent;
use serde_json::{Value, json};
use service::{Service, TOKEN};

/// Debates in the small store.
const SMALL: usize = 30;
/// Streams appended at once while seeding.
const SEED_WRITERS: usize = 32;

const BENCH_VARS: [(&str, &str); 7] = [
    ("SERVICE_RATE_LIMIT_DEBATE_CREATE", "1000000"),
    ("SERVICE_RATE_LIMIT", "60000000"),
    ("SERVICE_IP_RATE_LIMIT", "60000000"),
    ("SERVICE_RATE_LIMIT_DEBATE_LIST", "60000000"),
    ("SERVICE_RATE_LIMIT_HEALTH", "60000000"),
    ("SERVICE_LOG_LEVEL", "ERROR"),
    ("SERVICE_SEAL_INTERVAL_SECONDS", "3600"),
];

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn get(client: &reqwest::Client, url: &str) -> (u16, Value) {
    let response = client.get(url).bearer_auth(TOKEN).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Creates `n` demo debates over HTTP and waits until all have finished.
async fn demo_debates(base: &str, n: usize) -> Vec<String> {
    let client = reqwest::Client::new();
    let mut ids = Vec::new();
    for i in 0..n {
        let created: Value = client
            .post(format!("{base}/api/debates"))
            .bearer_auth(TOKEN)
            .json(&json!({"topic": format!("Read bench {i}"), "agents": ["demo-a", "demo-b", "demo-c"], "rounds": 2}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        ids.push(created["id"].as_str().expect("a debate id").to_owned());
    }
    let url = format!("{base}/api/debates?status=completed&limit=1");
    while get(&client, &url).await.1["total"].as_u64() < Some(n as u64) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ids
}

/// The events of one debate created and failed at once (so the runner has
/// nothing to do for it), as the aggregate would record them.
fn seeded_debate(n: usize) -> [SerializedEvent; 2] {
    let id = format!("seed-{n:06}");
    let at = chrono::DateTime::UNIX_EPOCH + chrono::Duration::seconds(1_700_000_000 + n as i64);
    let event = |sequence: usize, event_type: &str, payload: Value| SerializedEvent {
        aggregate_id: id.clone(),
        sequence,
        aggregate_type: "debate".to_owned(),
        event_type: event_type.to_owned(),
        event_version: "1".to_owned(),
        payload,
        metadata: json!({"actor": "bench"}),
    };
    [
        event(
            1,
            "DebateCreated",
            json!({"DebateCreated": {"debate_id": id, "topic": format!("Seeded {n}"), "context": null,
                "agents": ["demo-a", "demo-b", "demo-c"], "protocol": {"phases": ["opening", "critique"],
                "rounds": 2, "consensus": "majority", "threshold": 0.5, "judge": null},
                "created_by": null, "org_id": null, "at": at}}),
        ),
        event(
            2,
            "DebateFailed",
            json!({"DebateFailed": {"reason": "seeded", "at": at}}),
        ),
    ]
}

/// Appends `count` debates, `SEED_WRITERS` streams at a time, and waits
/// until the list shows `total`.
async fn seed(service: &Service, count: usize, total: usize) -> Duration {
    let started = Instant::now();
    let mut writers = Vec::new();
    for w in 0..SEED_WRITERS {
        let log = service.log.clone();
        writers.push(tokio::spawn(async move {
            for n in (w..count).step_by(SEED_WRITERS) {
                log.append(&seeded_debate(n)).await.unwrap();
            }
        }));
    }
    for writer in writers {
        writer.await.unwrap();
    }
    let client = reqwest::Client::new();
    let url = format!("{}/api/debates?limit=1", service.base);
    while get(&client, &url).await.1["total"].as_u64() < Some(total as u64) {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    started.elapsed()
}

struct Figures {
    per_second: f64,
    p50: Duration,
    p99: Duration,
}

/// Rounds in which a route and `/healthz` take turns, so that both see the
/// same share of whatever else the machine does.
const TURNS: u32 = 6;

/// Latencies of GETs of `url` from `clients` concurrent clients for `time`.
async fn load(
    client: &reqwest::Client,
    url: &str,
    clients: usize,
    time: Duration,
) -> Vec<Duration> {
    let deadline = Instant::now() + time;
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (client, url) = (client.clone(), url.to_owned());
        tasks.push(tokio::spawn(async move {
            let mut times = Vec::new();
            while Instant::now() < deadline {
                let at = Instant::now();
                let response = client.get(&url).bearer_auth(TOKEN).send().await.unwrap();
                assert_eq!(response.status().as_u16(), 200, "{url}");
                response.bytes().await.unwrap();
                times.push(at.elapsed());
            }
            times
        }));
    }
    let mut times = Vec::new();
    for task in tasks {
        times.extend(task.await.unwrap());
    }
    times
}

fn figures(mut times: Vec<Duration>, elapsed: Duration) -> Figures {
    times.sort();
    let at = |q: f64| times[((times.len() as f64 - 1.0) * q).round() as usize];
    Figures {
        per_second: times.len() as f64 / elapsed.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
    }
}

/// `path` and, in turns with it, `/healthz`: the configured time each.
async fn measure(base: &str, path: &str) -> (Figures, Figures) {
    let clients = setting("AGON_BENCH_READ_CLIENTS", 8) as usize;
    let time = Duration::from_secs(setting("AGON_BENCH_READ_SECONDS", 3)) / TURNS;
    let client = reqwest::Client::new();
    let (url, trivial) = (format!("{base}{path}"), format!("{base}/healthz"));
    // Warm up connections and caches.
    for _ in 0..50 {
        assert_eq!(get(&client, &url).await.0, 200, "{path}");
    }
    let (mut times, mut baseline) = (Vec::new(), Vec::new());
    let (mut spent, mut spent_baseline) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..TURNS {
        let started = Instant::now();
        baseline.extend(load(&client, &trivial, clients, time).await);
        spent_baseline += started.elapsed();
        let started = Instant::now();
        times.extend(load(&client, &url, clients, time).await);
        spent += started.elapsed();
    }
    (figures(times, spent), figures(baseline, spent_baseline))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn report(name: &str, route: &str, figures: &Figures, baseline: &Figures) {
    println!(
        "{name:<18} {route:<12} {:>8.0} req/s  p50 {:>6.2} ms  p99 {:>6.2} ms  | /healthz {:>8.0} req/s  ratio {:.2}",
        figures.per_second,
        ms(figures.p50),
        ms(figures.p99),
        baseline.per_second,
        figures.per_second / baseline.per_second,
    );
}

async fn run(name: &str, database_url: Option<String>) {
    let service = Service::start(&BENCH_VARS, database_url, None).await;
    let base = service.base.clone();
    let ids = demo_debates(&base, SMALL).await;
    let detail = format!("/api/debates/{}", ids[0]);
    let routes = [
        ("detail", detail.as_str()),
        ("list", "/api/debates"),
        ("leaderboard", "/api/leaderboard"),
    ];
    let mut small_list = None;
    for (route, path) in routes {
        let (figures, baseline) = measure(&base, path).await;
        report(name, route, &figures, &baseline);
        if route == "list" {
            small_list = Some(figures);
        }
    }
    let small_list = small_list.unwrap();
    let large = setting("AGON_BENCH_DEBATES", 100_000) as usize;
    let seeded = seed(&service, large - SMALL, large).await;
    println!(
        "{name:<18} seeded {} debates in {:.1} s",
        large - SMALL,
        seeded.as_secs_f64()
    );
    let (list, baseline) = measure(&base, "/api/debates").await;
    report(name, &format!("list@{large}"), &list, &baseline);
    let (detail, baseline) = measure(&base, &detail).await;
    report(name, &format!("detail@{large}"), &detail, &baseline);
    println!(
        "{name:<18} list p50 at {SMALL}: {:.2} ms, at {large}: {:.2} ms, ratio {:.2}",
        ms(small_list.p50),
        ms(list.p50),
        list.p50.as_secs_f64() / small_list.p50.as_secs_f64(),
    );
    service.stop().await;
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        run("embedded (SQLite)", None).await;
        if let Ok(db) = std::env::var("AGON_BENCH_DATABASE_URL") {
            run("PostgreSQL", Some(db)).await;
        }
    });
}
