//! Connections: stalled clients (the slowloris pattern) cannot take the
//! service from everyone; excess connections are refused at once; stalled
//! ones are closed after the header or idle timeout; memory stays bounded.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::binary::Serve;

/// Connections the attacker opens, from 127.0.0.2.
const STALLED: usize = 3000;
const PER_ADDRESS: usize = 2000;

async fn connect_from(source: [u8; 4], port: u16) -> Option<TcpStream> {
    let socket = TcpSocket::new_v4().ok()?;
    socket.bind(SocketAddr::from((source, 0))).ok()?;
    socket
        .connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .ok()
}

/// What the server says within `wait`: `Some(text)` (empty when it closed
/// the connection), `None` when it said nothing.
async fn answer(stream: &mut TcpStream, wait: Duration) -> Option<String> {
    let mut buf = vec![0_u8; 4096];
    match tokio::time::timeout(wait, stream.read(&mut buf)).await {
        Ok(Ok(n)) => Some(String::from_utf8_lossy(&buf[..n]).into_owned()),
        Ok(Err(_)) => Some(String::new()),
        Err(_) => None,
    }
}

/// How many of `streams` answer within `wait` with a text that `counts`.
async fn count_answers<'a>(
    streams: impl Iterator<Item = &'a mut TcpStream>,
    wait: Duration,
    counts: impl Fn(&str) -> bool,
) -> usize {
    let mut counted = 0;
    for stream in streams {
        if let Some(text) = answer(stream, wait).await
            && counts(&text)
        {
            counted += 1;
        }
    }
    counted
}

/// The status of `GET /api/health`.
async fn health(client: &reqwest::Client, base: &str) -> reqwest::StatusCode {
    client
        .get(format!("{base}/api/health"))
        .send()
        .await
        .unwrap()
        .status()
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stalled_connections_do_not_lock_out_other_clients() {
    // Both ends of every connection live on this machine: make room for
    // them where the hard limit allows (the server inherits the limit).
    let _ = std::process::Command::new("prlimit")
        .args([
            "--pid",
            &std::process::id().to_string(),
            "--nofile=65536:65536",
        ])
        .status();
    let dir = tempfile::tempdir().unwrap();
    let served = Serve::on_free_ports()
        .data_dir(dir.path())
        .env("SERVICE_LOG_LEVEL", "ERROR")
        .env("SERVICE_HTTP_HEADER_TIMEOUT_SECONDS", "5")
        .env("SERVICE_HTTP_IDLE_TIMEOUT_SECONDS", "6")
        .env("SERVICE_MAX_CONNECTIONS", "4000")
        .env("SERVICE_MAX_CONNECTIONS_PER_IP", PER_ADDRESS.to_string())
        .start()
        .await;
    let (port, pid, base) = (served.port, served.pid(), &served.base);
    let client = reqwest::Client::new();
    assert_eq!(health(&client, base).await, 200);
    let rss_before = rss_kib(pid);

    // Half send an unfinished request head, half send nothing at all.
    let mut stalled = Vec::new();
    for i in 0..STALLED {
        let Some(mut stream) = connect_from([127, 0, 0, 2], port).await else {
            continue;
        };
        if i % 2 == 0 {
            let _ = stream
                .write_all(b"GET /api/health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                .await;
        }
        stalled.push(stream);
    }
    assert!(stalled.len() > PER_ADDRESS, "opened {}", stalled.len());

    // The connections past the per-address cap were refused at once (the
    // second lets a loaded machine's accept loop reach the last of them).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let refused = count_answers(
        stalled.iter_mut().rev().take(STALLED - PER_ADDRESS),
        Duration::from_secs(2),
        |text| text.starts_with("HTTP/1.1 503"),
    )
    .await;
    assert!(
        refused >= (STALLED - PER_ADDRESS) * 9 / 10,
        "only {refused} of the excess connections were refused"
    );

    // Everyone else is still served: health, a registration and a sign-in.
    assert_eq!(health(&client, base).await, 200);
    let account =
        json!({"email": "still-served@example.com", "password": "correct horse 1", "name": "S"});
    let registered = client
        .post(format!("{base}/api/auth/register"))
        .json(&account)
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), 201);
    let login = client
        .post(format!("{base}/api/auth/login"))
        .json(&json!({"email": account["email"], "password": account["password"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200);
    let tokens: Value = login.json().await.unwrap();
    assert!(tokens["access_token"].is_string());

    let rss_during = rss_kib(pid);
    eprintln!(
        "RSS {rss_before} KiB idle, {rss_during} KiB holding {PER_ADDRESS} stalled connections"
    );
    // Bounded by the caps: at most 48 KiB for each connection held (about
    // 32 KiB measured), nothing for the refused ones.
    let budget = 48 * PER_ADDRESS as u64;
    assert!(
        rss_during < rss_before + budget,
        "RSS grew from {rss_before} KiB to {rss_during} KiB for {PER_ADDRESS} stalled connections"
    );

    // The held ones are closed once the header and idle timeouts pass.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let closed = count_answers(
        stalled.iter_mut().take(100),
        Duration::from_secs(2),
        |text| !text.starts_with("HTTP/1.1 200"),
    )
    .await;
    assert_eq!(
        closed, 100,
        "stalled connections still open after the timeouts"
    );
    drop(stalled);

    // A kept-alive client is served again after its idle connection closed.
    assert_eq!(health(&client, base).await, 200);
}
