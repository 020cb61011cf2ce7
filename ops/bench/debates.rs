//! Demo debates per second over HTTP (3 demo agents, 2 rounds), from the
//! create request to a consensus answer, at 1 and 16 concurrent clients,
//! with p50/p99 latency and peak RSS, against a baseline measured in the
//! same run: authenticated reads of one completed debate's consensus
//! (`GET /api/debates/{id}/consensus`) per second at the same concurrency.
//!
//! `cargo bench --bench debates` measures the embedded store; with
//! `AGON_BENCH_DATABASE_URL` and `AGON_BENCH_NATS_URL` (`ops/bench/run.sh`
//! starts both) it measures PostgreSQL + NATS JetStream too. The service
//! runs in this process on a loopback port; its rate limits are raised with
//! the variables a benchmark user sets (see README, "Benchmarks").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

// Shared with the reads benchmark, which also seeds through `Service::log`.
#[allow(dead_code)]
#[path = "service.rs"]
mod service;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use service::{Service, TOKEN};

/// How often a client asks whether its debate's consensus is there
/// (`AGON_BENCH_POLL_MS`, default 25: a debate takes a few hundred
/// milliseconds under load, and much faster polling measures the polls).
fn poll() -> Duration {
    let ms = std::env::var("AGON_BENCH_POLL_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25);
    Duration::from_millis(ms)
}
const BASELINE_TIME: Duration = Duration::from_secs(2);

/// The variables that let one user create debates as fast as the service can run them.
const BENCH_VARS: [(&str, &str); 5] = [
    ("SERVICE_RATE_LIMIT_DEBATE_CREATE", "1000000"),
    ("SERVICE_RATE_LIMIT", "1000000"),
    ("SERVICE_IP_RATE_LIMIT", "1000000"),
    ("SERVICE_LOG_LEVEL", "ERROR"),
    ("SERVICE_SEAL_INTERVAL_SECONDS", "3600"),
];

/// Creates one demo debate and waits for its consensus; returns the time
/// the create request took and the time to the consensus.
async fn one_debate(client: &reqwest::Client, base: &str, n: usize) -> (Duration, Duration) {
    let started = Instant::now();
    let created: Value = client
        .post(format!("{base}/api/debates"))
        .bearer_auth(TOKEN)
        .json(&json!({
            "topic": format!("Should benchmark city {n} ban cars from its centre?"),
            "agents": ["demo-a", "demo-b", "demo-c"],
            "rounds": 2,
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().expect("a debate id").to_owned();
    let create = started.elapsed();
    loop {
        let response = client
            .get(format!("{base}/api/debates/{id}/consensus"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        match response.status().as_u16() {
            200 => return (create, started.elapsed()),
            202 => tokio::time::sleep(poll()).await,
            other => panic!("debate {id}: consensus answered {other}"),
        }
    }
}

/// Peak resident memory of this process since the last reset, in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Reads of a completed debate's consensus per second at `clients` concurrency.
async fn baseline(base: &str, clients: usize) -> f64 {
    let client = reqwest::Client::new();
    let created: Value = client
        .post(format!("{base}/api/debates"))
        .bearer_auth(TOKEN)
        .json(&json!({"topic": "Baseline", "agents": ["demo-a", "demo-b", "demo-c"], "rounds": 2}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().expect("a debate id").to_owned();
    let url = format!("{base}/api/debates/{id}/consensus");
    while client
        .get(&url)
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .status()
        != 200
    {
        tokio::time::sleep(poll()).await;
    }
    let deadline = Instant::now() + BASELINE_TIME;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (client, url) = (client.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                let r = client.get(&url).bearer_auth(TOKEN).send().await.unwrap();
                assert!(
                    r.status().is_success(),
                    "baseline read answered {}",
                    r.status()
                );
                n += 1;
            }
            n
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    total as f64 / started.elapsed().as_secs_f64()
}

struct Figures {
    per_second: f64,
    p50: Duration,
    p99: Duration,
    /// The create request alone.
    create_p50: Duration,
    peak_mib: f64,
}

async fn debates(base: &str, clients: usize, total: usize) -> Figures {
    let client = reqwest::Client::new();
    // Warm up: the first debates pay for connections and caches.
    for n in 0..3 {
        one_debate(&client, base, n).await;
    }
    reset_peak_rss();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (client, base, next) = (client.clone(), base.to_owned(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut times = Vec::new();
            loop {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if n >= total {
                    return times;
                }
                times.push(one_debate(&client, &base, n).await);
            }
        }));
    }
    let mut times = Vec::new();
    for task in tasks {
        times.extend(task.await.unwrap());
    }
    let elapsed = started.elapsed();
    let (mut creates, mut totals): (Vec<_>, Vec<_>) = times.into_iter().unzip();
    creates.sort();
    totals.sort();
    let at = |times: &[Duration], q: f64| times[((times.len() as f64 - 1.0) * q).round() as usize];
    Figures {
        per_second: total as f64 / elapsed.as_secs_f64(),
        p50: at(&totals, 0.50),
        p99: at(&totals, 0.99),
        create_p50: at(&creates, 0.50),
        peak_mib: peak_rss_mib(),
    }
}

async fn measure(name: &str, database_url: Option<String>, nats_url: Option<String>) {
    let service = Service::start(&BENCH_VARS, database_url, nats_url).await;
    for (clients, total) in [(1, 200), (16, 1_000)] {
        let reads = baseline(&service.base, clients).await;
        let figures = debates(&service.base, clients, total).await;
        println!(
            "{name:<22} clients {clients:>2} (poll {:>2} ms): {:>7.1} debates/s  p50 {:>6.1} ms  p99 {:>6.1} ms  (create p50 {:>5.1} ms)  peak RSS {:>6.1} MiB  | baseline {:>8.0} reads/s  ratio {:.4}",
            poll().as_millis(),
            figures.per_second,
            figures.p50.as_secs_f64() * 1e3,
            figures.p99.as_secs_f64() * 1e3,
            figures.create_p50.as_secs_f64() * 1e3,
            figures.peak_mib,
            reads,
            figures.per_second / reads,
        );
    }
    service.stop().await;
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        measure("embedded (SQLite)", None, None).await;
        if let (Ok(db), Ok(nats)) = (
            std::env::var("AGON_BENCH_DATABASE_URL"),
            std::env::var("AGON_BENCH_NATS_URL"),
        ) {
            measure("PostgreSQL + NATS", Some(db), Some(nats)).await;
        }
    });
}
