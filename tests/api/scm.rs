//! The source-host integration end to end: a fake GitHub on 127.0.0.1
//! speaking the REST wire format (a pull request's JSON, its diff under
//! `application/vnd.github.v3.diff`, review submission), signed and forged
//! webhook deliveries (HMAC-SHA256 computed here, not by the service), a
//! pull request review that runs a debate with the demo agents to the end,
//! and honest `demo` answers without `SCM_TOKEN`.

use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::Sha256;

mod host;
mod posting;

use host::fake_github;

use crate::serve::{build_app_on, serve_app, spawn_with};
use crate::support::accounts::{call, signed_in};
use crate::support::{Kind, TEST_TOKEN, on_both_backends};

on_both_backends! {
    deliveries_are_verified_deduplicated_and_reviewed => deliveries_are_verified_deduplicated_and_reviewed;
}

pub const TOKEN: &str = "ghp_test_token";
pub const SECRET: &str = "It's a Secret to Everybody";
pub const REPO: &str = "octo/widgets";

pub const DIFF: &str = "diff --git a/src/pool.rs b/src/pool.rs
index 3b18e51..a9c2f0d 100644
--- a/src/pool.rs
+++ b/src/pool.rs
@@ -10,6 +10,8 @@ impl Pool {
     pub fn get(&self) -> Conn {
         let conn = self.idle.pop();
+        // Reuse before opening a new connection.
+        let conn = conn.or_else(|| self.open());
         conn.unwrap()
     }
 }
diff --git a/README.md b/README.md
--- a/README.md
+++ b/README.md
@@ -1,2 +1,3 @@
 # Widgets
+Connection pooling.
";

