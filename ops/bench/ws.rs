//! The WebSocket push: commit → client latency (p50/p99) with 1 and 1 000
//! subscribers, on the embedded store with the in-process bus and, with
//! `AGON_BENCH_NATS_URL`, through NATS JetStream (on PostgreSQL when
//! `AGON_BENCH_DATABASE_URL` is set); then the memory of idle sockets in the
//! real binary at 10 000 connections.
//!
//! Latency: the service runs in this process; each sample commits one debate
//! (created and failed in one append, so the runner has nothing to do) and
//! times from the append's return to each subscriber's first frame of it
//! (`debate_end`: a debate that never started has no `debate_start`). The baseline, in the same run, is a bare tokio-tungstenite server
//! in this process that broadcasts a frame of the same size to the same
//! number of clients: what the machine's loopback and the WebSocket stack
//! cost alone. Samples go one at a time (all subscribers have the frame
//! before the next commit), so they measure latency, not queueing.
//!
//! Memory: `agon serve` as a child process; its RSS with 100 sockets open,
//! then with `AGON_BENCH_WS_IDLE` (10 000) open and idle (answering pings),
//! per socket; the open-file limit (`ulimit -n`, raised to its hard limit by
//! `ops/bench/run.sh`) bounds what can be opened, and the figure says how
//! many were.
//!
//! The clients read with a 2 KiB buffer, as the service does
//! (`SERVICE_WS_READ_BUFFER_BYTES`): tungstenite's default of 128 KiB
//! zero-fills the whole buffer on every read, so a thousand clients in this
//! process spent more of the two cores clearing memory than the service
//! spent pushing (a third of all samples in a profile), and both figures
//! measured that.
//!
//! `AGON_BENCH_WS_SAMPLES` (default 200) samples with one subscriber and
//! as many with 1 000 (a sample takes milliseconds). With a tenth as many,
//! as before, one sample held 5 % of the latencies, so a single slow one
//! (the machine's noise: per-sample p99s ran from 4 to 9 ms in one run)
//! decided the p99 alone.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "service.rs"]
mod service;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use service::{Service, TOKEN};
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

const VARS: [(&str, &str); 12] = [
    ("SERVICE_RATE_LIMIT", "60000000"),
    ("SERVICE_IP_RATE_LIMIT", "60000000"),
    ("SERVICE_RATE_LIMIT_DEFAULT", "60000000"),
    ("SERVICE_WS_MAX_CONNECTIONS_FREE", "100000"),
    ("SERVICE_WS_MAX_CONNECTIONS_PRO", "100000"),
    ("SERVICE_WS_MAX_CONNECTIONS_ENTERPRISE", "100000"),
    ("SERVICE_MAX_CONNECTIONS", "100000"),
    ("SERVICE_MAX_CONNECTIONS_PER_IP", "100000"),
    ("SERVICE_WS_SEND_BUFFER", "4096"),
    ("SERVICE_LOG_LEVEL", "ERROR"),
    ("SERVICE_SEAL_INTERVAL_SECONDS", "3600"),
    ("SERVICE_CONSUMER_RETRY_ATTEMPTS", "5"),
];

/// The read buffer of every socket here, client or bare server: the
/// service's default (see the module's comment).
fn config() -> Option<WebSocketConfig> {
    Some(WebSocketConfig::default().read_buffer_size(2 * 1024))
}

type Client =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(url: &str) -> Result<Client, tokio_tungstenite::tungstenite::Error> {
    let (socket, _) = tokio_tungstenite::connect_async_with_config(url, config(), true).await?;
    Ok(socket)
}

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A debate created and failed in one append, as the aggregate records it.
fn debate(id: &str) -> [cqrs_es::persist::SerializedEvent; 2] {
    let at = chrono::Utc::now();
    let event =
        |sequence: usize, event_type: &str, payload: Value| cqrs_es::persist::SerializedEvent {
            aggregate_id: id.to_owned(),
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
            json!({"DebateCreated": {"debate_id": id, "topic": "Latency?", "context": null,
                "agents": ["demo-a", "demo-b"], "protocol": {"phases": ["opening"],
                "rounds": 1, "consensus": "majority", "threshold": 0.5, "judge": null},
                "created_by": null, "org_id": null, "at": at}}),
        ),
        event(
            2,
            "DebateFailed",
            json!({"DebateFailed": {"reason": "bench", "at": at}}),
        ),
    ]
}

