//! `GET /api/debates/{id}?as_of=<position|time>` for auditors: the debate
//! exactly as the live read showed it at that point, rebuilt from the log;
//! 404 before it existed and for callers who may not read it, 400 for an
//! `as_of` of neither form. The debate is held mid-run by a fake provider
//! on loopback, so that its early state is read while it lasts.

use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::providers::serve;
use crate::support::accounts::{call, signed_in};
use crate::support::provider::{Behavior, FakeProvider};
use crate::support::{Kind, on_both_backends};

on_both_backends! {
    a_debate_as_of_a_past_point_is_what_was_shown_then => a_debate_as_of_a_past_point_is_what_was_shown_then;
}

/// GETs `base + path` with `token`.
async fn get(base: &str, path: &str, token: &str) -> (u16, Value) {
    call(Method::GET, &format!("{base}{path}"), Some(token), None).await
}

/// `as_of` for a query string (a time's `+` would read as a space).
fn query(as_of: &str) -> String {
    format!("?as_of={}", as_of.replace('+', "%2B"))
}

/// Waits (45 s at most) until `done` holds.
async fn eventually(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(45);
    while !done().await {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn a_debate_as_of_a_past_point_is_what_was_shown_then(kind: Kind) {
    let fake = FakeProvider::start().await;
    // Every agent call waits for `release`: the debate stays where it is.
    fake.script(|_| Behavior::Held(Box::new(Behavior::Answer)));
    let (app, _nats) = serve(kind, fake.env()).await;
    let base = app.base.clone();
    let (_, alice, _) = signed_in(&base, "alice@example.com").await;
    let (_, bob, _) = signed_in(&base, "bob@example.com").await;
    let body = json!({"topic": "Replayed", "agents": ["claude", "gpt-4o"], "rounds": 1});
    let url = format!("{base}/api/debates");
    let (status, created) = call(Method::POST, &url, Some(&alice), Some(body)).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let detail = format!("/api/debates/{id}");
    let trail = format!("/api/v1/audit-trails/debate:{id}");

    // The early state: an agent call is held, so no event follows until the
    // release. Read it live once the read model has every event so far.
    eventually("an agent is asked", async || !fake.calls().is_empty()).await;
    let (mut early, mut position, mut first) = (Value::Null, 0, Value::Null);
    eventually("the live read shows the latest event", async || {
        let (_, events) = get(&base, &trail, &alice).await;
        let events = events["events"].as_array().cloned().unwrap_or_default();
        let (Some(head), Some(last)) = (events.first(), events.last()) else {
            return false;
        };
        position = last["position"].as_i64().unwrap();
        first = head.clone();
        let (_, live) = get(&base, &detail, &alice).await;
        let (_, then) = get(&base, &format!("{detail}?as_of={position}"), &alice).await;
        early = live;
        early == then
    })
    .await;
    let after_early = Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true);
    assert_eq!(early["status"], "running", "{early}");
    assert_eq!(early["topic"], "Replayed");

    fake.release();
    let mut done = Value::Null;
    eventually("the debate completes", async || {
        (_, done) = get(&base, &detail, &alice).await;
        done["status"] == "completed"
    })
    .await;
    assert_ne!(done, early, "the debate moved on");

    // As of the noted position and time: exactly the early answer, whole.
    // (No field of the detail is computed from the current clock.)
    for as_of in [position.to_string(), after_early.clone()] {
        for path in [
            format!("{detail}{}", query(&as_of)),
            format!("/api/v1/debates/{id}{}", query(&as_of)),
        ] {
            let (status, then) = get(&base, &path, &alice).await;
            assert_eq!((status, &then), (200, &early), "{path}");
        }
        let v2 = format!("/api/v2/debates/{id}{}", query(&as_of));
        let (status, then) = get(&base, &v2, &alice).await;
        assert_eq!((status, &then["data"]), (200, &early), "{v2}: {then}");
    }
    // Without as_of: the completed debate.
    let (status, now) = get(&base, &detail, &alice).await;
    assert_eq!(
        (status, &now["status"]),
        (200, &json!("completed")),
        "{now}"
    );

    // Before it was created: not found, by position and by time.
    let created_at = first["recorded_at"].as_str().unwrap();
    let before = chrono::DateTime::parse_from_rfc3339(created_at).unwrap()
        - chrono::Duration::microseconds(1);
    let created_position = first["position"].as_i64().unwrap();
    for as_of in [
        (created_position - 1).to_string(),
        before.to_rfc3339_opts(SecondsFormat::Micros, true),
    ] {
        let path = format!("{detail}{}", query(&as_of));
        let (status, body) = get(&base, &path, &alice).await;
        assert_eq!(
            (status, &body["code"]),
            (404, &json!("NOT_FOUND")),
            "{path}: {body}"
        );
    }
    let path = format!("{detail}?as_of={created_position}");
    let (status, body) = get(&base, &path, &alice).await;
    assert_eq!((status, &body["id"]), (200, &json!(id)), "{path}: {body}");

    // Neither a position nor a time: 400, in each version's error form.
    let (status, body) = get(&base, &format!("{detail}?as_of=yesterday"), &alice).await;
    assert_eq!((status, &body["status"]), (400, &json!(400)), "{body}");
    assert!(body["error"].as_str().unwrap().contains("as_of"), "{body}");
    let v2 = format!("/api/v2/debates/{id}?as_of=2026-13-01");
    let (status, body) = get(&base, &v2, &alice).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["support_url"].is_string(), "the v2 form: {body}");

    // Another user reads it neither now nor as of then.
    for path in [
        detail.clone(),
        format!("{detail}?as_of={position}"),
        format!("/api/v2/debates/{id}?as_of={position}"),
    ] {
        let (status, body) = get(&base, &path, &bob).await;
        assert_eq!(status, 404, "{path}: {body}");
    }
    app.stop.cancel();
}
