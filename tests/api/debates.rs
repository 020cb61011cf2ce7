//! Debate endpoints end to end (written by a helper): the three create
//! forms, the §2.1 consensus body, detail and messages, listing, batch,
//! export, bad input, deprecated aliases, the leaderboard, agent health and
//! automatic agent selection. Demo agents only: no key, no network.

use std::time::Duration;

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::serve::{Spawned, spawn_with};
use crate::support::accounts::{call, signed_in};
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

/// The general error form (§7) with `status` and `code`; returns the message.
fn assert_error(status: u16, body: &Value, want: u16, code: &str) -> String {
    assert_eq!(
        (status, pick(body, "error/code")),
        (want, json!({"error/code": code}))
    );
    let message = body["error"]["message"].as_str().unwrap_or_default();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn messages_list_and_batch_respect_pages_filters_and_owners() {
    let (app, admin) = Api::spawn(&[]).await;
    let ada = Api::with(&app.base, &signed_in(&app.base, "ada@example.com").await.1);
    let bob = Api::with(&app.base, &signed_in(&app.base, "bob@example.com").await.1);
    let (ada1, ada2) = (ada.demo("Ada 1").await, ada.demo("Ada 2").await);
    let bob1 = bob.demo("Bob").await;
    let detail = ada.finished(&ada1).await;
    ada.finished(&ada2).await;
    bob.finished(&bob1).await;

    // Messages, a page at a time.
    let messages = |query: String| ada.get(format!("/api/debates/{ada1}/messages{query}"));
    let mut paged = Vec::new();
    for offset in [0, 4, 8] {
        let (status, page) = messages(format!("?limit=4&offset={offset}")).await;
        let want = json!({"total": 9, "offset": offset, "limit": 4});
        assert_eq!((status, pick(&page, "total offset limit")), (200, want));
        assert_eq!(page["count"], page["messages"].as_array().unwrap().len());
        paged.extend(page["messages"].as_array().unwrap().iter().cloned());
    }
    assert_eq!(Value::from(paged), detail["messages"]);
    let (_, all) = messages(String::new()).await;
    let want = json!({"count": 9, "limit": 20, "debate_id": ada1});
    assert_eq!(pick(&all, "count limit debate_id"), want);
    let (_, past) = messages("?offset=100".into()).await;
    assert_eq!(pick(&past, "count total"), json!({"count": 0, "total": 9}));
    for bad in "limit=0 limit=101 limit=abc offset=-1 colour=red".split(' ') {
        let (status, body) = messages(format!("?{bad}")).await;
        assert_error(status, &body, 400, "BAD_REQUEST");
    }

    // Owners: each user sees their own debates, the admin every one.
    let mine = ada.listed("", 2).await;
    assert_eq!(ids(&mine), [ada2.as_str(), ada1.as_str()], "newest first");
    assert_eq!(ids(&bob.listed("", 1).await), [bob1.as_str()]);
    for path in ["", "/consensus", "/messages"] {
        let (status, body) = bob.get(format!("/api/debates/{ada1}{path}")).await;
        assert_error(status, &body, 404, "NOT_FOUND");
        assert_eq!(admin.get(format!("/api/debates/{ada1}{path}")).await.0, 200);
    }
    assert_eq!(admin.listed("", 3).await["limit"], 20);

    // Status filter and pages.
    for (status, total) in [
        ("completed", 3),
        ("pending", 0),
        ("running", 0),
        ("failed", 0),
    ] {
        let (code, body) = admin.get(format!("/api/debates?status={status}")).await;
        assert_eq!(
            (code, &body["total"]),
            (200, &json!(total)),
            "{status}: {body}"
        );
    }
    let (status, body) = admin.get("/api/debates?status=finished").await;
    assert_error(status, &body, 400, "BAD_REQUEST");
    let (_, first) = admin.get("/api/debates?limit=1").await;
    let (_, second) = admin.get("/api/debates?limit=1&offset=1").await;
    assert_eq!(pick(&first, "count total"), json!({"count": 1, "total": 3}));
    assert_eq!(
        (ids(&first), ids(&second)),
        (vec![bob1.clone()], vec![ada2.clone()])
    );
    let (_, none) = admin.get("/api/debates?offset=3").await;
    assert_eq!(pick(&none, "count total"), json!({"count": 0, "total": 3}));
    for bad in ["limit=0", "limit=101", "limit=x"] {
        let (status, body) = admin.get(format!("/api/debates?{bad}")).await;
        assert_error(status, &body, 400, "BAD_REQUEST");
    }
    for n in 0..18 {
        admin.demo(&format!("Filler {n}")).await;
    }
    assert_eq!(admin.listed("", 21).await["count"], 20, "default limit 20");

    // Batch.
    let body = json!({"debate_ids": [ada1, bob1, "no-such-id", ada1]});
    let (status, found) = ada.post("/api/debates/batch", body).await;
    assert_eq!((status, ids(&found)), (200, vec![ada1.clone()]), "{found}");
    let want = json!({"not_found": [bob1, "no-such-id"], "count": 1});
    assert_eq!(pick(&found, "not_found count"), want);
    assert_eq!(found["debates"][0]["messages"], detail["messages"]);
    let body = json!({"debate_ids": [ada1, bob1]});
    let (_, found) = admin.post("/api/debates/batch", body).await;
    assert_eq!(
        (ids(&found), &found["not_found"]),
        (vec![ada1, bob1], &json!([]))
    );
    let many: Vec<String> = (0..101).map(|n| format!("id-{n}")).collect();
    let (status, body) = ada
        .post("/api/debates/batch", json!({"debate_ids": many}))
        .await;
    assert_error(status, &body, 400, "BAD_REQUEST");
    let wrong = [
        json!({"debate_ids": [], "extra": 1}),
        json!({}),
        json!({"debate_ids": "x"}),
    ];
    for body in wrong {
        let (status, error) = ada.post("/api/debates/batch", body).await;
        assert_error(status, &error, 422, "VALIDATION_ERROR");
    }
    let url = format!("{}/api/debates/batch", app.base);
    let (status, error) = call(Method::POST, &url, Some(&ada.token), None).await;
    assert_error(status, &error, 415, "UNSUPPORTED_MEDIA_TYPE");
    app.stop.cancel();
}

/// RFC 4180 rows; asserts every quote is where it may be.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let (mut rows, mut row, mut field, mut quoted) = (vec![], vec![], String::new(), false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.next_if_eq(&'"').is_some() => field.push('"'),
            (true, '"') => {
                quoted = false;
                let next = chars.peek();
                assert!(
                    matches!(next, Some(',' | '\n')),
                    "text after a quote: {text}"
                );
            }
            (false, '"') => {
                assert!(field.is_empty(), "a quote inside an unquoted field: {text}");
                quoted = true;
            }
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (_, c) => field.push(c),
        }
    }
    assert!(
        !quoted && field.is_empty() && row.is_empty(),
        "unterminated: {text}"
    );
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn export_as_json_ndjson_and_csv() {
    let (app, api) = Api::spawn(&[]).await;
    let formula = "=HYPERLINK(\"http://x\", \"click\"), then more";
    let (plain, tricky) = (api.demo("Plain topic").await, api.demo(formula).await);
    api.finished(&plain).await;
    api.finished(&tricky).await;
    let client = crate::support::client();
    let export = |format: &str| {
        let url = format!("{}/api/debates/export?format={format}", app.base);
        let request = client.get(url);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let kind = response.headers()["content-type"]
                .to_str()
                .unwrap()
                .to_owned();
            (status, kind, response.text().await.unwrap())
        }
    };

    let (status, kind, text) = export("json").await;
    assert_eq!((status, kind.as_str()), (200, "application/json"));
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (&body["count"], ids(&body)),
        (&json!(2), vec![tricky.clone(), plain.clone()])
    );
    assert_consensus_body(&body["debates"][0]["consensus"], 3);

    let (status, kind, text) = export("ndjson").await;
    assert_eq!((status, kind.as_str()), (200, "application/x-ndjson"));
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "one JSON object a line: {text}");
    assert_eq!(
        (&lines[0]["id"], &lines[1]["topic"]),
        (&json!(tricky), &json!("Plain topic"))
    );

    let (status, kind, text) = export("csv").await;
    assert_eq!((status, kind.starts_with("text/csv")), (200, true));
    let rows = parse_csv(&text);
    let header = "id,topic,status,agents,rounds,created_at,completed_at,consensus_status,\
                  confidence,agree,agree_with_modifications,disagree,summary,error";
    assert_eq!(
        (rows[0].join(","), rows.len()),
        (header.to_owned(), 3),
        "{text}"
    );
    assert!(rows.iter().all(|r| r.len() == 14), "{text}");
    let defused = format!("'{formula}");
    let want = [
        tricky.as_str(),
        &defused,
        "completed",
        "demo-a;demo-b;demo-c",
        "1",
    ];
    assert_eq!(rows[1][..5], want, "the formula is defused");
    assert_eq!(rows[2][..2], [plain.as_str(), "Plain topic"]);
    assert!(matches!(
        rows[1][7].as_str(),
        "consensus_reached" | "no_consensus"
    ));
    let votes: u32 = rows[1][9..12]
        .iter()
        .map(|v| v.parse::<u32>().unwrap())
        .sum();
    assert_eq!(votes, 3);
    let safe = rows
        .iter()
        .flatten()
        .all(|f| !f.starts_with(['=', '+', '-', '@']));
    assert!(safe, "{text}");

    let (status, _, text) = export("xml").await;
    assert_error(
        status,
        &serde_json::from_str(&text).unwrap(),
        400,
        "BAD_REQUEST",
    );
    app.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_create_requests_are_refused_and_store_nothing() {
    let (app, api) = Api::spawn(&[]).await;
    let thirteen: Vec<String> = (1..=13).map(|n| format!("demo-{n}")).collect();
    let with = |extra: Value| {
        let mut body = json!({"topic": "Fine topic", "agents": DEMO});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let (bad, invalid) = ((400, "BAD_REQUEST"), (422, "VALIDATION_ERROR"));
    let threshold = |t: f64| with(json!({"protocol": {"consensus_threshold": t}}));
    let phases = |p: Value| with(json!({"protocol": {"phases": p}}));
    let cases = [
        (json!({"agents": DEMO}), bad, "topic"),
        (with(json!({"topic": "   "})), bad, "topic"),
        (with(json!({"topic": "x".repeat(2001)})), bad, "topic"),
        (with(json!({"context": "x".repeat(20_001)})), bad, "context"),
        (
            with(json!({"agents": [], "auto_select": false})),
            bad,
            "agents",
        ),
        (
            with(json!({"agents": ["demo-a", "nobody"]})),
            bad,
            "unknown agent 'nobody'",
        ),
        (
            with(json!({"agents": ["demo-a", "claude"]})),
            bad,
            "ANTHROPIC_API_KEY",
        ),
        (with(json!({"agents": thirteen})), bad, "12"),
        (with(json!({"agents": ["demo-a", "demo-a"]})), bad, "demo-a"),
        (with(json!({"agents": ["demo-a", ""]})), bad, "agent"),
        (with(json!({"rounds": 0})), bad, "rounds"),
        (with(json!({"rounds": 13})), bad, "rounds"),
        (with(json!({"max_rounds": 13})), bad, "rounds"),
        (
            with(json!({"rounds": 2, "max_rounds": 3})),
            bad,
            "max_rounds",
        ),
        (with(json!({"topic": "a", "task": "b"})), bad, "task"),
        (threshold(1.5), bad, "consensus_threshold"),
        (threshold(-0.1), bad, "consensus_threshold"),
        (phases(json!(["opening", "bad phase!"])), bad, "bad phase!"),
        (phases(json!([])), bad, "phases"),
        (with(json!({"consensus": "plurality"})), bad, "plurality"),
        (with(json!({"judge": "demo-z"})), bad, "demo-z"),
        (with(json!({"colour": "red"})), invalid, ""),
        (with(json!({"protocol": {"speed": 3}})), invalid, ""),
        (with(json!({"topic": 5})), invalid, ""),
        (with(json!({"agents": "demo-a"})), invalid, ""),
        (with(json!({"rounds": "two"})), invalid, ""),
        (with(json!({"rounds": -1})), invalid, ""),
        (with(json!({"auto_select": "yes"})), invalid, ""),
        (json!(["topic"]), invalid, ""),
    ];
    for (body, (want, code), needle) in cases {
        let (status, error) = api.post("/api/debates", body.clone()).await;
        let message = assert_error(status, &error, want, code);
        assert!(
            message.contains(needle),
            "{needle:?} not in {message:?} for {body}"
        );
    }
    let (_, error) = api
        .post("/api/debates", with(json!({"agents": ["nobody"]})))
        .await;
    let message = error["error"]["message"].as_str().unwrap();
    let forms = ["demo-<name>", "claude", "provider:model"];
    assert!(forms.iter().all(|f| message.contains(f)), "{message}");

    let client = crate::support::client();
    let raw = |bytes: &[u8], content_type: Option<&str>| {
        let url = format!("{}/api/debates", app.base);
        let mut request = client.post(url).body(bytes.to_vec());
        if let Some(kind) = content_type {
            request = request.header("content-type", kind);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    let json_type = Some("application/json");
    let truncated = br#"{"topic": "x", "agents": ["demo-a"]"#;
    let not_utf8 = b"{\"topic\": \"\xff\xfe\", \"agents\": [\"demo-a\"]}";
    for bytes in [&truncated[..], &not_utf8[..]] {
        let (status, error) = raw(bytes, json_type).await;
        assert_error(status, &error, 400, "BAD_REQUEST");
    }
    let fine = br#"{"topic": "x", "agents": ["demo-a"]}"#;
    for content_type in [None, Some("text/plain")] {
        let (status, error) = raw(fine, content_type).await;
        assert_error(status, &error, 415, "UNSUPPORTED_MEDIA_TYPE");
    }
    let huge = with(json!({"context": "x".repeat(2 << 20)})).to_string();
    let (status, error) = raw(huge.as_bytes(), json_type).await;
    assert_error(status, &error, 413, "PAYLOAD_TOO_LARGE");

    // The versioned paths answer in their own error forms.
    let (status, v1) = api.post("/api/v1/debates", json!({"agents": DEMO})).await;
    assert_eq!((status, &v1["status"]), (400, &json!(400)), "{v1}");
    assert!(
        v1["error"].as_str().is_some_and(|m| m.contains("topic")),
        "{v1}"
    );
    let body = json!({"task": "t", "agents": ["gpt-4o"], "auto_select": false});
    let (status, v2) = api.post("/api/v2/debates", body).await;
    assert_eq!((status, &v2["code"]), (400, &json!("BAD_REQUEST")), "{v2}");
    let names_key = v2["error"]
        .as_str()
        .is_some_and(|m| m.contains("OPENAI_API_KEY"));
    assert!(names_key, "{v2}");

    // Nothing was stored: the one good debate is the only one listed.
    let good = api.demo("The only one").await;
    assert_eq!(ids(&api.listed("", 1).await), [good]);
    app.stop.cancel();
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leaderboard_ranks_demo_agents_after_two_debates() {
    let (app, api) = Api::spawn(&[]).await;
    let (status, empty) = api.get("/api/leaderboard").await;
    assert_eq!(
        (status, pick(&empty, "agents total")),
        (200, json!({"agents": [], "total": 0}))
    );
    for topic in ["Tabs or spaces?", "Should homework be abolished?"] {
        api.finished(&api.demo(topic).await).await;
    }
    let both_counted = |board: &Value| {
        let agents = board["agents"].as_array().unwrap();
        agents.len() == 3 && agents.iter().all(|a| a["debates"] == 2)
    };
    let board = api.until("/api/leaderboard", both_counted).await;
    let agents = board["agents"].as_array().unwrap();
    let mut names: Vec<&str> = agents.iter().map(|a| a["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!((names, &board["total"]), (DEMO.to_vec(), &json!(3)));
    let elos: Vec<f64> = agents
        .iter()
        .map(|a| a["elo"].as_f64().expect("elo"))
        .collect();
    assert!(elos.windows(2).all(|w| w[0] >= w[1]), "best first: {board}");
    let drift = (elos.iter().sum::<f64>() - 1500.0 * 3.0).abs();
    assert!(drift < 0.2, "ratings sum to 1500 each: {board}");
    let (mut wins, mut losses) = (0, 0);
    for (rank, agent) in agents.iter().enumerate() {
        assert_eq!(agent["rank"], rank + 1);
        let games = ["wins", "losses", "draws"].map(|k| agent[k].as_u64().unwrap());
        assert_eq!(
            games.iter().sum::<u64>(),
            4,
            "2 opponents in 2 debates: {agent}"
        );
        (wins, losses) = (wins + games[0], losses + games[1]);
    }
    assert_eq!(wins, losses, "{board}");
    for path in ["/api/leaderboard/rankings", "/api/v1/leaderboard"] {
        assert_eq!(api.get(path).await, (200, board.clone()), "{path}");
    }
    for path in ["/api/v2/agents/leaderboard", "/api/v2/agents/rankings"] {
        let (status, v2) = api.get(path).await;
        assert_eq!((status, &v2["data"]), (200, &board), "{path}");
    }
    let (_, one) = api.get("/api/leaderboard?limit=1").await;
    assert_eq!(
        (&one["agents"], &one["total"]),
        (&json!(agents[..1]), &json!(3))
    );
    for bad in ["limit=0", "limit=101", "limit=many"] {
        let (status, body) = api.get(format!("/api/leaderboard/rankings?{bad}")).await;
        assert_error(status, &body, 400, "BAD_REQUEST");
    }
    app.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn agent_health_and_circuit_breakers() {
    let (app, api) = Api::spawn(&[]).await;
    let (status, health) = api.get("/api/agents/health").await;
    let want = json!({"status": "healthy", "demo_available": true, "open": []});
    assert_eq!(
        (status, pick(&health, "status demo_available open")),
        (200, want)
    );
    assert!(health["circuit_breakers"].is_array(), "{health}");
    let providers = health["providers"].as_array().unwrap();
    let provider = |name: &str| providers.iter().find(|p| p["provider"] == name).unwrap();
    assert_eq!(provider("demo")["configured"], true);
    let want = json!({"configured": false, "variable": "ANTHROPIC_API_KEY"});
    assert_eq!(pick(provider("anthropic"), "configured variable"), want);
    api.finished(&api.demo("Health check").await).await;
    let paths = "/api/agents/circuit-breakers /api/circuit-breakers /api/system/circuit-breakers";
    for path in paths.split(' ') {
        let (status, body) = api.get(path).await;
        let breakers = body["circuit_breakers"]
            .as_array()
            .expect("circuit_breakers");
        assert_eq!((status, &body["open"]), (200, &json!([])), "{path}: {body}");
        assert_eq!(body["total"], breakers.len());
        assert!(
            breakers
                .iter()
                .all(|b| b["state"] == "closed" && b["agent"].is_string())
        );
    }
    app.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn auto_select_without_keys_picks_demo_agents() {
    let (app, api) = Api::spawn(&[]).await;
    let body = json!({"topic": "Pick for me", "rounds": 1, "auto_select": true});
    let current = api.create("/api/debates", body).await;
    let v2 = api
        .create(
            "/api/v2/debates",
            json!({"task": "Pick again", "rounds": 1}),
        )
        .await;
    for created in [&current, &v2["data"]] {
        assert_eq!(created["agents"], json!(DEMO), "{created}");
        let detail = api.finished(created["id"].as_str().unwrap()).await;
        assert_plan(&detail, 1);
        assert_consensus_body(&detail["consensus"], 3);
    }
    app.stop.cancel();
}