/// The sample a frame belongs to, from its debate id, found by a scan
/// rather than a parse: the clients share the machine with the service,
/// and a thousand JSON parses per sample would be timed as its latency (the
/// baseline's clients do the same, so the ratio compares servers).
fn sample_of(text: &str) -> Option<usize> {
    const KEY: &str = "\"debate_id\":\"";
    let start = text.find(KEY)? + KEY.len();
    let id = &text[start..start + text[start..].find('"')?];
    id.rsplit('-').next()?.parse().ok()
}

/// Where the clients note their first frame of the sample under way: a
/// slot each, and one wake of the collector when the last has noted it. (A
/// channel message per frame woke the collector's thread up to a thousand
/// times a sample, on the cores the service shares, in both figures.)
struct Arrivals {
    base: Instant,
    sample: AtomicUsize,
    /// Nanoseconds after `base`, one per client.
    times: Vec<AtomicU64>,
    got: AtomicUsize,
    all: Notify,
}

/// Connects `n` clients to `url`; each notes the arrival of the first
/// frame of each sample it reads, and answers pings, until the socket
/// closes.
async fn clients(url: &str, n: usize) -> Arc<Arrivals> {
    let arrivals = Arc::new(Arrivals {
        base: Instant::now(),
        sample: AtomicUsize::new(usize::MAX),
        times: (0..n).map(|_| AtomicU64::new(0)).collect(),
        got: AtomicUsize::new(0),
        all: Notify::new(),
    });
    for k in 0..n {
        let mut socket = connect(url).await.unwrap();
        let arrivals = arrivals.clone();
        tokio::spawn(async move {
            let mut last = None;
            while let Some(Ok(message)) = socket.next().await {
                if let Message::Text(text) = message
                    && let Some(sample) = sample_of(&text)
                    && last.replace(sample) != Some(sample)
                    && sample == arrivals.sample.load(Ordering::Acquire)
                {
                    let at = arrivals.base.elapsed().as_nanos() as u64;
                    arrivals.times[k].store(at, Ordering::Release);
                    if arrivals.got.fetch_add(1, Ordering::AcqRel) + 1 == n {
                        arrivals.all.notify_one();
                    }
                }
            }
        });
    }
    arrivals
}

/// Runs `samples` rounds: `start(i)` begins sample `i` and returns the
/// moment it counts from; collects every subscriber's arrival of it.
async fn rounds<F, Fut>(arrivals: &Arrivals, samples: usize, mut start: F) -> Vec<Duration>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Instant>,
{
    let mut times = Vec::with_capacity(arrivals.times.len() * samples);
    // Three rounds of warm-up, not counted.
    for i in 0..samples + 3 {
        arrivals.got.store(0, Ordering::Release);
        arrivals.sample.store(i, Ordering::Release);
        let from = start(i).await;
        tokio::time::timeout(Duration::from_secs(30), arrivals.all.notified())
            .await
            .expect("every subscriber's frame within 30 s");
        if i >= 3 {
            let from = from.saturating_duration_since(arrivals.base);
            times.extend(
                arrivals.times.iter().map(|at| {
                    Duration::from_nanos(at.load(Ordering::Acquire)).saturating_sub(from)
                }),
            );
        }
    }
    times
}

