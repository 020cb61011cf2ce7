//! `/api/health/detailed` after traffic: projections whose checkpoint sits
//! below the feed head only because the events since are ones they ignore
//! read caught up.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::serve::spawn_with;
use crate::support::accounts::call;
use crate::support::{Kind, TEST_TOKEN, on_both_backends};

on_both_backends! {
    idle_projections_read_caught_up_after_traffic => idle_projections_read_caught_up;
}

async fn detailed(base: &str) -> Value {
    let url = format!("{base}/api/health/detailed");
    let (status, body) = call(Method::GET, &url, Some(TEST_TOKEN), None).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn idle_projections_read_caught_up(kind: Kind) {
    let mut vars = crate::auth::ROOMY.to_vec();
    vars.push(("SERVICE_RATE_LIMIT_DEBATE_CREATE", "1000000"));
    let app = spawn_with(kind, &vars).await;
    let base = &app.base;
    // Debate traffic: many events the account, session and organization
    // projections ignore, arriving within a second of each other.
    let mut ids = Vec::new();
    for n in 0..3 {
        let body =
            json!({"topic": format!("Idle {n}"), "agents": ["demo-a", "demo-b"], "rounds": 1});
        let url = format!("{base}/api/debates");
        let (status, created) = call(Method::POST, &url, Some(TEST_TOKEN), Some(body)).await;
        assert_eq!(status, 201, "{created}");
        ids.push(created["id"].as_str().unwrap().to_owned());
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    for id in &ids {
        loop {
            let url = format!("{base}/api/debates/{id}");
            let (_, debate) = call(Method::GET, &url, Some(TEST_TOKEN), None).await;
            if debate["status"] == "completed" {
                break;
            }
            assert!(Instant::now() < deadline, "{debate}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // Idle now: within a few seconds every projection reads caught up, and
    // stays so although some checkpoints stay below the head.
    let mut health = detailed(base).await;
    let caught_up = |h: &Value| {
        h["projections"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["behind"] == false)
    };
    while !caught_up(&health) {
        assert!(Instant::now() < deadline, "{health}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        health = detailed(base).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let later = detailed(base).await;
    assert!(caught_up(&later), "{later}");
    let head = later["database"]["head_position"].as_i64().unwrap();
    for projection in later["projections"].as_array().unwrap() {
        let checkpoint = projection["checkpoint_position"].as_i64().unwrap();
        assert!(checkpoint <= head, "{later}");
    }
    app.stop.cancel();
}
