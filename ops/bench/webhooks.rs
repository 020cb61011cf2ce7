//! Outgoing webhook deliveries per second to a local receiver, beside the
//! rate at which a plain HTTP client posts the same bodies to the same
//! receiver with the same concurrency, in the same run.
//!
//! One user holds `SUBSCRIPTIONS` subscriptions to `debate.failed` on a
//! receiver on 127.0.0.1 that answers 200 at once; `AGON_BENCH_WEBHOOK_EVENTS`
//! (default 500) debates are committed (created and failed in one append,
//! through the store, not over HTTP), so each makes one delivery per
//! subscription: signed, recorded, sent in order per subscription. The
//! rate runs from the first commit to the last delivery received. The
//! baseline is `SERVICE_WEBHOOK_CONCURRENCY` (8) reqwest clients posting the
//! same number of bodies of the same size.
//!
//! `cargo bench --bench webhooks` measures the embedded store; with
//! `AGON_BENCH_DATABASE_URL` (`ops/bench/run.sh webhooks`) PostgreSQL too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "service.rs"]
mod service;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use service::Service;
use tokio::sync::Notify;

/// Subscriptions of the one user, each getting every event.
const SUBSCRIPTIONS: usize = 8;
/// Deliveries in flight per replica (the default).
const CONCURRENCY: usize = 8;

const VARS: [(&str, &str); 10] = [
    ("SERVICE_RATE_LIMIT", "60000000"),
    ("SERVICE_IP_RATE_LIMIT", "60000000"),
    ("SERVICE_RATE_LIMIT_DEFAULT", "60000000"),
    ("SERVICE_RATE_LIMIT_AUTH", "60000000"),
    ("SERVICE_RATE_LIMIT_REGISTER", "60000000"),
    ("SERVICE_WEBHOOK_ALLOWED_NETWORKS", "127.0.0.0/8"),
    ("SERVICE_WEBHOOK_CONCURRENCY", "8"),
    ("SERVICE_WEBHOOK_POLL_MS", "1000"),
    ("SERVICE_LOG_LEVEL", "ERROR"),
    ("SERVICE_SEAL_INTERVAL_SECONDS", "3600"),
];

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A receiver that counts requests and wakes `reached` at `target`.
struct Counter {
    count: AtomicUsize,
    target: AtomicUsize,
    reached: Notify,
}

impl Counter {
    fn reset(&self, target: usize) {
        self.count.store(0, Ordering::SeqCst);
        self.target.store(target, Ordering::SeqCst);
    }
}

