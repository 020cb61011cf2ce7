//! Debate endpoints end to end (written by a helper): the three create
//! forms, the §2.1 consensus body, detail and the CLI against a service here,
//! with the shared caller and checks; `listing` holds messages, listing,
//! batch and export, `bad_input` refused creates, `aliases` the deprecated
//! paths, `agents` the leaderboard, agent health and automatic agent
//! selection, `sdk_shapes` the fields the upstream SDK reads, and `etag`
//! conditional reads. Demo agents only: no key, no network.

mod agents;
mod aliases;
mod bad_input;
mod etag;
mod listing;
mod requests;
mod sdk_shapes;
mod search;
mod sharing;

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::serve::{Spawned, spawn_with};
use crate::support::accounts::call;
use crate::support::{Kind, TEST_TOKEN, on_both_backends};

const DEMO: [&str; 3] = ["demo-a", "demo-b", "demo-c"];

on_both_backends! {
    create_run_and_read_the_consensus => create_run_and_read_the_consensus;
}

/// A service with roomy rate limits, and a caller of it.
struct Api {
    base: String,
    token: String,
}

impl Api {
    async fn spawn(extra: &[(&str, &str)]) -> (Spawned, Api) {
        Api::spawn_on(Kind::Sqlite, extra).await
    }

    async fn spawn_on(kind: Kind, extra: &[(&str, &str)]) -> (Spawned, Api) {
        let mut vars = crate::auth::ROOMY.to_vec();
        vars.push(("SERVICE_RATE_LIMIT_DEBATE_CREATE", "1000000"));
        vars.extend_from_slice(extra);
        let app = spawn_with(kind, &vars).await;
        let api = Api::with(&app.base, TEST_TOKEN);
        (app, api)
    }

    fn with(base: &str, token: &str) -> Api {
        let (base, token) = (base.to_owned(), token.to_owned());
        Api { base, token }
    }

    async fn get(&self, path: impl AsRef<str>) -> (u16, Value) {
        let url = format!("{}{}", self.base, path.as_ref());
        call(Method::GET, &url, Some(&self.token), None).await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        call(Method::POST, &url, Some(&self.token), Some(body)).await
    }

    /// POSTs a create body to `path`; asserts 201 and returns the body.
    async fn create(&self, path: &str, body: Value) -> Value {
        let (status, created) = self.post(path, body).await;
        assert_eq!(status, 201, "{created}");
        created
    }

    /// A demo debate of one round on `topic`; returns its id.
    async fn demo(&self, topic: &str) -> String {
        let body = json!({"topic": topic, "agents": DEMO, "rounds": 1});
        let created = self.create("/api/debates", body).await;
        created["id"].as_str().unwrap().to_owned()
    }