pub fn sign(body: &str, secret: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body.as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Posts a delivery; `signature` None sends none.
pub async fn deliver(
    base: &str,
    event: &str,
    id: &str,
    body: &Value,
    signature: Option<String>,
) -> (u16, Value) {
    let text = body.to_string();
    let mut request = reqwest::Client::new()
        .post(format!("{base}/api/v1/webhooks/scm"))
        .header("content-type", "application/json")
        .header("x-github-event", event)
        .header("x-github-delivery", id)
        .body(text);
    if let Some(signature) = signature {
        request = request.header("x-hub-signature-256", signature);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Polls a review until it leaves `in_progress` (bounded, so a hang fails).
pub async fn finished(base: &str, path: &str, token: &str) -> Value {
    for _ in 0..600 {
        let (status, body) = call(Method::GET, &format!("{base}{path}"), Some(token), None).await;
        assert_eq!(status, 200, "{path}: {body}");
        if body["status"] != "in_progress" {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{path} stayed in progress");
}

pub fn pull_request_event(action: &str) -> Value {
    json!({
        "action": action,
        "number": 7,
        "pull_request": {"number": 7, "title": "Reuse idle connections", "body": "Pools connections.",
            "head": {"ref": "pool", "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e"}},
        "repository": {"id": 1, "full_name": REPO, "name": "widgets", "owner": {"login": "octo"}},
        "installation": {"id": 42}
    })
}

async fn deliveries_are_verified_deduplicated_and_reviewed(kind: Kind) {
    let (host, api) = fake_github().await;
    let app = spawn_with(
        kind,
        &[
            ("SCM_TOKEN", TOKEN),
            ("SCM_API_URL", &api),
            ("SCM_WEBHOOK_SECRET", SECRET),
        ],
    )
    .await;
    let base = app.base.as_str();

    // Forged, unsigned and well-signed deliveries.
    let ping = json!({"zen": "Keep it logically awesome.", "hook_id": 1});
    let (status, body) = deliver(
        base,
        "ping",
        "p-1",
        &ping,
        Some(sign(&ping.to_string(), "wrong")),
    )
    .await;
    assert_eq!(status, 401, "{body}");
    let (status, _) = deliver(base, "ping", "p-1", &ping, None).await;
    assert_eq!(status, 401);
    let (status, body) = deliver(
        base,
        "ping",
        "p-1",
        &ping,
        Some(sign(&ping.to_string(), SECRET)),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], "acknowledged");
    assert_eq!(body["duplicate"], false);

    // A pull request opened queues a review debate that runs to the end.
    let opened = pull_request_event("opened");
    let signature = Some(sign(&opened.to_string(), SECRET));
    let (status, queued) = deliver(base, "pull_request", "pr-1", &opened, signature.clone()).await;
    assert_eq!(status, 202, "{queued}");
    assert_eq!(queued["outcome"], "review_queued");
    let review_id = queued["review_id"].as_str().unwrap().to_owned();
    // The same delivery again is recognised and not acted on twice.
    let (status, again) = deliver(base, "pull_request", "pr-1", &opened, signature).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["duplicate"], true);
    assert_eq!(again["review_id"], review_id.as_str());

    let review = finished(
        base,
        &format!("/api/v1/scm/pr/review/{review_id}"),
        TEST_TOKEN,
    )
    .await;
    assert_eq!(review["status"], "completed", "{review}");
    assert_eq!(review["repository"], REPO);
    assert_eq!(review["pr_number"], 7);
    assert_eq!(
        review["head_sha"],
        "6dcb09b5b57875f334f61aebed695e2e4193db5e"
    );
    assert!(
        ["APPROVE", "REQUEST_CHANGES", "COMMENT"].contains(&review["event"].as_str().unwrap()),
        "{review}"
    );
    for comment in review["comments"].as_array().unwrap() {
        let at = (
            comment["path"].as_str().unwrap(),
            comment["position"].as_u64().unwrap(),
        );
        assert!(
            at == ("src/pool.rs", 3) || at == ("README.md", 2),
            "{comment}"
        );
    }

    // Other events: tracked, or ignored with a reason.
    let push =
        json!({"ref": "refs/heads/main", "after": "abc123", "repository": {"full_name": REPO}});
    let (status, body) = deliver(
        base,
        "push",
        "push-1",
        &push,
        Some(sign(&push.to_string(), SECRET)),
    )
    .await;
    assert_eq!(
        (status, body["outcome"].as_str()),
        (200, Some("tracked")),
        "{body}"
    );
    let star = json!({"action": "created", "repository": {"full_name": REPO}});
    let (status, body) = deliver(
        base,
        "star",
        "star-1",
        &star,
        Some(sign(&star.to_string(), SECRET)),
    )
    .await;
    assert_eq!(
        (status, body["outcome"].as_str()),
        (202, Some("ignored")),
        "{body}"
    );
    assert!(body["reason"].as_str().unwrap().contains("star"));

    // The pull request as the host has it, and a review submitted there.
    let (status, pr) = call(
        Method::GET,
        &format!("{base}/api/v1/scm/pr/7?repository={REPO}"),
        Some(TEST_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200, "{pr}");
    assert_eq!(
        (pr["title"].as_str(), pr["demo"].as_bool()),
        (Some("Reuse idle connections"), Some(false))
    );
    let (status, missing) = call(
        Method::GET,
        &format!("{base}/api/v1/scm/pr/8?repository={REPO}"),
        Some(TEST_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 404, "{missing}");
    let submission = json!({
        "repository": REPO,
        "event": "REQUEST_CHANGES",
        "body": "Close idle connections on drop.",
        "comments": [{"path": "src/pool.rs", "position": 3, "body": "Unwrap panics on an empty pool."}]
    });
    let (status, submitted) = call(
        Method::POST,
        &format!("{base}/api/v1/scm/pr/7/review"),
        Some(TEST_TOKEN),
        Some(submission),
    )
    .await;
    assert_eq!(status, 201, "{submitted}");
    assert_eq!(submitted["demo"], false, "{submitted}");
    // The completed webhook review was posted there as well (see `posting`).
    let manual: Vec<(Value, u64)> = host
        .reviews
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, body, _)| body["body"] == "Close idle connections on drop.")
        .map(|(pull, body, id)| {
            assert_eq!(pull, "octo/widgets#7");
            (body.clone(), *id)
        })
        .collect();
    assert_eq!(manual.len(), 1, "{manual:?}");
    assert_eq!(submitted["host_review_id"].as_u64(), Some(manual[0].1));
    assert_eq!(
        manual[0].0,
        json!({"event": "REQUEST_CHANGES", "body": "Close idle connections on drop.",
            "comments": [{"path": "src/pool.rs", "position": 3, "body": "Unwrap panics on an empty pool."}]})
    );
    let (status, bad) = call(
        Method::POST,
        &format!("{base}/api/v1/scm/pr/7/review"),
        Some(TEST_TOKEN),
        Some(json!({"repository": REPO, "event": "MERGE"})),
    )
    .await;
    assert_eq!(status, 422, "{bad}");

    let (status, listed) = call(
        Method::GET,
        &format!("{base}/api/v1/scm/pr/7/reviews?repository={REPO}"),
        Some(TEST_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200, "{listed}");
    let ids: Vec<&str> = listed["reviews"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["review_id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&review_id.as_str()), "{listed}");
    assert!(
        ids.contains(&submitted["review_id"].as_str().unwrap()),
        "{listed}"
    );

    let (status, described) = call(
        Method::GET,
        &format!("{base}/api/v1/webhooks/scm/status"),
        Some(TEST_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(described["status"], "configured");
    assert_eq!(described["webhook_endpoint"], "/api/v1/webhooks/scm");
    assert_eq!(
        described["features"],
        json!({"pr_auto_review": true, "issue_triage": true, "push_tracking": true})
    );
    assert!(
        described["supported_events"]
            .as_array()
            .unwrap()
            .contains(&json!("pull_request"))
    );
    app.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_secret_or_token_deliveries_are_refused_and_answers_say_demo() {
    let app = spawn_with(Kind::Sqlite, &[]).await;
    let base = app.base.as_str();
    let ping = json!({"zen": "Design for failure."});
    let (status, body) = deliver(
        base,
        "ping",
        "p-1",
        &ping,
        Some(sign(&ping.to_string(), SECRET)),
    )
    .await;
    assert_eq!(status, 401, "{body}");
    let (status, pr) = call(
        Method::GET,
        &format!("{base}/api/v1/scm/pr/7?repository={REPO}"),
        Some(TEST_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(pr["demo"], true, "{pr}");
    assert!(
        pr.get("title").is_none(),
        "a demo answer carries no pull request data: {pr}"
    );
    let (_, started) = call(
        Method::POST,
        &format!("{base}/api/v1/scm/pr/review"),
        Some(TEST_TOKEN),
        Some(json!({"repository": REPO, "pr_number": 7, "review_type": "comprehensive"})),
    )
    .await;
    assert_eq!(
        (started["demo"].as_bool(), started["success"].as_bool()),
        (Some(true), Some(false))
    );
    let (_, described) = call(
        Method::GET,
        &format!("{base}/api/v1/webhooks/scm/status"),
        Some(TEST_TOKEN),
        None,
    )
    .await;
    assert_eq!(described["status"], "unconfigured");
    // The outgoing webhooks' `{id}` routes still answer beside the fixed path.
    let (status, _) = call(
        Method::GET,
        &format!("{base}/api/v1/webhooks/scm"),
        Some(TEST_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 404, "as for any id no subscription has");
    let (_, user, _) = signed_in(base, "hooks@example.com").await;
    let (status, body) = call(
        Method::GET,
        &format!("{base}/api/v1/webhooks/no-such-id"),
        Some(&user),
        None,
    )
    .await;
    assert_eq!(status, 404, "{body}");
    app.stop.cancel();

    // Demo mode takes unsigned deliveries.
    let app = spawn_with(Kind::Sqlite, &[("SERVICE_SCM_DEMO", "true")]).await;
    let (status, body) = deliver(&app.base, "ping", "p-2", &ping, None).await;
    assert_eq!(
        (status, body["outcome"].as_str()),
        (200, Some("acknowledged")),
        "{body}"
    );
    app.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redelivery_after_a_restart_is_recognised() {
    let vars = [("SCM_WEBHOOK_SECRET", SECRET)];
    let (first, dir) = build_app_on(None, &vars).await;
    let data_dir = first.settings.data_dir.clone();
    let first = serve_app(first, dir).await;
    let push =
        json!({"ref": "refs/heads/main", "after": "abc123", "repository": {"full_name": REPO}});
    let signature = Some(sign(&push.to_string(), SECRET));
    let (status, body) = deliver(&first.base, "push", "again-1", &push, signature.clone()).await;
    assert_eq!(
        (status, body["duplicate"].as_bool()),
        (200, Some(false)),
        "{body}"
    );
    first.stop.cancel();
    // Let the first process close its store before the second opens it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let data = data_dir.to_str().unwrap();
    let (second, dir) = build_app_on(
        None,
        &[("SCM_WEBHOOK_SECRET", SECRET), ("SERVICE_DATA_DIR", data)],
    )
    .await;
    let second = serve_app(second, dir).await;
    let (status, body) = deliver(&second.base, "push", "again-1", &push, signature).await;
    assert_eq!(
        (status, body["duplicate"].as_bool()),
        (200, Some(true)),
        "{body}"
    );
    assert_eq!(body["outcome"], "tracked");
    second.stop.cancel();
}
