//! Long-run memory: the resident set (VmRSS) of a release `agon serve`
//! process before, during and after a few million requests and after 100 k
//! created demo debates, each figure also as a ratio to the idle RSS
//! measured at the start of the same run. Memory must not grow with the
//! requests served or the debates stored; the goal is RSS after `K` debates
//! within 1.5x of RSS after 1 k.
//!
//! `cargo bench --bench longrun` measures the embedded store; with
//! `AGON_BENCH_DATABASE_URL` and `AGON_BENCH_NATS_URL` (`ops/bench/run.sh
//! longrun` starts both) it measures PostgreSQL + NATS JetStream too.
//! Everything goes to 127.0.0.1. Overrides:
//! - `AGON_BENCH_REQUESTS` (default 3000000): read requests, half of them
//!   (`AGON_BENCH_REFUSED_SHARE`, default 0.5) `GET /api/health` from a
//!   bucket limited to one a minute, so they are answered 429; the rest
//!   read one completed debate's consensus.
//! - `AGON_BENCH_CLIENTS` (default 64): concurrent keep-alive clients.
//! - `AGON_BENCH_DEBATES` (default 100000): demo debates created (3 agents,
//!   2 rounds), by `AGON_BENCH_DEBATE_CLIENTS` (default 16) clients that
//!   each wait for their debate's consensus (polls every 25 ms).
//! - `AGON_BENCH_IDLE_SECONDS` (default 15): each idle pause.
//! - `AGON_BENCH_BINARY`: another `agon` build to measure (say, a copy of
//!   an earlier one); by default the one built with the benchmark.
//!
//! `MIMALLOC_*` and `SERVICE_*` variables pass through to the service.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const TOKEN: &str = "bench-token-0123456789abcdef";
const POLL: Duration = Duration::from_millis(25);
/// The highest rate the settings accept: nothing the benchmark does is limited.
const UNLIMITED: &str = "60000000";
const RAISED: [&str; 6] = [
    "SERVICE_RATE_LIMIT",
    "SERVICE_RATE_LIMIT_DEFAULT",
    "SERVICE_RATE_LIMIT_DEBATE_CREATE",
    "SERVICE_RATE_LIMIT_DEBATE_LIST",
    "SERVICE_IP_RATE_LIMIT",
    "SERVICE_RATE_LIMIT_ADMIN",
];

fn var<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

struct Service {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Service {
    fn start(database_url: Option<&str>, nats_url: Option<&str>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let binary = std::env::var("AGON_BENCH_BINARY")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_agon").to_owned());
        let mut command = Command::new(binary);
        command
            .args(["serve", "--host", "127.0.0.1", "--api-port"])
            .arg(port.to_string())
            .args(["--ws-port", &free_port().to_string()])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("SERVICE_DATA_DIR", dir.path())
            .env("SERVICE_API_TOKEN", TOKEN)
            .env("SERVICE_LOG_LEVEL", "ERROR")
            .env("SERVICE_SEAL_INTERVAL_SECONDS", "3600")
            .env("SERVICE_RATE_LIMIT_HEALTH", "1")
            .env("SERVICE_MAX_CONNECTIONS_PER_IP", "4096")
            .stdout(Stdio::null());
        for name in RAISED {
            command.env(name, UNLIMITED);
        }
        // Allocator and other settings under test pass through.
        for (name, value) in std::env::vars() {
            if name.starts_with("MIMALLOC_") || name.starts_with("SERVICE_") {
                command.env(name, value);
            }
        }
        if let (Some(db), Some(nats)) = (database_url, nats_url) {
            command
                .env("DATABASE_URL", db)
                .env("SERVICE_NATS_URL", nats);
        }
        Self {
            child: command.spawn().expect("the agon binary starts"),
            base: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        }
    }

