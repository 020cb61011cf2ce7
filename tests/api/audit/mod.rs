//! The audit API end to end on both back ends: trails owned, ordered,
//! chain-linked and replayed as of a position or time; exports checked by
//! the independent verifier (`event-schemas/audit/verify_audit_export.py`);
//! tampering named by the trail's and the log's verification; the published
//! head and seal consistency; the entries' filters and cursor; and another
//! user's trails refused.

mod agreement;
mod log;

use std::process::Output;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::serve::{Spawned, spawn_with};
use crate::support::accounts::{call, signed_in};
use crate::support::{Kind, TEST_TOKEN, on_both_backends};
use crate::tamper::exec;

on_both_backends! {
    trails_are_owned_linked_replayed_and_exported => trails_are_owned_linked_replayed_and_exported;
    a_tampered_debate_is_named_by_its_trail_and_the_log => a_tampered_debate_is_named_by_its_trail_and_the_log;
}

/// The independent verifier of exports.
const VERIFIER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/event-schemas/audit/verify_audit_export.py"
);

/// Polls `done` until it holds (or fails the test after a generous bound).
pub async fn eventually(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(45);
    while !done().await {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The verifier on `bytes` (written to a file), with `args` after it.
pub fn verifier(bytes: &[u8], args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("export");
    std::fs::write(&path, bytes).unwrap();
    std::process::Command::new("python3")
        .arg(VERIFIER)
        .arg(&path)
        .args(args)
        .output()
        .unwrap()
}

/// A GET or POST with `token`; the status, content type and body bytes.
pub async fn raw(
    method: Method,
    url: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, String, Vec<u8>) {
    let mut request = reqwest::Client::new()
        .request(method, url)
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, kind, response.bytes().await.unwrap().to_vec())
}

/// A user with a finished demo debate, created under a known request id.
pub struct World {
    pub served: Spawned,
    pub alice: (String, String),
    pub bob: (String, String),
    pub debate: String,
}

pub const REQUEST_ID: &str = "audit-request-0001";

impl World {
    pub async fn new(kind: Kind) -> Self {
        let quiet = crate::support::provider::quiet_limits();
        let vars: Vec<(&str, &str)> = quiet
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let served = spawn_with(kind, &vars).await;
        let base = served.base.clone();
        let (alice, alice_token, _) = signed_in(&base, "alice@example.com").await;
        let (bob, bob_token, _) = signed_in(&base, "bob@example.com").await;
        let response = reqwest::Client::new()
            .post(format!("{base}/api/debates"))
            .bearer_auth(&alice_token)
            .header("X-Request-ID", REQUEST_ID)
            .json(&json!({"topic": "Audits", "agents": ["demo-a", "demo-b"], "rounds": 1}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 201);
        let created: Value = response.json().await.unwrap();
        let debate = created["id"].as_str().unwrap().to_owned();
        let world = Self {
            served,
            alice: (alice, alice_token),
            bob: (bob, bob_token),
            debate,
        };
        let path = format!("/api/v1/audit-trails/debate:{}", world.debate);
        let deadline = Instant::now() + Duration::from_secs(45);
        loop {
            let (status, trail) = world.get(&path, &world.alice.1).await;
            let complete = status == 200
                && trail["state"]["status"] == "completed"
                && trail["entries"].as_u64() == trail["events"].as_array().map(|e| e.len() as u64);
            if complete {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the trail never completes: {status} {trail}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        world
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.served.base)
    }

    pub async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        call(Method::GET, &self.url(path), Some(token), None).await
    }

    pub async fn post(&self, path: &str, token: &str, body: Value) -> (u16, Value) {
        call(Method::POST, &self.url(path), Some(token), Some(body)).await
    }
}

/// Checks `export` and the golden sample against `audit/trail-export.v1.json`.
fn conforms_to_export_schema(export: &Value) {
    let read = |name: &str| -> Value {
        let path = format!("{}/event-schemas/audit/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let schema = read("trail-export.v1.json");
    for (what, value) in [
        ("export", export),
        ("sample", &read("trail-export.v1.sample.json")),
    ] {
        crate::schemas::conforms(
            value,
            &schema,
            what,
            "#",
            &mut crate::schemas::Seen::default(),
        )
        .unwrap_or_else(|e| panic!("{what}: {e}\n{value}"));
    }
}

fn events(trail: &Value) -> &Vec<Value> {
    trail["events"].as_array().unwrap()
}

async fn trails_are_owned_linked_replayed_and_exported(kind: Kind) {
    let world = Box::pin(World::new(kind)).await;
    let (alice, alice_token) = (&world.alice.0, &world.alice.1);
    let bob_token = &world.bob.1;
    let trail_path = format!("/api/v1/audit-trails/debate:{}", world.debate);

    // Ordered and chain-linked, each entry with actor, request id and time.
    let (_, trail) = world.get(&trail_path, alice_token).await;
    let entries = events(&trail);
    assert!(entries.len() >= 4, "{trail}");
    assert_eq!(trail["owner"], alice.as_str());
    let first = &entries[0];
    assert_eq!(first["event_type"], "DebateCreated");
    assert_eq!(first["actor"], alice.as_str());
    assert_eq!(first["request_id"], REQUEST_ID);
    assert!(first["recorded_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(first["prev_hash"], "00".repeat(32));
    for (n, pair) in entries.windows(2).enumerate() {
        assert_eq!(pair[1]["sequence"], n as i64 + 2);
        assert_eq!(pair[1]["prev_hash"], pair[0]["hash"], "{trail}");
    }

    // As of the first event: the debate as it was shown then.
    let position = first["position"].as_i64().unwrap();
    let (status, then) = world
        .get(&format!("{trail_path}?as_of={position}"), alice_token)
        .await;
    assert_eq!(status, 200, "{then}");
    assert_eq!(events(&then).len(), 1);
    assert_eq!(then["state"]["topic"], "Audits");
    assert_ne!(then["state"]["status"], "completed", "{then}");
    let at = first["recorded_at"].as_str().unwrap();
    let (_, by_time) = world
        .get(
            &format!("{trail_path}?as_of={}", at.replace('+', "%2B")),
            alice_token,
        )
        .await;
    assert_eq!(events(&by_time)[0]["position"], position);
    assert!(events(&by_time).len() < entries.len());
    let (status, _) = world
        .get(&format!("{trail_path}?as_of=yesterday"), alice_token)
        .await;
    assert_eq!(status, 400);

    // Another user's trails are not found; an admin sees them.
    for path in [
        trail_path.clone(),
        format!("{trail_path}/export?format=json"),
        format!("/api/v1/audit-trails/account:{alice}"),
    ] {
        let (status, body) = world.get(&path, bob_token).await;
        assert_eq!(status, 404, "{path}: {body}");
    }
    let (status, _) = world
        .post(&format!("{trail_path}/verify"), bob_token, json!({}))
        .await;
    assert_eq!(status, 404);
    let (_, listed) = world.get("/api/v1/audit-trails?limit=500", bob_token).await;
    let ids: Vec<&str> = listed["trails"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["trail_id"].as_str().unwrap())
        .collect();
    assert!(
        ids.iter()
            .all(|id| !id.contains(world.debate.as_str()) && !id.contains(alice.as_str())),
        "{ids:?}"
    );
    assert!(
        ids.contains(&format!("account:{}", world.bob.0).as_str()),
        "{ids:?}"
    );
    let (status, _) = world.get(&trail_path, TEST_TOKEN).await;
    assert_eq!(status, 200);

    // Secrets never leave: the account's password hash is redacted.
    let (_, account) = world
        .get(
            &format!("/api/v1/audit-trails/account:{alice}"),
            alice_token,
        )
        .await;
    let registered = &events(&account)[0];
    assert_eq!(registered["redacted"], true, "{registered}");
    assert!(registered["payload"].is_null());
    assert!(!account.to_string().contains("$argon2"), "{account}");

    // Exports: JSON checked by the independent verifier, CSV and Markdown.
    let export = |format: &str| world.url(&format!("{trail_path}/export?format={format}"));
    let (status, kind_json, json_bytes) =
        raw(Method::GET, &export("json"), alice_token, None).await;
    assert_eq!((status, kind_json.as_str()), (200, "application/json"));
    let output = verifier(&json_bytes, &[]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("intact"));
    conforms_to_export_schema(&serde_json::from_slice(&json_bytes).unwrap());
    let mut forged: Value = serde_json::from_slice(&json_bytes).unwrap();
    let payload = forged["entries"][1]["payload"].as_str().unwrap().to_owned();
    forged["entries"][1]["payload"] = Value::String(format!("{payload} "));
    let output = verifier(&serde_json::to_vec(&forged).unwrap(), &[]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("sequence 2"),
        "{output:?}"
    );
    let account_export = world.url(&format!("/api/v1/audit-trails/account:{alice}/export"));
    let (_, _, account_bytes) = raw(Method::GET, &account_export, alice_token, None).await;
    let output = verifier(&account_bytes, &[]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("redacted"));

    let (status, csv_type, csv) = raw(Method::GET, &export("csv"), alice_token, None).await;
    assert_eq!(
        (status, csv_type.as_str()),
        (200, "text/csv; charset=utf-8")
    );
    let csv = String::from_utf8(csv).unwrap();
    assert!(
        csv.starts_with("position,sequence,event_type,actor,request_id"),
        "{csv}"
    );
    assert!(csv.contains(REQUEST_ID));
    let (status, md_type, md) = raw(Method::GET, &export("md"), alice_token, None).await;
    assert_eq!(
        (status, md_type.as_str()),
        (200, "text/markdown; charset=utf-8")
    );
    let md = String::from_utf8(md).unwrap();
    assert!(
        md.starts_with(&format!("# Audit trail `debate:{}`", world.debate)),
        "{md}"
    );
    assert!(md.contains("Verification: intact"), "{md}");
    let (status, _) = world
        .get(&format!("{trail_path}/export?format=pdf"), alice_token)
        .await;
    assert_eq!(status, 400);
}

async fn a_tampered_debate_is_named_by_its_trail_and_the_log(kind: Kind) {
    let world = Box::pin(World::new(kind)).await;
    let app = &world.served.app;
    app.log.seal_now(&app.seal_key).await.unwrap();
    let verify = format!("/api/v1/audit-trails/debate:{}/verify", world.debate);
    let (status, intact) = world.post(&verify, &world.alice.1, json!({})).await;
    assert_eq!(status, 200, "{intact}");
    assert_eq!(intact["valid"], true, "{intact}");
    assert!(intact["seals_checked"].as_i64().unwrap() >= 1);

    exec(
        &app.log,
        &format!(
            "UPDATE events SET payload = payload || ' ' WHERE aggregate_id = '{}' AND sequence = 2",
            world.debate
        ),
    )
    .await;
    let (_, broken) = world.post(&verify, &world.alice.1, json!({})).await;
    assert_eq!(broken["valid"], false, "{broken}");
    let problem = &broken["problem"];
    assert_eq!(
        (&problem["kind"], &problem["check"], &problem["sequence"]),
        (&json!("event"), &json!("event_hash"), &json!(2)),
        "{broken}"
    );
    let (_, whole) = world.post("/api/audit/verify", TEST_TOKEN, json!({})).await;
    assert_eq!(whole["problem"], broken["problem"], "{whole}");
    // A range that leaves the event out holds; one that takes it in does not.
    let position = problem["position"].as_i64().unwrap();
    let (_, before) = world
        .post(
            "/api/audit/verify",
            TEST_TOKEN,
            json!({"to_position": position - 1}),
        )
        .await;
    assert_eq!(before["valid"], true, "{before}");
    let (_, around) = world
        .post(
            "/api/audit/verify",
            TEST_TOKEN,
            json!({"from_position": position, "to_position": position}),
        )
        .await;
    assert_eq!(around["problem"]["check"], "event_hash", "{around}");
    assert_eq!(around["events_checked"], 1);
}
