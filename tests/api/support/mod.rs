//! Shared helpers: fresh databases per test, a small aggregate, a recording
//! consumer, and process helpers for the real binary and nats-server.

pub mod accounts;
pub mod binary;
pub mod idp;
pub mod provider;
pub mod smtp;
pub mod sse;
pub mod tally;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agon::bus::{Consumer, ConsumerError};
use agon::store::{Db, EventLog, StoreError};
use agon_projections::{Cursor, EventRecord};
use async_trait::async_trait;
use cqrs_es::persist::SerializedEvent;
use serde_json::json;
use sqlx::Connection;
use tempfile::TempDir;

/// Which back end a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
}

/// A fresh, empty event store.
pub struct TestStore {
    pub kind: Kind,
    pub log: EventLog,
    pub dir: TempDir,
    /// The PostgreSQL URL of this test's own database.
    pub database_url: Option<String>,
}

pub fn admin_url() -> String {
    std::env::var("AGON_TEST_DATABASE_URL")
        .expect("AGON_TEST_DATABASE_URL is not set: run the tests through ops/test.sh")
}

/// Creates an empty PostgreSQL database for one test and returns its URL.
pub async fn fresh_postgres_database() -> String {
    let admin = admin_url();
    let name = format!("agon_test_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    let base = admin.rsplit_once('/').unwrap().0;
    format!("{base}/{name}")
}

pub async fn fresh(kind: Kind) -> TestStore {
    let dir = tempfile::tempdir().unwrap();
    let (db, database_url) = match kind {
        Kind::Sqlite => (Db::open_sqlite(dir.path()).await.unwrap(), None),
        Kind::Postgres => {
            let url = fresh_postgres_database().await;
            (Db::connect_postgres(&url, 24).await.unwrap(), Some(url))
        }
    };
    TestStore {
        kind,
        log: EventLog::new(db),
        dir,
        database_url,
    }
}

/// Runs an async test body once per back end.
macro_rules! on_both_backends {
    ($($name:ident => $body:ident;)+) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn sqlite() {
                    super::$body($crate::support::Kind::Sqlite).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn postgres() {
                    super::$body($crate::support::Kind::Postgres).await;
                }
            }
        )+
    };
}
pub(crate) use on_both_backends;

/// One event for `stream` at `sequence`, as cqrs-es would hand it to the store.
pub fn event(aggregate_type: &str, aggregate_id: &str, sequence: usize) -> SerializedEvent {
    SerializedEvent {
        aggregate_id: aggregate_id.to_owned(),
        sequence,
        aggregate_type: aggregate_type.to_owned(),
        event_type: "Added".to_owned(),
        event_version: "1".to_owned(),
        payload: json!({"Added": {"n": sequence, "note": "x".repeat(200)}}),
        metadata: json!({"actor": "test"}),
    }
}

/// Appends `count` single-event commands to one stream, from sequence 1.
pub async fn fill_stream(log: &EventLog, aggregate_type: &str, aggregate_id: &str, count: usize) {
    fill_range(log, aggregate_type, aggregate_id, 1..=count).await;
}

/// Appends one single-event command per sequence in `sequences` to one stream.
pub async fn fill_range(
    log: &EventLog,
    aggregate_type: &str,
    aggregate_id: &str,
    sequences: std::ops::RangeInclusive<usize>,
) {
    for sequence in sequences {
        log.append(&[event(aggregate_type, aggregate_id, sequence)])
            .await
            .unwrap();
    }
}