    /// Resident memory of the service now, in MiB.
    fn rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn wait_ready(client: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response = client
            .get(format!("{base}/api/debates"))
            .bearer_auth(TOKEN)
            .send()
            .await;
        if matches!(&response, Ok(r) if r.status().is_success()) {
            return;
        }
        assert!(Instant::now() < deadline, "the service did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Creates one demo debate and waits for its consensus; returns its id.
async fn one_debate(client: &reqwest::Client, base: &str, n: usize) -> String {
    let created: Value = client
        .post(format!("{base}/api/debates"))
        .bearer_auth(TOKEN)
        .json(&json!({
            "topic": format!("Should long-run city {n} ban cars from its centre?"),
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
    loop {
        let response = client
            .get(format!("{base}/api/debates/{id}/consensus"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        match response.status().as_u16() {
            200 => return id,
            202 => tokio::time::sleep(POLL).await,
            other => panic!("debate {id}: consensus answered {other}"),
        }
    }
}

/// Creates debates `from..to` with `clients` concurrent clients; returns debates/s.
async fn debates(base: &str, clients: usize, from: usize, to: usize) -> f64 {
    let client = reqwest::Client::new();
    let next = Arc::new(AtomicUsize::new(from));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (client, base, next) = (client.clone(), base.to_owned(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::SeqCst);
                if n >= to {
                    return;
                }
                one_debate(&client, &base, n).await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    (to - from) as f64 / started.elapsed().as_secs_f64()
}

/// Sends `total` reads over `clients` keep-alive connections, a share of
/// them to the exhausted health bucket; returns requests/s and the 429 count.
async fn reads(base: &str, consensus: &str, clients: usize, total: u64) -> (f64, u64) {
    let refused_share: f64 = var("AGON_BENCH_REFUSED_SHARE", 0.5);
    let every = if refused_share > 0.0 {
        (1.0 / refused_share).round().max(1.0) as u64
    } else {
        u64::MAX
    };
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .build()
        .unwrap();
    let next = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let (ok_url, limited_url) = (consensus.to_owned(), format!("{base}/api/health"));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (client, next, refused) = (client.clone(), next.clone(), refused.clone());
        let (ok_url, limited_url) = (ok_url.clone(), limited_url.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= total {
                    return;
                }
                let request = if n % every == every - 1 {
                    client.get(&limited_url)
                } else {
                    client.get(&ok_url).bearer_auth(TOKEN)
                };
                let status = request.send().await.unwrap().status().as_u16();
                match status {
                    429 => {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                    200 => {}
                    other => panic!("read answered {other}"),
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    (
        total as f64 / started.elapsed().as_secs_f64(),
        refused.load(Ordering::Relaxed),
    )
}

struct Report {
    name: String,
    baseline: f64,
}

impl Report {
    fn line(&self, what: &str, rss: f64, extra: &str) {
        println!(
            "{:<18} {what:<36} RSS {rss:>7.1} MiB  ratio to idle {:>5.2}  {extra}",
            self.name,
            rss / self.baseline
        );
    }
}

async fn measure(name: &str, database_url: Option<&str>, nats_url: Option<&str>) {
    let requests: u64 = var("AGON_BENCH_REQUESTS", 3_000_000);
    let clients: usize = var("AGON_BENCH_CLIENTS", 64);
    let total_debates: usize = var("AGON_BENCH_DEBATES", 100_000).max(1_000);
    let debate_clients: usize = var("AGON_BENCH_DEBATE_CLIENTS", 16);
    let idle = Duration::from_secs(var("AGON_BENCH_IDLE_SECONDS", 15));

    let service = Service::start(database_url, nats_url);
    let base = service.base.clone();
    let client = reqwest::Client::new();
    wait_ready(&client, &base).await;
    let id = one_debate(&client, &base, usize::MAX).await;
    let consensus = format!("{base}/api/debates/{id}/consensus");
    tokio::time::sleep(idle).await;
    let report = Report {
        name: name.to_owned(),
        baseline: service.rss_mib(),
    };
    report.line("idle (baseline)", report.baseline, "");

    // Reads: half first, then the rest, to see the trend during the load.
    let half = requests / 2;
    let (rate1, refused1) = reads(&base, &consensus, clients, half).await;
    let during = service.rss_mib();
    report.line(
        &format!("after {half} requests"),
        during,
        &format!("{rate1:.0} req/s, {refused1} answered 429"),
    );
    let (rate2, refused2) = reads(&base, &consensus, clients, requests - half).await;
    let after_reads = service.rss_mib();
    report.line(
        &format!("after {requests} requests"),
        after_reads,
        &format!("{rate2:.0} req/s, {refused2} answered 429"),
    );
    tokio::time::sleep(idle).await;
    let reads_idle = service.rss_mib();
    let per_request = (after_reads - during) * 1_048_576.0 / (requests - half).max(1) as f64;
    report.line(
        "requests, then idle",
        reads_idle,
        &format!("growth {per_request:.1} bytes/request over the second half"),
    );

    let rate = debates(&base, debate_clients, 0, 1_000).await;
    let at_1k = service.rss_mib();
    report.line("after 1000 debates", at_1k, &format!("{rate:.1} debates/s"));
    let mut done = 1_000;
    let mut previous = (done, at_1k);
    let mut step = 1_000;
    while done < total_debates {
        step = (step * 2).min(total_debates - done).min(20_000);
        let rate = debates(&base, debate_clients, done, done + step).await;
        done += step;
        let rss = service.rss_mib();
        let per_debate = (rss - previous.1) * 1_048_576.0 / (done - previous.0) as f64;
        report.line(
            &format!("after {done} debates"),
            rss,
            &format!("{rate:.1} debates/s, growth {per_debate:.0} bytes/debate"),
        );
        previous = (done, rss);
    }
    let at_k = service.rss_mib();
    tokio::time::sleep(idle).await;
    let debates_idle = service.rss_mib();
    let per_debate = (at_k - at_1k) * 1_048_576.0 / (done - 1_000).max(1) as f64;
    report.line(
        "debates, then idle",
        debates_idle,
        &format!("growth {per_debate:.0} bytes/debate after the first 1000"),
    );
    println!(
        "{name:<18} RSS({done} debates)/RSS(1000 debates) = {:.3} (goal <= 1.5); after idle {:.3}",
        at_k / at_1k,
        debates_idle / at_1k
    );
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
            measure("PostgreSQL + NATS", Some(&db), Some(&nats)).await;
        }
    });
}
