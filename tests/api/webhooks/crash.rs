//! A kill -9 of the real binary while a delivery is in flight: after a
//! restart every event still reaches the receiver, and the one in flight is
//! sent again (it stayed pending until a response was recorded).

use std::collections::BTreeSet;
use std::time::Duration;

use reqwest::Method;

use super::{QUICK, Receiver, Reply, User, verifies};
use crate::support::binary::{Serve, Served};
use crate::support::{Kind, on_both_backends};

on_both_backends! {
    every_event_arrives_after_a_kill_during_delivery => every_event_arrives_after_a_kill_during_delivery;
}

async fn start(dir: &std::path::Path, database_url: Option<&str>) -> Served {
    let mut serve = Serve::on_free_ports()
        .loopback()
        .data_dir(dir)
        .env("SERVICE_LOG_LEVEL", "WARNING")
        .envs(crate::auth::ROOMY)
        .env("SERVICE_RATE_LIMIT_DEBATE_CREATE", "1000000")
        .envs(QUICK)
        // Slow answers must finish within the timeout.
        .env("SERVICE_WEBHOOK_TIMEOUT_SECONDS", "5")
        .stderr(std::process::Stdio::null());
    if let Some(url) = database_url {
        serve = serve.env("DATABASE_URL", url);
    }
    serve.start().await
}

async fn every_event_arrives_after_a_kill_during_delivery(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let database_url = match kind {
        Kind::Sqlite => None,
        Kind::Postgres => Some(crate::support::fresh_postgres_database().await),
    };
    let (receiver, url) = Receiver::start(&[]).await;
    receiver.answer_from_now(Reply::Slow(Duration::from_secs(2)));
    let mut served = start(dir.path(), database_url.as_deref()).await;
    let alice = User::new(&served.base, "frank@example.com").await;
    let (id, secret) = alice.subscribe(&url).await;
    alice.debate("First").await;
    alice.debate("Second").await;

    // Killed while the receiver is still answering the first delivery.
    let in_flight = receiver
        .wait("a delivery in flight", |seen| !seen.is_empty())
        .await[0]
        .id
        .clone();
    served.kill_hard().await;
    let restarted = start(dir.path(), database_url.as_deref()).await;
    let alice = User {
        base: restarted.base.clone(),
        token: alice.token,
    };

    let seen = receiver
        .wait("every event, and the interrupted one again", |seen| {
            let ids: BTreeSet<&str> = seen.iter().map(|r| r.id.as_str()).collect();
            ids.len() == 4 && seen.iter().filter(|r| r.id == in_flight).count() >= 2
        })
        .await;
    assert!(seen.iter().all(|r| verifies(&secret, r)));
    let kinds: Vec<String> = seen
        .iter()
        .map(|r| r.json()["type"].as_str().unwrap().to_owned())
        .collect();
    for kind in ["debate.verdict", "debate.completed"] {
        assert_eq!(
            seen.iter()
                .filter(|r| r.json()["type"] == kind)
                .map(|r| r.id.as_str())
                .collect::<BTreeSet<_>>()
                .len(),
            2,
            "{kinds:?}"
        );
    }
    // The service records every one as delivered.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let list = alice.deliveries(&id).await;
        let statuses: Vec<&str> = list["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["status"].as_str().unwrap())
            .collect();
        if statuses.len() == 4 && statuses.iter().all(|s| *s == "delivered") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, _) = alice
        .call(Method::GET, &format!("/api/webhooks/{id}"), None)
        .await;
    assert_eq!(status, 200);
}