/// Serves the counter on a loopback port; returns its URL.
async fn receiver(counter: Arc<Counter>) -> String {
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: axum::body::Bytes| {
            let counter = counter.clone();
            async move {
                drop(body);
                let seen = counter.count.fetch_add(1, Ordering::SeqCst) + 1;
                if seen == counter.target.load(Ordering::SeqCst) {
                    counter.reached.notify_one();
                }
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

async fn call(method: reqwest::Method, url: &str, token: Option<&str>, body: Value) -> Value {
    let client = reqwest::Client::new();
    let mut request = client.request(method, url).json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "{url}: {status} {body}");
    body
}

/// Registers and signs in a user; returns (user id, access token).
async fn user(base: &str) -> (String, String) {
    let account =
        json!({"email": "bench@example.com", "password": "bench-password-1", "name": "Bench"});
    let registered = call(
        reqwest::Method::POST,
        &format!("{base}/api/auth/register"),
        None,
        account.clone(),
    )
    .await;
    let login = json!({"email": account["email"], "password": account["password"]});
    let tokens = call(
        reqwest::Method::POST,
        &format!("{base}/api/auth/login"),
        None,
        login,
    )
    .await;
    (
        registered["user"]["user_id"].as_str().unwrap().to_owned(),
        tokens["access_token"].as_str().unwrap().to_owned(),
    )
}

/// A debate of `owner` created and failed in one append.
fn debate(id: &str, owner: &str) -> [cqrs_es::persist::SerializedEvent; 2] {
    let at = chrono::Utc::now();
    let event =
        |sequence: usize, event_type: &str, payload: Value| cqrs_es::persist::SerializedEvent {
            aggregate_id: id.to_owned(),
            sequence,
            aggregate_type: "debate".to_owned(),
            event_type: event_type.to_owned(),
            event_version: "1".to_owned(),
            payload,
            metadata: json!({"actor": owner}),
        };
    [
        event(
            1,
            "DebateCreated",
            json!({"DebateCreated": {"debate_id": id, "topic": "Deliveries per second?", "context": null,
                "agents": ["demo-a", "demo-b"], "protocol": {"phases": ["opening"],
                "rounds": 1, "consensus": "majority", "threshold": 0.5, "judge": null},
                "created_by": owner, "org_id": null, "at": at}}),
        ),
        event(
            2,
            "DebateFailed",
            json!({"DebateFailed": {"reason": "bench", "at": at}}),
        ),
    ]
}

/// Waits until the counter reaches its target; false after a minute of
/// no progress.
async fn reached(counter: &Counter) -> bool {
    let mut last = counter.count.load(Ordering::SeqCst);
    loop {
        if last >= counter.target.load(Ordering::SeqCst) {
            return true;
        }
        if tokio::time::timeout(Duration::from_secs(60), counter.reached.notified())
            .await
            .is_ok()
        {
            return true;
        }
        let now = counter.count.load(Ordering::SeqCst);
        if now == last {
            return false;
        }
        last = now;
    }
}

/// Posts `count` bodies like a delivery's to `url` from `CONCURRENCY` clients.
async fn baseline(counter: &Arc<Counter>, url: &str, count: usize) -> f64 {
    let body = json!({"type": "debate.failed", "version": 1, "timestamp": chrono::Utc::now(),
        "data": {"debate_id": "0f9a9d0e-1b5c-4c7e-9d3a-2b8f6e4a1c77", "topic": "Deliveries per second?",
        "status": "failed", "reason": "bench", "failed_at": chrono::Utc::now()}})
    .to_string();
    counter.reset(count);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CONCURRENCY {
        let (url, body, next) = (url.to_owned(), body.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            while next.fetch_add(1, Ordering::SeqCst) < count {
                let response = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("webhook-id", "msg_bench")
                    .body(body.clone())
                    .send()
                    .await
                    .unwrap();
                response.bytes().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    count as f64 / started.elapsed().as_secs_f64()
}

async fn run(name: &str, database_url: Option<String>) {
    let counter = Arc::new(Counter {
        count: AtomicUsize::new(0),
        target: AtomicUsize::new(usize::MAX),
        reached: Notify::new(),
    });
    let url = receiver(counter.clone()).await;
    let service = Service::start(&VARS, database_url, None).await;
    let (owner, token) = user(&service.base).await;
    for _ in 0..SUBSCRIPTIONS {
        let body = json!({"url": url, "events": ["debate.failed"]});
        call(
            reqwest::Method::POST,
            &format!("{}/api/webhooks", service.base),
            Some(&token),
            body,
        )
        .await;
    }
    let events = setting("AGON_BENCH_WEBHOOK_EVENTS", 500) as usize;
    let deliveries = events * SUBSCRIPTIONS;
    counter.reset(deliveries);
    let started = Instant::now();
    for i in 0..events {
        service
            .log
            .append(&debate(&format!("hook-bench-{i}"), &owner))
            .await
            .unwrap();
    }
    let committed = started.elapsed();
    assert!(
        reached(&counter).await,
        "deliveries stopped at {}",
        counter.count.load(Ordering::SeqCst)
    );
    let rate = deliveries as f64 / started.elapsed().as_secs_f64();
    let plain = baseline(&counter, &url, deliveries).await;
    println!(
        "{name:<18} {deliveries} deliveries ({events} events x {SUBSCRIPTIONS} subscriptions, committed in {:.2} s): {rate:>7.0} deliveries/s  | plain POSTs, {CONCURRENCY} clients: {plain:>7.0} req/s  ratio {:.3}",
        committed.as_secs_f64(),
        rate / plain,
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