    /// Polls `path` until `done` holds for its 200 body (20 s at most).
    async fn until(&self, path: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (status, body) = self.get(path).await;
            if status == 200 && done(&body) {
                return body;
            }
            let late = Instant::now() > deadline;
            assert!(!late, "{path} never got there: {status} {body}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The detail of debate `id` once finished; asserts it completed.
    async fn finished(&self, id: &str) -> Value {
        let path = format!("/api/debates/{id}");
        let done = |d: &Value| matches!(d["status"].as_str(), Some("completed" | "failed"));
        let detail = self.until(&path, done).await;
        assert_eq!(detail["status"], "completed", "{detail}");
        detail
    }

    /// The debate list at `query` once its total is `total`.
    async fn listed(&self, query: &str, total: u64) -> Value {
        let path = format!("/api/debates{query}");
        self.until(&path, |list| list["total"] == total).await
    }
}

/// The fields of `value` named in `keys` (space-separated, `a/b` for nested).
fn pick(value: &Value, keys: &str) -> Value {
    let fields = keys.split(' ').map(|key| {
        let field = value.pointer(&format!("/{key}")).cloned();
        (key.to_owned(), field.unwrap_or(Value::Null))
    });
    Value::Object(fields.collect())
}

/// The create response of §2.1; returns the id.
fn assert_created(created: &Value, topic: &str) -> String {
    let id = created["id"].as_str().expect("id is a string");
    assert!(!id.is_empty() && created["debate_id"] == id, "{created}");
    // `running` when a slot is free; see `an_idle_service_starts_a_debate_at_once`.
    let status = created["status"].as_str();
    assert!(matches!(status, Some("running" | "pending")), "{created}");
    assert_eq!(created["topic"], topic);
    let at = created["created_at"].as_str().expect("created_at");
    chrono::DateTime::parse_from_rfc3339(at).expect("created_at is a timestamp");
    id.to_owned()
}

/// A non-JSON answer (an export, a report): status, content type, text.
async fn fetched(request: reqwest::RequestBuilder) -> (u16, String, String) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let kind = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    (status, kind, response.text().await.unwrap())
}

/// The v1 error form of unprefixed paths (§7, with `code`) with `status`
/// and `code`; returns the message.
fn assert_error(status: u16, body: &Value, want: u16, code: &str) -> String {
    assert_eq!((status, pick(body, "code")), (want, json!({"code": code})));
    let message = body["error"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "{body}");
    message.to_owned()
}

fn ids(list: &Value) -> Vec<String> {
    let debates = list["debates"].as_array().unwrap();
    debates
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The §2.1 consensus response, field for field and type for type.
pub fn assert_consensus_body(body: &Value, agents: u64) {
    assert!(
        body["debate_id"].as_str().is_some_and(|s| !s.is_empty()),
        "{body}"
    );
    let status = body["status"].as_str().expect("status is a string");
    assert!(
        matches!(status, "consensus_reached" | "no_consensus"),
        "{body}"
    );
    let consensus = &body["consensus"];
    let summary = consensus["summary"].as_str().expect("consensus.summary");
    assert!(!summary.trim().is_empty(), "{body}");
    let confidence = consensus["confidence"].as_f64().expect("confidence");
    assert!((0.0..=1.0).contains(&confidence), "{body}");
    for key in ["key_points", "disagreements"] {
        let items = consensus[key]
            .as_array()
            .unwrap_or_else(|| panic!("{key}: {body}"));
        assert!(items.iter().all(Value::is_string), "{key}: {body}");
    }
    let votes = body["voting_summary"].as_object().expect("voting_summary");
    let keys = ["agree", "agree_with_modifications", "disagree"];
    let counts = keys.map(|key| votes[key].as_u64().expect("vote counts are integers"));
    assert_eq!(
        counts.iter().sum::<u64>(),
        agents,
        "every agent voted: {body}"
    );
}

/// A majority debate's status follows its agreeing share and threshold.
fn assert_decided_by_share(body: &Value) {
    let count = |key: &str| body["voting_summary"][key].as_f64().unwrap();
    let agreeing = count("agree") + count("agree_with_modifications");
    let share = agreeing / (agreeing + count("disagree"));
    let reported = body["agreeing_share"].as_f64().unwrap();
    assert!((reported - share).abs() < 1e-9, "{body}");
    let reached = share >= body["threshold"].as_f64().unwrap();
    assert_eq!(body["status"] == "consensus_reached", reached, "{body}");
}

/// Messages of a 3 demo agent debate under the default phases: opening in
/// round 1 only, then critique and revision every round, each stage once per
/// agent; synthesis and votes are not messages.
fn assert_plan(detail: &Value, rounds: u64) {
    let messages = detail["messages"].as_array().expect("messages");
    let stages: Vec<(u64, &str)> = (1..=rounds)
        .flat_map(|round| ["opening", "critique", "revision"].map(|phase| (round, phase)))
        .filter(|(round, phase)| *round == 1 || *phase != "opening")
        .collect();
    assert_eq!(messages.len(), stages.len() * 3, "{detail}");
    assert_eq!(detail["message_count"], messages.len());
    for (&(round, phase), chunk) in stages.iter().zip(messages.chunks(3)) {
        let mut agents: Vec<&str> = chunk.iter().map(|m| m["agent"].as_str().unwrap()).collect();
        agents.sort_unstable();
        assert_eq!(agents, DEMO, "round {round} {phase}");
        let want = json!({"round": round, "phase": phase});
        assert!(
            chunk.iter().all(|m| pick(m, "round phase") == want),
            "{chunk:?}"
        );
    }
    for (index, message) in messages.iter().enumerate() {
        let want = json!({"index": index, "provider": "demo"});
        assert_eq!(pick(message, "index provider"), want);
        let agent = message["agent"].as_str().unwrap();
        let content = message["content"].as_str().unwrap();
        let from_demo = content.starts_with(&format!("[demo agent {agent}]"));
        assert!(from_demo, "{content}");
        let targets = message["targets"].as_array().unwrap();
        let mut targets: Vec<&str> = targets.iter().map(|t| t.as_str().unwrap()).collect();
        targets.sort_unstable();
        if message["phase"] == "critique" {
            let others: Vec<&str> = DEMO.into_iter().filter(|a| *a != agent).collect();
            assert_eq!(targets, others, "{message}");
            let named = others
                .iter()
                .all(|o| content.contains(&format!("On {o} (")));
            assert!(named, "{content}");
        } else {
            assert!(targets.is_empty(), "{message}");
        }
    }
}

async fn create_run_and_read_the_consensus(kind: Kind) {
    let (app, api) = Api::spawn_on(kind, &[]).await;

    // Current form.
    let topic = "Should cities ban cars downtown?";
    let protocol = json!({"phases": ["opening", "critique", "revision", "vote"],
        "consensus_threshold": 0.6});
    let body = json!({"topic": topic, "agents": DEMO, "rounds": 2, "protocol": protocol});
    let created = api.create("/api/debates", body).await;
    let id = assert_created(&created, topic);
    assert_eq!(
        pick(&created, "rounds agents"),
        json!({"rounds": 2, "agents": DEMO})
    );
    let detail = api.finished(&id).await;
    assert_plan(&detail, 2);
    assert_eq!(detail["synthesis"]["agent"], "demo-a", "{detail}");
    let (status, consensus) = api.get(format!("/api/debates/{id}/consensus")).await;
    assert_eq!(status, 200, "{consensus}");
    assert_consensus_body(&consensus, 3);
    let want = json!({"debate_id": id, "mode": "majority", "threshold": 0.6});
    assert_eq!(pick(&consensus, "debate_id mode threshold"), want);
    assert_decided_by_share(&consensus);
    assert_eq!(detail["consensus"], consensus);
    let v1 = api.get(format!("/api/v1/debates/{id}/consensus")).await;
    assert_eq!(v1, (200, consensus.clone()));
    let (status, v2) = api.get(format!("/api/v2/debates/{id}/consensus")).await;
    assert_eq!(
        (status, &v2["data"], &v2["meta"]["version"]),
        (200, &consensus, &json!("2"))
    );
    assert!(v2["meta"]["request_id"].is_string() && v2["meta"]["timestamp"].is_string());

    // Version 1 form.
    let topic = "Is remote work here to stay?";
    let body = json!({"topic": topic, "agents": DEMO, "max_rounds": 1});
    let created = api.create("/api/v1/debates", body).await;
    let id = assert_created(&created, topic);
    assert_eq!(created["rounds"], 1);
    assert_plan(&api.finished(&id).await, 1);
    let (status, consensus) = api.get(format!("/api/debates/{id}/consensus")).await;
    assert_eq!(status, 200);
    assert_consensus_body(&consensus, 3);

    // Version 2 form, in the v2 envelope.
    let context = "The city budget is tight this year";
    let body = json!({"task": "Build a tram line?", "agents": DEMO, "rounds": 1,
        "consensus": "majority", "auto_select": false, "context": context});
    let created = api.create("/api/v2/debates", body).await;
    assert_eq!(created["meta"]["version"], "2", "{created}");
    let id = assert_created(&created["data"], "Build a tram line?");
    let detail = api.finished(&id).await;
    assert_plan(&detail, 1);
    let want = json!({"context": context, "protocol/consensus": "majority"});
    assert_eq!(pick(&detail, "context protocol/consensus"), want);
    for message in detail["messages"].as_array().unwrap() {
        let opening = message["phase"] == "opening";
        let content = message["content"].as_str().unwrap();
        assert!(!opening || content.contains(context), "{message}");
    }
    let (status, v2) = api.get(format!("/api/v2/debates/{id}")).await;
    assert_eq!((status, &v2["data"]["id"]), (200, &json!(id)));
    let (status, v2) = api.get(format!("/api/v2/debates/{id}/consensus")).await;
    assert_eq!(status, 200);
    assert_consensus_body(&v2["data"], 3);

    api.listed("?status=completed", 3).await;
    app.stop.cancel();
}

/// §3: the creation response says `running` when the debate could start.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idle_service_starts_a_debate_at_once() {
    let (app, api) = Api::spawn(&[("SERVICE_MAX_CONCURRENT_DEBATES", "1")]).await;
    let body = json!({"topic": "Alone", "agents": DEMO, "rounds": 1});
    let created = api.create("/api/debates", body).await;
    assert_eq!(created["status"], "running", "{created}");
    app.stop.cancel();
}

/// A debate is readable as soon as its creation has been answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_created_debate_is_readable_at_once() {
    let (app, api) = Api::spawn(&[]).await;
    for n in 0..5 {
        let id = api.demo(&format!("Read me {n}")).await;
        let (status, detail) = api.get(format!("/api/debates/{id}")).await;
        assert_eq!(status, 200, "{detail}");
        let (_, list) = api.get("/api/debates").await;
        assert_eq!(list["total"], n + 1, "{list}");
    }
    app.stop.cancel();
}

