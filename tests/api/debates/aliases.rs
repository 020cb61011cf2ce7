//! The deprecated create and list paths (§9): they still work and name their
//! successors in their headers.

use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use super::{Api, DEMO, assert_created, pick};

/// `Deprecation`, `Sunset`, `Link` to `successor` and the level headers of §9.
fn assert_deprecated(headers: &HeaderMap, successor: &str) {
    let header = |name: &str| headers.get(name).map_or("", |v| v.to_str().unwrap());
    assert_eq!(header("deprecation"), "@1735689600", "{headers:?}");
    let sunset = header("sunset");
    let date = chrono::DateTime::parse_from_rfc2822(sunset)
        .or_else(|_| chrono::DateTime::parse_from_rfc3339(sunset))
        .map(|d| d.date_naive())
        .or_else(|_| chrono::NaiveDate::parse_from_str(sunset, "%Y-%m-%d"));
    assert_eq!(
        date.map(|d| d.to_string()),
        Ok("2026-06-01".into()),
        "{sunset}"
    );
    let link = format!("<{successor}>; rel=\"successor-version\"");
    assert_eq!(header("link"), link);
    let level = header("x-deprecation-level");
    assert!(
        ["warning", "critical", "sunset"].contains(&level),
        "{headers:?}"
    );
    assert_eq!(header("x-api-deprecated"), "true");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deprecated_aliases_work_and_name_their_successors() {
    let (app, api) = Api::spawn(&[]).await;
    let client = crate::support::client();
    let aliases = [
        ("/api/debate/new", "/api/debates/start"),
        ("/api/debates/start", "/api/debates"),
        ("/api/debate", "/api/debates"),
    ];
    for (n, (path, successor)) in aliases.iter().enumerate() {
        let topic = format!("Alias {n}");
        let body = json!({"topic": topic, "agents": DEMO, "max_rounds": 1});
        let request = client.post(format!("{}{path}", app.base)).json(&body);
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 201, "{path}");
        assert_deprecated(response.headers(), successor);
        let created: Value = response.json().await.unwrap();
        api.finished(&assert_created(&created, &topic)).await;
    }
    let request = client.get(format!("{}/api/debates/list?limit=2", app.base));
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_deprecated(response.headers(), "/api/debates");
    let list: Value = response.json().await.unwrap();
    assert_eq!(pick(&list, "count total"), json!({"count": 2, "total": 3}));
    let body = json!({"task": "Current", "agents": DEMO, "rounds": 1});
    let request = client
        .post(format!("{}/api/v2/debates", app.base))
        .json(&body);
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 201);
    assert!(response.headers().get("deprecation").is_none());
    app.stop.cancel();
}

/// §9 names `POST /api/debates/start` as the replacement of `POST /api/debate/new`;
/// the issue lists `/api/debates/start` itself as deprecated in favour of `POST /api/debates`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn debate_new_names_debates_start_as_its_successor() {
    let (app, _) = Api::spawn(&[]).await;
    let client = crate::support::client();
    let body = json!({"topic": "Alias", "agents": DEMO, "rounds": 1});
    let old = client
        .post(format!("{}/api/debate/new", app.base))
        .json(&body);
    let old = old.send().await.unwrap();
    assert_eq!(old.status(), 201);
    assert_deprecated(old.headers(), "/api/debates/start");
    let new = client
        .post(format!("{}/api/debates/start", app.base))
        .json(&body);
    let new = new.send().await.unwrap();
    assert_eq!(new.status(), 201);
    assert_deprecated(new.headers(), "/api/debates");
    app.stop.cancel();
}
