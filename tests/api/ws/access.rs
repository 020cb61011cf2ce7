//! REST's access rules over time on the WebSocket push: a socket whose
//! session ends (logout, admin revoke-all, disable) or whose API key is
//! revoked is closed with 4401, and a ticket of an ended session is not
//! redeemable. Both back ends (PostgreSQL with a real nats-server).

use futures::{SinkExt, StreamExt};
use reqwest::Method;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::{Socket, connect, live, next, refused};
use crate::support::accounts::{call, login, signed_in};
use crate::support::{Kind, TEST_TOKEN, on_both_backends};

/// The close code the push sends when the caller's credential ended.
const SESSION_ENDED: u16 = 4401;
/// The close code the push sends when the service stops.
const GOING_AWAY: u16 = 1001;

on_both_backends! {
    ended_sessions_and_keys_close_sockets => ended_sessions_and_keys_close_sockets;
}

/// The close code the server sends (skipping frames and the heartbeat's
/// pings before it), within 60 s in all.
pub(super) async fn close_code(socket: &mut Socket) -> u16 {
    let closed = async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Close(Some(frame)))) => return frame.code.into(),
                Some(Ok(Message::Close(None)) | Err(_)) | None => panic!("closed without a code"),
                Some(Ok(_)) => {}
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), closed)
        .await
        .expect("not closed within 60 s")
}

/// The socket still answers an application ping.
pub(super) async fn answers(socket: &mut Socket) {
    let ping = json!({"type": "ping"}).to_string();
    socket.send(Message::text(ping)).await.unwrap();
    assert_eq!(next(socket).await.expect("closed")["type"], "pong");
}

async fn post(base: &str, path: &str, token: &str, body: Option<Value>) -> Value {
    let (status, body) = call(Method::POST, &format!("{base}{path}"), Some(token), body).await;
    assert!(status < 300, "{path}: {status} {body}");
    body
}

async fn ended_sessions_and_keys_close_sockets(kind: Kind) {
    let live = live(kind, &[]).await;
    let base = &live.app.base;
    let email = "wanda@example.com";
    let (user_id, first, _) = signed_in(base, email).await;
    let session = |body: Value| body["access_token"].as_str().unwrap().to_owned();
    let second = session(login(base, email, "correct horse battery").await);
    let ws = |token: &str| format!("{}/ws?token={token}", live.ws);

    let mut by_first = connect(&ws(&first)).await;
    let mut by_second = connect(&ws(&second)).await;
    let ticket = post(base, "/api/ws/ticket", &first, None).await["ticket"]
        .as_str()
        .unwrap()
        .to_owned();
    let key = post(
        base,
        "/api/auth/api-keys",
        &first,
        Some(json!({"name": "ci"})),
    )
    .await;
    let mut by_key = connect(&ws(key["api_key"].as_str().unwrap())).await;
    answers(&mut by_first).await;

    // Logout ends the first session: its socket and its ticket, not the other.
    post(base, "/api/auth/logout", &first, None).await;
    assert_eq!(close_code(&mut by_first).await, SESSION_ENDED);
    let url = format!("{}/ws?ticket={ticket}", live.ws);
    assert_eq!(refused(url).await, 401, "a ticket of an ended session");
    answers(&mut by_second).await;
    answers(&mut by_key).await;

    // A revoked key closes the socket it opened.
    let key_id = key["key_id"].as_str().unwrap();
    let path = format!("{base}/api/auth/api-keys/{key_id}");
    let (status, body) = call(Method::DELETE, &path, Some(&second), None).await;
    assert!(status < 300, "{status} {body}");
    assert_eq!(close_code(&mut by_key).await, SESSION_ENDED);

    // An admin's revoke-all, then disabling the user.
    let third = session(login(base, email, "correct horse battery").await);
    let mut by_third = connect(&ws(&third)).await;
    post(
        base,
        &format!("/admin/users/{user_id}/revoke-all"),
        TEST_TOKEN,
        None,
    )
    .await;
    assert_eq!(close_code(&mut by_second).await, SESSION_ENDED);
    assert_eq!(close_code(&mut by_third).await, SESSION_ENDED);
    let fourth = session(login(base, email, "correct horse battery").await);
    let mut by_fourth = connect(&ws(&fourth)).await;
    let ticket = post(base, "/api/ws/ticket", &fourth, None).await["ticket"]
        .as_str()
        .unwrap()
        .to_owned();
    post(
        base,
        &format!("/admin/users/{user_id}/disable"),
        TEST_TOKEN,
        None,
    )
    .await;
    assert_eq!(close_code(&mut by_fourth).await, SESSION_ENDED);
    let url = format!("{}/ws?ticket={ticket}", live.ws);
    assert_eq!(refused(url).await, 401, "a ticket of a disabled user");
    live.app.stop.cancel();
}

/// Behind a load balancer without affinity, a browser's ticket may reach
/// another replica than the one that issued it: any replica redeems it,
/// and only once across all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_ticket_from_one_replica_opens_a_socket_on_another_once() {
    let nats = crate::support::LoopbackServer::nats().await;
    let database = crate::support::fresh_postgres_database().await;
    let url = nats.url();
    let mut vars = crate::auth::ROOMY.to_vec();
    vars.push(("SERVICE_NATS_URL", &url));
    let (a, dir_a) = crate::serve::build_app_on(Some(database.clone()), &vars).await;
    let (b, dir_b) = crate::serve::build_app_on(Some(database), &vars).await;
    let (a, b) = (
        crate::serve::serve_app(a, dir_a).await,
        crate::serve::serve_app(b, dir_b).await,
    );
    let (_, token, _) = signed_in(&a.base, "tess@example.com").await;
    let ticket = post(&a.base, "/api/ws/ticket", &token, None).await["ticket"]
        .as_str()
        .unwrap()
        .to_owned();
    let on = |base: &str| format!("{}/ws?ticket={ticket}", base.replace("http://", "ws://"));
    let mut socket = connect(&on(&b.base)).await;
    answers(&mut socket).await;
    assert_eq!(refused(on(&a.base)).await, 401, "redeemed once, on B");
    assert_eq!(refused(on(&b.base)).await, 401);
    a.stop.cancel();
    b.stop.cancel();
}

/// A stopping service closes its sockets with 1001, not as though their
/// credential ended (both end a socket through one token).
#[tokio::test]
async fn a_stopping_service_closes_sockets_as_going_away() {
    let live = live(Kind::Sqlite, &[]).await;
    let mut socket = connect(&format!("{}/ws?token={TEST_TOKEN}&all=true", live.ws)).await;
    answers(&mut socket).await;
    live.app.stop.cancel();
    assert_eq!(close_code(&mut socket).await, GOING_AWAY);
}
