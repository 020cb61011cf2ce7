//! Every event a request commits can be traced back to it: the request's
//! `X-Request-ID` is in each event's metadata.

use serde_json::{Value, json};

use crate::auth::ROOMY;
use crate::serve::spawn_with;
use crate::support::Kind;

const PASSWORD: &str = "correct horse battery";

#[tokio::test]
async fn every_event_a_request_commits_records_its_request_id() {
    let app = spawn_with(Kind::Sqlite, &ROOMY).await;
    let base = &app.base;
    let c = crate::support::client();
    let response = c
        .post(format!("{base}/api/auth/register"))
        .header("x-request-id", "trace-register-1")
        .json(&json!({"email": "traced@example.com", "password": PASSWORD, "name": "T"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.unwrap();
    let user_id = body["user"]["user_id"].as_str().unwrap().to_owned();
    let sign_in = c
        .post(format!("{base}/api/auth/login"))
        .header("x-request-id", "trace-login-2")
        .json(&json!({"email": "traced@example.com", "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(sign_in.status(), 200);
    let feed = app
        .app
        .log
        .read_feed(agon_projections::Cursor::START, 1_000)
        .await
        .unwrap();
    let mut seen = std::collections::BTreeMap::new();
    for event in &feed {
        let meta = event.metadata_value().unwrap();
        let request = meta["request_id"].as_str().unwrap_or("none").to_owned();
        seen.insert(
            format!("{}/{}", event.aggregate_type, event.event_type),
            request,
        );
    }
    // Registration writes the email claim and the account; sign-in the
    // attempt (reserved on the account stream) and the session.
    assert_eq!(seen["email/EmailClaimed"], "trace-register-1", "{seen:?}");
    assert_eq!(seen["account/Registered"], "trace-register-1", "{seen:?}");
    assert_eq!(seen["account/SessionStarted"], "trace-login-2", "{seen:?}");
    let account = app
        .app
        .log
        .load_stream("account", &user_id, 0)
        .await
        .unwrap();
    for event in account {
        let meta = event.metadata_value().unwrap();
        assert!(
            meta["request_id"]
                .as_str()
                .is_some_and(|r| r.starts_with("trace-")),
            "{} has no request id: {meta}",
            event.event_type
        );
    }
}
