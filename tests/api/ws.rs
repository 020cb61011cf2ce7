//! The WebSocket push end to end, with a real WebSocket client
//! (tokio-tungstenite): following a demo debate from create to
//! `debate_end`, resuming with `since`, ended debates, access rules,
//! credentials, the slow-consumer cut-off, and health and the gauge on the
//! real binary's `--ws-port`. PostgreSQL runs with a real nats-server.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::schemas::{Seen, conforms};
use crate::serve::{Spawned, spawn_with};
use crate::support::accounts::{call, signed_in};
use crate::support::binary::Serve;
use crate::support::{Kind, LoopbackServer, TEST_TOKEN, on_both_backends};

mod access;
mod heartbeat;

pub(crate) type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

on_both_backends! {
    follow_resume_and_ended => follow_resume_and_ended;
    slow_client_is_cut_off => slow_client_is_cut_off;
}

/// A service (with NATS on PostgreSQL) and its `ws://` base.
pub(crate) struct Live {
    pub(crate) app: Spawned,
    pub(crate) ws: String,
    _nats: Option<LoopbackServer>,
}

pub(crate) async fn live(kind: Kind, extra: &[(&str, &str)]) -> Live {
    let nats = match kind {
        Kind::Postgres => Some(LoopbackServer::nats().await),
        Kind::Sqlite => None,
    };
    let url = nats.as_ref().map(LoopbackServer::url);
    let mut vars = crate::auth::ROOMY.to_vec();
    vars.push(("SERVICE_RATE_LIMIT_DEBATE_CREATE", "1000000"));
    // The first of a name wins: `extra` before the defaults.
    vars.splice(0..0, extra.iter().copied());
    vars.push(("SERVICE_WS_MAX_CONNECTIONS_FREE", "50"));
    if let Some(url) = &url {
        vars.push(("SERVICE_NATS_URL", url));
    }
    let app = spawn_with(kind, &vars).await;
    let ws = app.base.replace("http://", "ws://");
    Live {
        app,
        ws,
        _nats: nats,
    }
}

pub(crate) async fn connect(url: &str) -> Socket {
    let (socket, response) = tokio_tungstenite::connect_async(url).await.unwrap();
    assert_eq!(response.status(), 101);
    socket
}

/// The HTTP status a refused handshake answered.
async fn refused(request: impl IntoClientRequest + Unpin) -> u16 {
    refused_response(request).await.status().as_u16()
}

/// The answer to a refused handshake.
async fn refused_response(
    request: impl IntoClientRequest + Unpin,
) -> tokio_tungstenite::tungstenite::http::Response<Option<Vec<u8>>> {
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => *response,
        other => panic!("the handshake was not refused: {:?}", other.map(|r| r.1)),
    }
}

/// The next JSON frame (60 s at most); `None` once the server closed.
pub(crate) async fn next(socket: &mut Socket) -> Option<Value> {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(60), socket.next())
            .await
            .expect("no frame within 60 s");
        match message {
            Some(Ok(Message::Text(text))) => return Some(serde_json::from_str(&text).unwrap()),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            Some(Ok(Message::Close(_)) | Err(_)) | None => return None,
            Some(Ok(other)) => panic!("unexpected message {other:?}"),
        }
    }
}

/// Frames of debate `id` up to and including its `debate_end`.
async fn until_end(socket: &mut Socket, id: &str) -> Vec<Value> {
    let mut frames = Vec::new();
    loop {
        let frame = next(socket).await.expect("closed before debate_end");
        // Streamed text is not in the log (`deltas.rs` checks it).
        if frame["debate_id"] != id || frame["type"] == "agent.delta" {
            continue;
        }
        let end = frame["type"] == "debate_end";
        frames.push(frame);
        if end {
            return frames;
        }
    }
}

pub(crate) async fn demo(base: &str, token: &str, topic: &str) -> String {
    let body = json!({"topic": topic, "agents": ["demo-a", "demo-b", "demo-c"], "rounds": 2});
    let url = format!("{base}/api/debates");
    let (status, created) = call(Method::POST, &url, Some(token), Some(body)).await;
    assert_eq!(status, 201, "{created}");
    created["id"].as_str().unwrap().to_owned()
}