/// p50 and p99.
fn quantiles(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    let at = |q: f64| times[((times.len() as f64 - 1.0) * q).round() as usize];
    (at(0.50), at(0.99))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Commit → frame through the service.
async fn service_latency(
    service: &Service,
    run: &str,
    subscribers: usize,
    samples: usize,
) -> Vec<Duration> {
    let url = format!(
        "{}/ws?token={TOKEN}&all=true",
        service.base.replacen("http", "ws", 1)
    );
    let arrivals = clients(&url, subscribers).await;
    let log = service.log.clone();
    let run: String = run.chars().filter(char::is_ascii_alphanumeric).collect();
    rounds(&arrivals, samples, |i| {
        let log = log.clone();
        let id = format!("bench_{run}_{subscribers}-{i}");
        async move {
            log.append(&debate(&id)).await.unwrap();
            Instant::now()
        }
    })
    .await
}

/// The same through a bare broadcast server: send → frame.
async fn baseline_latency(subscribers: usize, samples: usize) -> Vec<Duration> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    let (broadcast, _) = tokio::sync::broadcast::channel::<String>(1024);
    let sender = broadcast.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let mut frames = sender.subscribe();
            tokio::spawn(async move {
                let _ = stream.set_nodelay(true);
                let mut socket = tokio_tungstenite::accept_async_with_config(stream, config())
                    .await
                    .unwrap();
                while let Ok(frame) = frames.recv().await {
                    if socket.send(Message::text(frame)).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let arrivals = clients(&url, subscribers).await;
    while broadcast.receiver_count() < subscribers {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    rounds(&arrivals, samples, |i| {
        // The shape and size of the service's frame.
        let id = format!("bench_baseline_{subscribers}-{i}");
        let frame = json!({"type": "debate_end", "data": {"consensus_reached": false,
            "debate_id": id, "duration_seconds": null, "reason": "bench", "result": "",
            "status": "failed", "total_rounds": 1}, "timestamp": chrono::Utc::now().to_rfc3339(),
            "debate_id": id, "position": i, "v": 1})
        .to_string();
        let now = Instant::now();
        let _ = broadcast.send(frame);
        async move { now }
    })
    .await
}

async fn latency(name: &str, database_url: Option<String>, nats_url: Option<String>) {
    let service = Service::start(&VARS, database_url, nats_url).await;
    let samples = setting("AGON_BENCH_WS_SAMPLES", 200) as usize;
    for subscribers in [1, 1_000] {
        let (p50, p99) = quantiles(service_latency(&service, name, subscribers, samples).await);
        let (b50, b99) = quantiles(baseline_latency(subscribers, samples).await);
        println!(
            "{name:<20} {subscribers:>5} subscribers  commit→frame p50 {:>7.2} ms  p99 {:>7.2} ms  | bare broadcast p50 {:>6.2} ms  p99 {:>6.2} ms  ratio p50 {:.1}  p99 {:.1}",
            ms(p50),
            ms(p99),
            ms(b50),
            ms(b99),
            p50.as_secs_f64() / b50.as_secs_f64(),
            p99.as_secs_f64() / b99.as_secs_f64(),
        );
    }
    service.stop().await;
}

/// Resident memory of `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Opens sockets to `url` until `count` are open or one fails; returns how
/// many are open. Each is read in a task of its own (pings answered).
async fn open(url: &str, count: usize, open: &mut usize) -> Option<String> {
    while *open < count {
        match connect(url).await {
            Ok(mut socket) => {
                tokio::spawn(async move { while let Some(Ok(_)) = socket.next().await {} });
                *open += 1;
            }
            Err(e) => return Some(e.to_string()),
        }
    }
    None
}

async fn memory() {
    let wanted = setting("AGON_BENCH_WS_IDLE", 10_000) as usize;
    let dir = tempfile::tempdir().unwrap();
    let (port, ws_port) = (free_port(), free_port());
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agon"))
        .args([
            "serve",
            "--host",
            "127.0.0.1",
            "--api-port",
            &port.to_string(),
        ])
        .args(["--ws-port", &ws_port.to_string()])
        .env_clear()
        .envs(VARS)
        .env("SERVICE_DATA_DIR", dir.path())
        .env("SERVICE_API_TOKEN", TOKEN)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let url = format!("ws://127.0.0.1:{ws_port}/ws?token={TOKEN}&all=true");
    let started = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", ws_port))
        .await
        .is_err()
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "agon did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let idle = rss(pid);
    let mut opened = 0;
    assert!(open(&url, 100, &mut opened).await.is_none());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let at_100 = rss(pid);
    let stopped = open(&url, wanted, &mut opened).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let at_all = rss(pid);
    let per_socket = at_all.saturating_sub(at_100) as f64 / (opened - 100).max(1) as f64;
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!(
        "idle sockets: {opened} of {wanted} open{}; service RSS {:.1} MiB with none, {:.1} MiB with 100, {:.1} MiB with {opened}: {:.1} KiB per socket; {:.1} MiB over the idle service (ratio {:.2} of the idle RSS)",
        stopped.map(|e| format!(" (then: {e})")).unwrap_or_default(),
        mib(idle),
        mib(at_100),
        mib(at_all),
        per_socket / 1024.0,
        mib(at_all.saturating_sub(idle)),
        at_all as f64 / idle as f64,
    );
    child.kill().await.unwrap();
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        latency("embedded (SQLite)", None, None).await;
        if let Ok(nats) = std::env::var("AGON_BENCH_NATS_URL") {
            let db = std::env::var("AGON_BENCH_DATABASE_URL").ok();
            let name = if db.is_some() {
                "PostgreSQL + NATS"
            } else {
                "SQLite + NATS"
            };
            latency(name, db, Some(nats)).await;
        }
        memory().await;
    });
}