/// `streams` concurrent writers, each filling its own stream `<prefix><n>`
/// with `per_stream` events; returns when all are done.
pub async fn write_concurrently(log: &EventLog, prefix: &str, streams: usize, per_stream: usize) {
    let writers: Vec<_> = (0..streams)
        .map(|n| {
            let (log, id) = (log.clone(), format!("{prefix}{n}"));
            tokio::spawn(async move { fill_stream(&log, "tally", &id, per_stream).await })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
}

/// A consumer that remembers every event it is handed and checkpoints in the store.
pub struct Recorder {
    name: String,
    log: EventLog,
    pub seen: Mutex<Vec<EventRecord>>,
}

impl Recorder {
    pub fn new(name: &str, log: &EventLog) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_owned(),
            log: log.clone(),
            seen: Mutex::default(),
        })
    }

    pub fn seen(&self) -> Vec<EventRecord> {
        self.seen.lock().unwrap().clone()
    }

    /// Waits until the recorder holds `count` distinct events, at most `limit`.
    pub async fn wait_for(&self, count: usize, limit: Duration) -> Vec<EventRecord> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let seen = self.seen();
            let distinct: std::collections::HashSet<&str> =
                seen.iter().map(|e| e.event_id.as_str()).collect();
            if distinct.len() >= count || tokio::time::Instant::now() > deadline {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[async_trait]
impl Consumer for Recorder {
    fn name(&self) -> &str {
        &self.name
    }

    async fn checkpoint(&self) -> Result<Cursor, StoreError> {
        self.log.load_checkpoint(&self.name).await
    }

    async fn handle(&self, batch: &[EventRecord]) -> Result<(), ConsumerError> {
        self.seen.lock().unwrap().extend_from_slice(batch);
        if let Some(last) = batch.last() {
            self.log.save_checkpoint(&self.name, last.cursor).await?;
        }
        Ok(())
    }

    async fn pass(&self, event: &EventRecord) -> Result<(), StoreError> {
        self.log.save_checkpoint(&self.name, event.cursor).await
    }

    async fn retry(&self, event: &EventRecord) -> Result<(), ConsumerError> {
        self.seen.lock().unwrap().push(event.clone());
        Ok(())
    }
}

/// Asserts that `seen` holds each of `expected` events exactly once after
/// dropping duplicates, and every stream in sequence order.
pub fn assert_complete_and_ordered(seen: &[EventRecord], streams: usize, per_stream: i64) {
    let mut first_seen = std::collections::HashSet::new();
    let mut last_sequence: std::collections::HashMap<String, i64> =
        std::collections::HashMap::new();
    for event in seen {
        if !first_seen.insert(event.event_id.clone()) {
            continue;
        }
        let last = last_sequence.entry(event.stream()).or_insert(0);
        assert_eq!(
            event.sequence,
            *last + 1,
            "stream {} out of order",
            event.stream()
        );
        *last = event.sequence;
    }
    assert_eq!(last_sequence.len(), streams, "streams seen");
    assert!(
        last_sequence.values().all(|s| *s == per_stream),
        "every stream complete"
    );
    assert_eq!(
        first_seen.len(),
        streams * usize::try_from(per_stream).unwrap()
    );
}

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// How long a process may take to listen: a store recovering after a
/// SIGKILL, on a machine busy with other tests, has taken more than ten
/// seconds.
const STARTUP: Duration = Duration::from_secs(60);

/// Waits until something accepts TCP connections on `port`.
pub async fn wait_for_port(port: u16) {
    listening(port, || None).await;
}

/// Waits until a process accepts TCP connections on `port`; when `exited`
/// reports (with its status) that the process ended first, the test fails
/// at once.
pub async fn listening(port: u16, mut exited: impl FnMut() -> Option<String>) {
    let deadline = tokio::time::Instant::now() + STARTUP;
    loop {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        if let Some(status) = exited() {
            panic!("the process exited before it listened on port {port}: {status}");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "nothing listens on port {port} after {STARTUP:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The first `count` feed events, waiting while PostgreSQL's feed horizon is
/// held back by transactions still in flight elsewhere on the server (other
/// tests' databases share it).
pub async fn settled_feed(log: &EventLog, count: usize) -> Vec<agon::store::StoredEvent> {
    for _ in 0..500 {
        let feed = log
            .read_feed(Cursor::START, i64::try_from(count).unwrap() + 100)
            .await
            .unwrap();
        if feed.len() >= count {
            return feed;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the feed never reached {count} events");
}

/// A server binary of the test's own (nats-server, redis-server) on a free
/// loopback port with a private data directory; restartable, killed on drop.
pub struct LoopbackServer {
    pub port: u16,
    /// Held so the data directory lives as long as the server.
    _dir: tempfile::TempDir,
    scheme: &'static str,
    command: Vec<String>,
    child: Option<std::process::Child>,
}

impl LoopbackServer {
    /// nats-server with JetStream (`AGON_TEST_NATS_SERVER` names the binary).
    pub async fn nats() -> Self {
        Self::start(
            "nats",
            "AGON_TEST_NATS_SERVER",
            "nats-server",
            |port, dir| {
                vec![
                    "-js".into(),
                    "-a".into(),
                    "127.0.0.1".into(),
                    "-p".into(),
                    port.to_string(),
                    "-sd".into(),
                    dir,
                ]
            },
        )
        .await
    }

    /// redis-server without persistence (`AGON_TEST_REDIS_SERVER` names the binary).
    pub async fn redis() -> Self {
        Self::start(
            "redis",
            "AGON_TEST_REDIS_SERVER",
            "redis-server",
            |port, dir| {
                vec![
                    "--port".into(),
                    port.to_string(),
                    "--bind".into(),
                    "127.0.0.1".into(),
                    "--dir".into(),
                    dir,
                    "--save".into(),
                    String::new(),
                    "--appendonly".into(),
                    "no".into(),
                ]
            },
        )
        .await
    }

    pub async fn start(
        scheme: &'static str,
        binary_variable: &str,
        default_binary: &str,
        args: impl Fn(u16, String) -> Vec<String>,
    ) -> Self {
        let port = free_port();
        let dir = tempfile::tempdir().unwrap();
        let binary = std::env::var(binary_variable).unwrap_or_else(|_| default_binary.to_owned());
        let mut command = vec![binary];
        command.extend(args(port, dir.path().to_str().unwrap().to_owned()));
        let mut server = Self {
            port,
            _dir: dir,
            scheme,
            command,
            child: None,
        };
        server.restart().await;
        server
    }

    pub fn url(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.port)
    }

    pub async fn restart(&mut self) {
        let child = std::process::Command::new(&self.command[0])
            .args(&self.command[1..])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "{}: {e}; run the tests through ops/test.sh",
                    self.command[0]
                )
            });
        self.child = Some(child);
        wait_for_port(self.port).await;
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}

impl Drop for LoopbackServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The static API token (`SERVICE_API_TOKEN`, role admin) every test app gets.
pub const TEST_TOKEN: &str = "agon-test-static-api-token-0123456789";

/// An HTTP client that sends [`TEST_TOKEN`] with every request.
pub fn client() -> reqwest::Client {
    client_builder().build().unwrap()
}

/// [`client`]'s builder, for a test that needs another setting (redirects).
pub fn client_builder() -> reqwest::ClientBuilder {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        reqwest::header::HeaderValue::from_static("Bearer agon-test-static-api-token-0123456789"),
    );
    reqwest::Client::builder().default_headers(headers)
}