pub(crate) fn schema(kind: &str) -> Value {
    let path = format!(
        "{}/event-schemas/ws/{kind}.v1.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn kinds(frames: &[Value]) -> Vec<&str> {
    frames.iter().map(|f| f["type"].as_str().unwrap()).collect()
}

async fn follow_resume_and_ended(kind: Kind) {
    let live = live(kind, &[]).await;
    let mut watcher = connect(&format!("{}/ws?token={TEST_TOKEN}&all=true", live.ws)).await;
    let id = demo(&live.app.base, TEST_TOKEN, "Tabs or spaces?").await;
    let frames = until_end(&mut watcher, &id).await;

    let types = kinds(&frames);
    assert_eq!(types[0], "debate_start", "{types:?}");
    assert_eq!(types[1], "round_start", "{types:?}");
    for expected in [
        "agent_message",
        "critique",
        "synthesis",
        "vote",
        "consensus",
    ] {
        assert!(types.contains(&expected), "no {expected} in {types:?}");
    }
    assert_eq!(types.iter().filter(|t| **t == "round_start").count(), 2);
    assert_eq!(frames.last().unwrap()["data"]["status"], "completed");
    let positions: Vec<i64> = frames
        .iter()
        .map(|f| f["position"].as_i64().unwrap())
        .collect();
    assert!(positions.windows(2).all(|w| w[0] <= w[1]), "{positions:?}");
    for frame in &frames {
        let kind = frame["type"].as_str().unwrap();
        if let Err(e) = conforms(frame, &schema(kind), "frame", "#", &mut Seen::default()) {
            panic!("{kind}: {e}\n{frame}");
        }
    }

    // Reconnecting after the middle frame's event gives exactly the rest.
    let middle = positions[positions.len() / 2];
    let rest: Vec<Value> = frames
        .iter()
        .filter(|f| f["position"].as_i64().unwrap() > middle)
        .cloned()
        .collect();
    let url = format!("{}/ws?token={TEST_TOKEN}&all=true&since={middle}", live.ws);
    let mut resumed = connect(&url).await;
    assert_eq!(until_end(&mut resumed, &id).await, rest);

    // An ended debate answers its outcome at once.
    let mut late = connect(&format!("{}/ws?token={TEST_TOKEN}&debate_id={id}", live.ws)).await;
    let outcome = [
        next(&mut late).await.unwrap(),
        next(&mut late).await.unwrap(),
    ];
    assert_eq!(outcome.as_slice(), &frames[frames.len() - 2..]);
    assert_eq!(kinds(&outcome), ["consensus", "debate_end"]);

    // Application ping; then a subscribe by message to a debate that runs.
    late.send(Message::text(r#"{"type":"ping"}"#))
        .await
        .unwrap();
    assert_eq!(next(&mut late).await.unwrap()["type"], "pong");
    let second = demo(&live.app.base, TEST_TOKEN, "Vim or Emacs?").await;
    let subscribe = json!({"type": "subscribe", "debate_id": second}).to_string();
    late.send(Message::text(subscribe)).await.unwrap();
    let followed = until_end(&mut late, &second).await;
    assert_eq!(followed.last().unwrap()["type"], "debate_end");
    let stats = crate::support::accounts::admin_get(&live.app.base, "/api/ws/stats").await;
    assert!(
        stats["messages_sent"].as_u64().unwrap() >= frames.len() as u64,
        "{stats}"
    );
    live.app.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn users_see_only_what_they_may_read_and_credentials_are_checked() {
    let live = live(Kind::Sqlite, &[("SERVICE_WS_MAX_CONNECTIONS_FREE", "2")]).await;
    let base = &live.app.base;
    let (_, alice, _) = signed_in(base, "alice@example.com").await;
    let (_, bob, _) = signed_in(base, "bob@example.com").await;
    let private = demo(base, &alice, "Alice's private question").await;

    // By id in the query, and by a subscribe message: not found for Bob.
    let url = format!("{}/ws?token={bob}&debate_id={private}", live.ws);
    let mut socket = connect(&url).await;
    let refused_frame = next(&mut socket).await.unwrap();
    assert_eq!(refused_frame["type"], "error");
    assert_eq!(refused_frame["data"]["code"], "not_found");
    let subscribe = json!({"type": "subscribe", "debate_id": private}).to_string();
    socket.send(Message::text(subscribe)).await.unwrap();
    assert_eq!(
        next(&mut socket).await.unwrap()["data"]["code"],
        "not_found"
    );
    socket.send(Message::text("not json")).await.unwrap();
    assert_eq!(
        next(&mut socket).await.unwrap()["data"]["code"],
        "bad_message"
    );

    // Subscribed to all he may read, Bob sees his own debate and never Alice's.
    socket
        .send(Message::text(r#"{"type":"subscribe"}"#))
        .await
        .unwrap();
    let ping_pong = r#"{"type":"ping"}"#;
    socket.send(Message::text(ping_pong)).await.unwrap();
    assert_eq!(next(&mut socket).await.unwrap()["type"], "pong");
    let hidden = demo(base, &alice, "Alice again").await;
    let own = demo(base, &bob, "Bob's own").await;
    loop {
        let frame = next(&mut socket).await.unwrap();
        assert_ne!(frame["debate_id"], hidden, "{frame}");
        if frame["debate_id"] == own && frame["type"] == "debate_end" {
            break;
        }
    }

    // The tier cap (2 here): a third socket of Bob's is refused, as a
    // limit (429 in the rate-limit form, with Retry-After), not a permission.
    let mut second = connect(&format!("{}/ws?token={bob}", live.ws)).await;
    let over = refused_response(format!("{}/ws?token={bob}", live.ws)).await;
    assert_eq!(over.status(), 429);
    assert_eq!(over.headers()["retry-after"], "30", "the heartbeat");
    let body: Value = serde_json::from_slice(over.body().as_deref().unwrap()).unwrap();
    assert_eq!(body["code"], "RATE_LIMIT_EXCEEDED", "{body}");
    assert_eq!(body["limit"], 2, "{body}");
    assert_eq!(body["retry_after"], 30, "{body}");
    second.close(None).await.unwrap();

    // Bad credentials and foreign origins are refused before the upgrade.
    drop(socket);
    assert_eq!(
        refused(format!("{}/ws?token=not-a-token", live.ws)).await,
        401
    );
    assert_eq!(refused(format!("{}/ws", live.ws)).await, 401);
    let mut foreign = format!("{}/ws?token={TEST_TOKEN}", live.ws)
        .into_client_request()
        .unwrap();
    foreign
        .headers_mut()
        .insert("origin", "https://evil.example".parse().unwrap());
    assert_eq!(refused(foreign).await, 403);

    // A browser: the token in the subprotocol, or a one-use ticket.
    let mut browser = format!("{}/ws", live.ws).into_client_request().unwrap();
    let offer = format!("agon.v1, bearer.{TEST_TOKEN}");
    browser
        .headers_mut()
        .insert("sec-websocket-protocol", offer.parse().unwrap());
    let (mut socket, response) = tokio_tungstenite::connect_async(browser).await.unwrap();
    assert_eq!(response.headers()["sec-websocket-protocol"], "agon.v1");
    socket.send(Message::text(ping_pong)).await.unwrap();
    assert_eq!(next(&mut socket).await.unwrap()["type"], "pong");
    let url = format!("{base}/api/ws/ticket");
    let (status, ticket) = call(Method::POST, &url, Some(&alice), None).await;
    assert_eq!(status, 200, "{ticket}");
    let ticket = ticket["ticket"].as_str().unwrap().to_owned();
    let url = format!("{}/ws?ticket={ticket}&debate_id={private}", live.ws);
    let mut by_ticket = connect(&url).await;
    let frames = until_end(&mut by_ticket, &private).await;
    assert_eq!(frames.last().unwrap()["data"]["status"], "completed");
    assert_eq!(refused(url).await, 401, "a ticket is good once");
    live.app.stop.cancel();
}

/// A socket whose owner never reads, with a small receive window.
async fn never_reading(url: &str) -> Socket {
    let address = url
        .trim_start_matches("ws://")
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(address).await.unwrap();
    let (socket, _) = tokio_tungstenite::client_async(url, MaybeTlsStream::Plain(stream))
        .await
        .unwrap();
    socket
}

async fn slow_client_is_cut_off(kind: Kind) {
    let live = live(kind, &[("SERVICE_WS_SEND_BUFFER", "64")]).await;
    let url = format!("{}/ws?token={TEST_TOKEN}&all=true", live.ws);
    let mut slow = never_reading(&url).await;
    let mut fast = connect(&url).await;
    let topic = "x".repeat(1_500);
    let mut dropped = 0;
    for n in 0..300 {
        let id = demo(&live.app.base, TEST_TOKEN, &format!("{n} {topic}")).await;
        // The fast client keeps up with every debate, whatever the slow one does.
        let frames = until_end(&mut fast, &id).await;
        assert_eq!(frames[0]["type"], "debate_start");
        let stats = crate::support::accounts::admin_get(&live.app.base, "/api/ws/stats").await;
        dropped = stats["dropped_slow_clients"].as_u64().unwrap();
        if dropped > 0 {
            break;
        }
    }
    assert_eq!(dropped, 1, "the slow client was never cut off");
    // On its way from half full to full, its buffer took no more streamed
    // text: pieces are dropped (and counted) before a client is cut off.
    let stats = crate::support::accounts::admin_get(&live.app.base, "/api/ws/stats").await;
    assert!(stats["dropped_deltas"].as_u64().unwrap() > 0, "{stats}");
    // What reached the slow client's buffers ends with the slow-consumer close.
    let mut close = None;
    while let Ok(Some(message)) = tokio::time::timeout(Duration::from_secs(30), slow.next()).await {
        match message {
            Ok(Message::Close(frame)) => {
                close = frame;
                break;
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    if let Some(frame) = close {
        assert_eq!(u16::from(frame.code), 4008);
    }
    live.app.stop.cancel();
}

#[tokio::test]
async fn health_and_the_gauge_count_open_sockets_on_both_ports() {
    let dir = tempfile::tempdir().unwrap();
    let served = Serve::on_free_ports()
        .data_dir(dir.path())
        .env("SERVICE_API_TOKEN", TEST_TOKEN)
        .env("SERVICE_WS_MAX_CONNECTIONS_FREE", "5")
        .env("SERVICE_LOG_LEVEL", "DEBUG")
        .stderr(std::process::Stdio::piped())
        .start()
        .await;
    let base = served.base.clone();
    let health = |expected: u64| {
        let base = base.clone();
        async move {
            for _ in 0..400 {
                let (status, body) =
                    call(Method::GET, &format!("{base}/api/health/ws"), None, None).await;
                assert_eq!(status, 200);
                assert_eq!(body["status"], "healthy", "{body}");
                let metrics = crate::support::client()
                    .get(format!("{base}/metrics"))
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap();
                let gauge = format!("service_websocket_connections {expected}\n");
                let zero = expected == 0 && !metrics.contains("service_websocket_connections ");
                if body["clients"] == expected && (zero || metrics.contains(&gauge)) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            panic!("health and the gauge never showed {expected} sockets");
        }
    };
    health(0).await;
    let ws_port = format!("ws://127.0.0.1:{}/ws?token={TEST_TOKEN}", served.ws_port);
    let mut on_ws_port = connect(&ws_port).await;
    let api_port = format!("ws://127.0.0.1:{}/ws?token={TEST_TOKEN}", served.port);
    let mut on_api_port = connect(&api_port).await;
    health(2).await;
    on_ws_port
        .send(Message::text(r#"{"type":"ping"}"#))
        .await
        .unwrap();
    assert_eq!(next(&mut on_ws_port).await.unwrap()["type"], "pong");
    on_ws_port.close(None).await.unwrap();
    health(1).await;
    on_api_port.close(None).await.unwrap();
    health(0).await;
    let output = served.stop(Duration::from_secs(20)).await;
    let logged = String::from_utf8_lossy(&output.stderr);
    assert!(logged.contains("/ws"), "the upgrade is logged by path");
    assert!(
        !logged.contains(TEST_TOKEN),
        "a query string reached the log"
    );
}