/// The CLI against a service: the debate runs there and its consensus is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cli_runs_a_debate_on_a_server() {
    let (app, api) = Api::spawn(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let by_flag: (&[&str], _) = (&["--token", TEST_TOKEN], None);
    for (args, env) in [by_flag, (&[], Some(TEST_TOKEN))] {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agon"));
        let debate = "debate|Remote topic|--rounds|1|--json|--server";
        command.args(debate.split('|')).arg(&app.base).args(args);
        command.env_clear().env("SERVICE_DATA_DIR", dir.path());
        command.envs(env.map(|token| ("SERVICE_API_TOKEN", token)));
        command.kill_on_drop(true);
        let run = tokio::time::timeout(Duration::from_secs(60), command.output());
        let output = run.await.expect("agon debate never ended").unwrap();
        assert!(output.status.success(), "{output:?}");
        let consensus: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_consensus_body(&consensus, 3);
        let id = consensus["debate_id"].as_str().unwrap();
        assert_eq!(api.finished(id).await["consensus"], consensus);
    }
    app.stop.cancel();
}

/// While a debate runs or waits, its consensus answers 202 with the status.
/// One agent talks to a server that never answers and only one debate may
/// run, so the first stays `running` and the second `pending`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn consensus_is_202_while_running_or_pending() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", silent.local_addr().unwrap());
    let one = ("SERVICE_MAX_CONCURRENT_DEBATES", "1");
    let (app, api) = Api::spawn(&[("SERVICE_OPENAI_COMPATIBLE_URL", &url), one]).await;
    let body = json!({"topic": "Stuck", "agents": ["demo-a", "local"], "rounds": 1});
    let running = assert_created(&api.create("/api/debates", body).await, "Stuck");
    let path = format!("/api/debates/{running}");
    let detail = api.until(&path, |d| d["status"] == "running").await;
    let want = json!({"current_round": 1, "current_phase": "opening"});
    assert_eq!(pick(&detail, "current_round current_phase"), want);
    let body = json!({"topic": "Queued", "agents": DEMO});
    let waiting = api.create("/api/debates", body).await;
    assert_eq!(waiting["status"], "pending", "{waiting}");
    let waiting = waiting["id"].as_str().unwrap();
    api.until(&format!("/api/debates/{waiting}"), |_| true)
        .await;
    for (id, state) in [(running.as_str(), "running"), (waiting, "pending")] {
        let want = json!({"status": state, "debate_id": id, "consensus": null});
        for prefix in ["/api", "/api/v1"] {
            let (status, body) = api.get(format!("{prefix}/debates/{id}/consensus")).await;
            let fields = pick(&body, "status debate_id consensus");
            assert_eq!((status, fields), (202, want.clone()), "{body}");
            assert!(body["message"].is_string(), "{body}");
        }
        let (status, body) = api.get(format!("/api/v2/debates/{id}/consensus")).await;
        assert_eq!(
            (status, &body["data"]["status"]),
            (202, &json!(state)),
            "{body}"
        );
        assert_eq!(ids(&api.listed(&format!("?status={state}"), 1).await), [id]);
    }
    assert_eq!(api.get("/api/debates?status=completed").await.1["total"], 0);
    app.stop.cancel();
}
