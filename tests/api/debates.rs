//! Debate endpoints end to end (written by a helper): the three create
//! forms, the §2.1 consensus body, detail and messages, listing, batch,
//! export, bad input, deprecated aliases, the leaderboard, agent health and
//! automatic agent selection. Demo agents only: no key, no network.

use std::time::Duration;

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::auth::ROOMY;
use crate::serve::{Spawned, spawn_with};
use crate::support::accounts::{call, signed_in};
use crate::support::{Kind, TEST_TOKEN, on_both_backends};

const DEMO: [&str; 3] = ["demo-a", "demo-b", "demo-c"];
const GET: Method = Method::GET;
const POST: Method = Method::POST;

on_both_backends! {
    create_run_and_read_the_consensus => create_run_and_read_the_consensus;
}

async fn spawn(extra: &[(&str, &str)]) -> Spawned {
    let mut vars = ROOMY.to_vec();
    vars.push(("SERVICE_RATE_LIMIT_DEBATE_CREATE", "1000000"));
    vars.extend_from_slice(extra);
    spawn_with(Kind::Sqlite, &vars).await
}

/// POSTs a create body to `path`; asserts 201 and returns the body.
async fn create(base: &str, token: &str, path: &str, body: Value) -> Value {
    let (status, created) = call(POST, &format!("{base}{path}"), Some(token), Some(body)).await;
    assert_eq!(status, 201, "{created}");
    created
}

/// A demo debate of one round on `topic`, created as `token`; returns its id.
async fn demo(base: &str, token: &str, topic: &str) -> String {
    let body = json!({"topic": topic, "agents": DEMO, "rounds": 1});
    let created = create(base, token, "/api/debates", body).await;
    created["id"].as_str().unwrap().to_owned()
}

/// The create response of §2.1: returns the id.
fn assert_created(created: &Value, topic: &str) -> String {
    let id = created["id"].as_str().expect("id is a string");
    assert!(!id.is_empty(), "{created}");
    assert_eq!(created["debate_id"], id, "{created}");
    assert_eq!(created["status"], "running", "a slot is free: {created}");
    assert_eq!(created["topic"], topic);
    let at = created["created_at"].as_str().expect("created_at");
    chrono::DateTime::parse_from_rfc3339(at).expect("created_at is a timestamp");
    id.to_owned()
}

/// Polls the detail until the debate is finished; asserts it completed.
async fn finished(base: &str, token: &str, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, detail) =
            call(GET, &format!("{base}/api/debates/{id}"), Some(token), None).await;
        assert_eq!(status, 200, "{detail}");
        if matches!(detail["status"].as_str(), Some("completed" | "failed")) {
            assert_eq!(detail["status"], "completed", "{detail}");
            return detail;
        }
        assert!(
            Instant::now() < deadline,
            "debate {id} never finished: {detail}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The general error form (§7) with `status` and `code`.
fn assert_error(status: u16, body: &Value, want: u16, code: &str) {
    assert_eq!(status, want, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "{body}");
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
    let confidence = consensus["confidence"]
        .as_f64()
        .expect("confidence is a number");
    assert!((0.0..=1.0).contains(&confidence), "{body}");
    for key in ["key_points", "disagreements"] {
        let items = consensus[key]
            .as_array()
            .unwrap_or_else(|| panic!("{key}: {body}"));
        assert!(items.iter().all(Value::is_string), "{key}: {body}");
    }
    let votes: u64 = ["agree", "agree_with_modifications", "disagree"]
        .iter()
        .map(|key| {
            let count = &body["voting_summary"][key];
            count
                .as_u64()
                .unwrap_or_else(|| panic!("{key} is an integer: {body}"))
        })
        .sum();
    assert_eq!(votes, agents, "every agent voted once: {body}");
}

/// A majority debate's status follows its agreeing share and threshold.
fn assert_decided_by_share(body: &Value) {
    let votes = &body["voting_summary"];
    let agreeing =
        votes["agree"].as_f64().unwrap() + votes["agree_with_modifications"].as_f64().unwrap();
    let share = agreeing / (agreeing + votes["disagree"].as_f64().unwrap());
    assert!(
        (body["agreeing_share"].as_f64().unwrap() - share).abs() < 1e-9,
        "{body}"
    );
    let reached = share >= body["threshold"].as_f64().unwrap();
    assert_eq!(body["status"] == "consensus_reached", reached, "{body}");
}

/// Messages of a 3 demo agent debate under the default phases: opening in
/// round 1 only, then critique and revision every round, each stage once per
/// agent; synthesis and votes are not messages.
fn assert_plan(detail: &Value, rounds: u32) {
    let messages = detail["messages"].as_array().expect("messages");
    let stages: Vec<(u32, &str)> = (1..=rounds)
        .flat_map(|round| ["opening", "critique", "revision"].map(|phase| (round, phase)))
        .filter(|(round, phase)| *round == 1 || *phase != "opening")
        .collect();
    assert_eq!(messages.len(), stages.len() * 3, "{detail}");
    assert_eq!(detail["message_count"], messages.len());
    for (&(round, phase), chunk) in stages.iter().zip(messages.chunks(3)) {
        let mut agents: Vec<&str> = chunk
            .iter()
            .map(|m| {
                assert_eq!(
                    (m["round"].as_u64(), m["phase"].as_str()),
                    (Some(u64::from(round)), Some(phase))
                );
                m["agent"].as_str().unwrap()
            })
            .collect();
        agents.sort_unstable();
        assert_eq!(agents, DEMO, "round {round} {phase}");
    }
    for (index, message) in messages.iter().enumerate() {
        assert_eq!(message["index"], index);
        let agent = message["agent"].as_str().unwrap();
        let content = message["content"].as_str().unwrap();
        assert!(
            content.starts_with(&format!("[demo agent {agent}]")),
            "{content}"
        );
        assert_eq!(message["provider"], "demo");
        let mut targets: Vec<&str> = message["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        targets.sort_unstable();
        if message["phase"] == "critique" {
            let others: Vec<&str> = DEMO.into_iter().filter(|a| *a != agent).collect();
            assert_eq!(targets, others, "{message}");
            assert!(
                others
                    .iter()
                    .all(|o| content.contains(&format!("On {o} ("))),
                "{content}"
            );
        } else {
            assert!(targets.is_empty(), "{message}");
        }
    }
}

async fn create_run_and_read_the_consensus(kind: Kind) {
    let mut vars = ROOMY.to_vec();
    vars.push(("SERVICE_RATE_LIMIT_DEBATE_CREATE", "1000000"));
    let app = spawn_with(kind, &vars).await;
    let (base, t) = (app.base.as_str(), TEST_TOKEN);

    // Current form.
    let topic = "Should cities ban cars downtown?";
    let protocol =
        json!({"phases": ["opening", "critique", "revision", "vote"], "consensus_threshold": 0.6});
    let body = json!({"topic": topic, "agents": DEMO, "rounds": 2, "protocol": protocol});
    let created = create(base, t, "/api/debates", body).await;
    let id = assert_created(&created, topic);
    assert_eq!(
        (created["rounds"].as_u64(), &created["agents"]),
        (Some(2), &json!(DEMO))
    );
    let detail = finished(base, t, &id).await;
    assert_plan(&detail, 2);
    assert_eq!(detail["synthesis"]["agent"], "demo-a", "{detail}");
    assert!(detail["synthesis"]["summary"].is_string());
    let (status, consensus) = call(
        GET,
        &format!("{base}/api/debates/{id}/consensus"),
        Some(t),
        None,
    )
    .await;
    assert_eq!(status, 200, "{consensus}");
    assert_consensus_body(&consensus, 3);
    assert_eq!(consensus["debate_id"], id.as_str());
    assert_eq!(consensus["mode"], "majority");
    assert_eq!(consensus["threshold"], 0.6);
    assert_decided_by_share(&consensus);
    assert_eq!(detail["consensus"], consensus);
    let (status, v1) = call(
        GET,
        &format!("{base}/api/v1/debates/{id}/consensus"),
        Some(t),
        None,
    )
    .await;
    assert_eq!((status, &v1), (200, &consensus));
    let (status, v2) = call(
        GET,
        &format!("{base}/api/v2/debates/{id}/consensus"),
        Some(t),
        None,
    )
    .await;
    assert_eq!((status, &v2["data"]), (200, &consensus), "{v2}");
    assert_eq!(v2["meta"]["version"], "2");
    assert!(v2["meta"]["request_id"].is_string() && v2["meta"]["timestamp"].is_string());

    // Version 1 form.
    let body = json!({"topic": "Is remote work here to stay?", "agents": DEMO, "max_rounds": 1});
    let created = create(base, t, "/api/v1/debates", body).await;
    let id = assert_created(&created, "Is remote work here to stay?");
    assert_eq!(created["rounds"], 1);
    assert_plan(&finished(base, t, &id).await, 1);
    let (status, consensus) = call(
        GET,
        &format!("{base}/api/debates/{id}/consensus"),
        Some(t),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_consensus_body(&consensus, 3);

    // Version 2 form, in the v2 envelope.
    let context = "The city budget is tight this year.";
    let body = json!({"task": "Build a tram line?", "agents": DEMO, "rounds": 1, "consensus": "majority",
        "auto_select": false, "context": context});
    let created = create(base, t, "/api/v2/debates", body).await;
    assert_eq!(created["meta"]["version"], "2", "{created}");
    let id = assert_created(&created["data"], "Build a tram line?");
    let detail = finished(base, t, &id).await;
    assert_plan(&detail, 1);
    assert_eq!(detail["context"], context);
    assert_eq!(detail["protocol"]["consensus"], "majority");
    for opening in detail["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["phase"] == "opening")
    {
        assert!(
            opening["content"].as_str().unwrap().contains(context),
            "{opening}"
        );
    }
    let (status, v2) = call(GET, &format!("{base}/api/v2/debates/{id}"), Some(t), None).await;
    assert_eq!((status, &v2["data"]["id"]), (200, &json!(id)));
    let (status, v2) = call(
        GET,
        &format!("{base}/api/v2/debates/{id}/consensus"),
        Some(t),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_consensus_body(&v2["data"], 3);

    let (_, list) = call(
        GET,
        &format!("{base}/api/debates?status=completed"),
        Some(t),
        None,
    )
    .await;
    assert_eq!(list["total"], 3, "{list}");
    app.stop.cancel();
}

/// While a debate runs or waits, its consensus answers 202 with the status.
/// One agent talks to a server that never answers and only one debate may
/// run, so the first stays `running` and the second `pending`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn consensus_is_202_while_running_or_pending() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", silent.local_addr().unwrap());
    let app = spawn(&[
        ("SERVICE_OPENAI_COMPATIBLE_URL", &url),
        ("SERVICE_MAX_CONCURRENT_DEBATES", "1"),
    ])
    .await;
    let (base, t) = (app.base.as_str(), TEST_TOKEN);
    let body = json!({"topic": "Stuck", "agents": ["demo-a", "local"], "rounds": 1});
    let running = create(base, t, "/api/debates", body).await;
    let running = assert_created(&running, "Stuck");
    let waiting = create(
        base,
        t,
        "/api/debates",
        json!({"topic": "Queued", "agents": DEMO}),
    )
    .await;
    assert_eq!(waiting["status"], "pending", "{waiting}");
    let waiting = waiting["id"].as_str().unwrap();

    for (id, state) in [(running.as_str(), "running"), (waiting, "pending")] {
        for prefix in ["/api", "/api/v1"] {
            let (status, body) = call(
                GET,
                &format!("{base}{prefix}/debates/{id}/consensus"),
                Some(t),
                None,
            )
            .await;
            assert_eq!(status, 202, "{body}");
            assert_eq!(
                (&body["status"], &body["debate_id"]),
                (&json!(state), &json!(id))
            );
            assert!(body["consensus"].is_null() && body["message"].is_string());
        }
        let (status, body) = call(
            GET,
            &format!("{base}/api/v2/debates/{id}/consensus"),
            Some(t),
            None,
        )
        .await;
        assert_eq!(
            (status, &body["data"]["status"]),
            (202, &json!(state)),
            "{body}"
        );
        let (_, list) = call(
            GET,
            &format!("{base}/api/debates?status={state}"),
            Some(t),
            None,
        )
        .await;
        assert_eq!(list["total"], 1, "{list}");
        assert_eq!(list["debates"][0]["id"], id);
    }
    let (_, detail) = call(GET, &format!("{base}/api/debates/{running}"), Some(t), None).await;
    assert_eq!(
        (
            detail["current_round"].as_u64(),
            detail["current_phase"].as_str()
        ),
        (Some(1), Some("opening"))
    );
    let (_, list) = call(
        GET,
        &format!("{base}/api/debates?status=completed"),
        Some(t),
        None,
    )
    .await;
    assert_eq!(list["total"], 0, "{list}");
    app.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn messages_list_and_batch_respect_pages_filters_and_owners() {
    let app = spawn(&[]).await;
    let base = app.base.as_str();
    let (_, ada, _) = signed_in(base, "ada@example.com").await;
    let (_, bob, _) = signed_in(base, "bob@example.com").await;
    let ada1 = demo(base, &ada, "Ada's first").await;
    let ada2 = demo(base, &ada, "Ada's second").await;
    let bob1 = demo(base, &bob, "Bob's only").await;
    let detail = finished(base, &ada, &ada1).await;
    finished(base, &ada, &ada2).await;
    finished(base, &bob, &bob1).await;

    // Messages, a page at a time.
    let messages = |query: &str| {
        let (url, ada) = (format!("{base}/api/debates/{ada1}/messages{query}"), &ada);
        async move { call(GET, &url, Some(ada), None).await }
    };
    let mut paged = Vec::new();
    for offset in [0, 4, 8] {
        let (status, page) = messages(&format!("?limit=4&offset={offset}")).await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(
            (&page["total"], &page["limit"], &page["offset"]),
            (&json!(9), &json!(4), &json!(offset))
        );
        assert_eq!(page["count"], page["messages"].as_array().unwrap().len());
        paged.extend(page["messages"].as_array().unwrap().iter().cloned());
    }
    assert_eq!(Value::from(paged), detail["messages"]);
    let (_, all) = messages("").await;
    assert_eq!(
        (&all["count"], &all["limit"], &all["debate_id"]),
        (&json!(9), &json!(20), &json!(ada1))
    );
    let (_, past) = messages("?offset=100").await;
    assert_eq!((&past["count"], &past["total"]), (&json!(0), &json!(9)));
    for bad in [
        "limit=0",
        "limit=101",
        "limit=abc",
        "offset=-1",
        "colour=red",
    ] {
        let (status, body) = messages(&format!("?{bad}")).await;
        assert_error(status, &body, 400, "BAD_REQUEST");
    }

    // Owners: each user sees their own, the admin every debate.
    let list = |token: &str, query: &str| {
        let url = format!("{base}/api/debates{query}");
        let token = token.to_owned();
        async move { call(GET, &url, Some(&token), None).await }
    };
    let ids = |list: &Value| -> Vec<String> {
        list["debates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (_, mine) = list(&ada, "").await;
    assert_eq!(
        (mine["total"].as_u64(), ids(&mine)),
        (Some(2), vec![ada2.clone(), ada1.clone()]),
        "newest first"
    );
    let (_, theirs) = list(&bob, "").await;
    assert_eq!(ids(&theirs), [bob1.clone()]);
    for path in [String::new(), "/consensus".into(), "/messages".into()] {
        let (status, body) = call(
            GET,
            &format!("{base}/api/debates/{ada1}{path}"),
            Some(&bob),
            None,
        )
        .await;
        assert_error(status, &body, 404, "NOT_FOUND");
        let (status, _) = call(
            GET,
            &format!("{base}/api/debates/{ada1}{path}"),
            Some(TEST_TOKEN),
            None,
        )
        .await;
        assert_eq!(status, 200);
    }
    let (_, every) = list(TEST_TOKEN, "").await;
    assert_eq!(
        (every["total"].as_u64(), every["limit"].as_u64()),
        (Some(3), Some(20))
    );

    // Status filter, pages.
    for (status, total) in [
        ("completed", 3),
        ("pending", 0),
        ("running", 0),
        ("failed", 0),
    ] {
        let (code, body) = list(TEST_TOKEN, &format!("?status={status}")).await;
        assert_eq!(
            (code, body["total"].as_u64()),
            (200, Some(total)),
            "{status}: {body}"
        );
    }
    let (status, body) = list(TEST_TOKEN, "?status=finished").await;
    assert_error(status, &body, 400, "BAD_REQUEST");
    let (_, first) = list(TEST_TOKEN, "?limit=1").await;
    let (_, second) = list(TEST_TOKEN, "?limit=1&offset=1").await;
    assert_eq!(
        (first["count"].as_u64(), first["total"].as_u64()),
        (Some(1), Some(3))
    );
    assert_eq!(
        (ids(&first), ids(&second)),
        (vec![bob1.clone()], vec![ada2.clone()])
    );
    let (_, none) = list(TEST_TOKEN, "?offset=3").await;
    assert_eq!(
        (none["count"].as_u64(), none["total"].as_u64()),
        (Some(0), Some(3))
    );
    for bad in ["limit=0", "limit=101", "limit=x"] {
        let (status, body) = list(TEST_TOKEN, &format!("?{bad}")).await;
        assert_error(status, &body, 400, "BAD_REQUEST");
    }
    for n in 0..18 {
        demo(base, TEST_TOKEN, &format!("Filler {n}")).await;
    }
    let (_, page) = list(TEST_TOKEN, "").await;
    assert_eq!(
        (page["count"].as_u64(), page["total"].as_u64()),
        (Some(20), Some(21)),
        "default limit 20"
    );

    // Batch.
    let batch = |token: &str, body: Value| {
        let (url, token) = (format!("{base}/api/debates/batch"), token.to_owned());
        async move { call(POST, &url, Some(&token), Some(body)).await }
    };
    let (status, found) = batch(
        &ada,
        json!({"debate_ids": [ada1, bob1, "no-such-id", ada1]}),
    )
    .await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(ids(&found), [ada1.clone()]);
    assert_eq!(
        (&found["not_found"], &found["count"]),
        (&json!([bob1, "no-such-id"]), &json!(1))
    );
    assert_eq!(found["debates"][0]["messages"], detail["messages"]);
    let (_, found) = batch(TEST_TOKEN, json!({"debate_ids": [ada1, bob1]})).await;
    assert_eq!(
        (ids(&found), &found["not_found"]),
        (vec![ada1.clone(), bob1.clone()], &json!([]))
    );
    let many: Vec<String> = (0..101).map(|n| format!("id-{n}")).collect();
    let (status, body) = batch(&ada, json!({"debate_ids": many})).await;
    assert_error(status, &body, 400, "BAD_REQUEST");
    for body in [
        json!({"debate_ids": [], "extra": 1}),
        json!({}),
        json!({"debate_ids": "x"}),
    ] {
        let (status, error) = batch(&ada, body).await;
        assert_error(status, &error, 422, "VALIDATION_ERROR");
    }
    let (status, error) = call(POST, &format!("{base}/api/debates/batch"), Some(&ada), None).await;
    assert_error(status, &error, 415, "UNSUPPORTED_MEDIA_TYPE");
    app.stop.cancel();
}

/// RFC 4180 rows; asserts every quote is where it may be.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let (mut rows, mut row, mut field, mut quoted) = (Vec::new(), Vec::new(), String::new(), false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            (true, '"') => {
                quoted = false;
                assert!(
                    matches!(chars.peek(), Some(',' | '\n')),
                    "text after a closing quote: {text}"
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
        "unterminated CSV: {text}"
    );
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn export_as_json_ndjson_and_csv() {
    let app = spawn(&[]).await;
    let base = app.base.as_str();
    let formula = "=HYPERLINK(\"http://x\", \"click\"), then more";
    let plain = demo(base, TEST_TOKEN, "Plain topic").await;
    let tricky = demo(base, TEST_TOKEN, formula).await;
    finished(base, TEST_TOKEN, &plain).await;
    finished(base, TEST_TOKEN, &tricky).await;
    let client = crate::support::client();
    let export = |format: &str| {
        let request = client.get(format!("{base}/api/debates/export?format={format}"));
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
    assert_eq!(body["count"], 2);
    let ids: Vec<&str> = body["debates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [tricky.as_str(), plain.as_str()]);
    assert_consensus_body(&body["debates"][0]["consensus"], 3);

    let (status, kind, text) = export("ndjson").await;
    assert_eq!((status, kind.as_str()), (200, "application/x-ndjson"));
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect();
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(Value::is_object));
    assert_eq!(
        (&lines[0]["id"], &lines[1]["topic"]),
        (&json!(tricky), &json!("Plain topic"))
    );

    let (status, kind, text) = export("csv").await;
    assert_eq!((status, kind.starts_with("text/csv")), (200, true));
    let rows = parse_csv(&text);
    let header = "id,topic,status,agents,rounds,created_at,completed_at,consensus_status,confidence,agree,agree_with_modifications,disagree,summary,error";
    assert_eq!(rows[0].join(","), header);
    assert_eq!(rows.len(), 3, "{text}");
    assert!(rows.iter().all(|r| r.len() == 14), "{text}");
    assert_eq!(
        rows[1][..5],
        [
            tricky.clone(),
            format!("'{formula}"),
            "completed".into(),
            "demo-a;demo-b;demo-c".into(),
            "1".into()
        ]
    );
    assert_eq!(
        (rows[2][0].as_str(), rows[2][1].as_str()),
        (plain.as_str(), "Plain topic")
    );
    assert!(rows[1][7] == "consensus_reached" || rows[1][7] == "no_consensus");
    let votes: u32 = rows[1][9..12]
        .iter()
        .map(|v| v.parse::<u32>().unwrap())
        .sum();
    assert_eq!(votes, 3);
    assert!(
        rows.iter()
            .flatten()
            .all(|f| !f.starts_with(['=', '+', '-', '@'])),
        "{text}"
    );

    let (status, _, text) = export("xml").await;
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_error(status, &body, 400, "BAD_REQUEST");
    app.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_create_requests_are_refused_and_store_nothing() {
    let app = spawn(&[]).await;
    let base = app.base.as_str();
    let thirteen: Vec<String> = (1..=13).map(|n| format!("demo-{n}")).collect();
    let with = |extra: Value| {
        let mut body = json!({"topic": "Fine topic", "agents": DEMO});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let cases: Vec<(Value, u16, &str, &str)> = vec![
        (json!({"agents": DEMO}), 400, "BAD_REQUEST", "topic"),
        (with(json!({"topic": "   "})), 400, "BAD_REQUEST", "topic"),
        (
            with(json!({"topic": "x".repeat(2001)})),
            400,
            "BAD_REQUEST",
            "topic",
        ),
        (
            with(json!({"context": "x".repeat(20_001)})),
            400,
            "BAD_REQUEST",
            "context",
        ),
        (
            with(json!({"agents": [], "auto_select": false})),
            400,
            "BAD_REQUEST",
            "agents",
        ),
        (
            with(json!({"agents": ["demo-a", "nobody"]})),
            400,
            "BAD_REQUEST",
            "unknown agent 'nobody'",
        ),
        (
            with(json!({"agents": ["demo-a", "claude"]})),
            400,
            "BAD_REQUEST",
            "ANTHROPIC_API_KEY",
        ),
        (with(json!({"agents": thirteen})), 400, "BAD_REQUEST", "12"),
        (
            with(json!({"agents": ["demo-a", "demo-a"]})),
            400,
            "BAD_REQUEST",
            "demo-a",
        ),
        (
            with(json!({"agents": ["demo-a", ""]})),
            400,
            "BAD_REQUEST",
            "agent",
        ),
        (with(json!({"rounds": 0})), 400, "BAD_REQUEST", "rounds"),
        (with(json!({"rounds": 13})), 400, "BAD_REQUEST", "rounds"),
        (
            with(json!({"max_rounds": 13})),
            400,
            "BAD_REQUEST",
            "rounds",
        ),
        (
            with(json!({"rounds": 2, "max_rounds": 3})),
            400,
            "BAD_REQUEST",
            "max_rounds",
        ),
        (
            with(json!({"topic": "a", "task": "b"})),
            400,
            "BAD_REQUEST",
            "task",
        ),
        (
            with(json!({"protocol": {"consensus_threshold": 1.5}})),
            400,
            "BAD_REQUEST",
            "consensus_threshold",
        ),
        (
            with(json!({"protocol": {"consensus_threshold": -0.1}})),
            400,
            "BAD_REQUEST",
            "consensus_threshold",
        ),
        (
            with(json!({"protocol": {"phases": ["opening", "bad phase!"]}})),
            400,
            "BAD_REQUEST",
            "bad phase!",
        ),
        (
            with(json!({"protocol": {"phases": []}})),
            400,
            "BAD_REQUEST",
            "phases",
        ),
        (
            with(json!({"consensus": "plurality"})),
            400,
            "BAD_REQUEST",
            "plurality",
        ),
        (
            with(json!({"judge": "demo-z"})),
            400,
            "BAD_REQUEST",
            "demo-z",
        ),
        (with(json!({"colour": "red"})), 422, "VALIDATION_ERROR", ""),
        (
            with(json!({"protocol": {"speed": 3}})),
            422,
            "VALIDATION_ERROR",
            "",
        ),
        (with(json!({"topic": 5})), 422, "VALIDATION_ERROR", ""),
        (
            with(json!({"agents": "demo-a"})),
            422,
            "VALIDATION_ERROR",
            "",
        ),
        (with(json!({"rounds": "two"})), 422, "VALIDATION_ERROR", ""),
        (with(json!({"rounds": -1})), 422, "VALIDATION_ERROR", ""),
        (
            with(json!({"auto_select": "yes"})),
            422,
            "VALIDATION_ERROR",
            "",
        ),
        (json!(["topic"]), 422, "VALIDATION_ERROR", ""),
    ];
    let client = crate::support::client();
    let url = format!("{base}/api/debates");
    let raw = |bytes: Vec<u8>, content_type: Option<&str>| {
        let mut request = client.post(&url).body(bytes);
        if let Some(kind) = content_type {
            request = request.header("content-type", kind);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    for (body, want, code, needle) in cases {
        let (status, error) = call(POST, &url, Some(TEST_TOKEN), Some(body.clone())).await;
        assert_error(status, &error, want, code);
        let message = error["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(needle),
            "{needle:?} not in {message:?} for {body}"
        );
    }
    let (_, error) = call(
        POST,
        &url,
        Some(TEST_TOKEN),
        Some(with(json!({"agents": ["nobody"]}))),
    )
    .await;
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        ["demo-<name>", "claude", "provider:model"]
            .iter()
            .all(|f| message.contains(f)),
        "{message}"
    );

    let json_type = Some("application/json");
    let (status, error) = raw(
        br#"{"topic": "x", "agents": ["demo-a"]"#.to_vec(),
        json_type,
    )
    .await;
    assert_error(status, &error, 400, "BAD_REQUEST");
    let (status, error) = raw(
        b"{\"topic\": \"\xff\xfe\", \"agents\": [\"demo-a\"]}".to_vec(),
        json_type,
    )
    .await;
    assert_error(status, &error, 400, "BAD_REQUEST");
    let fine = br#"{"topic": "x", "agents": ["demo-a"]}"#.to_vec();
    let (status, error) = raw(fine.clone(), None).await;
    assert_error(status, &error, 415, "UNSUPPORTED_MEDIA_TYPE");
    let (status, error) = raw(fine, Some("text/plain")).await;
    assert_error(status, &error, 415, "UNSUPPORTED_MEDIA_TYPE");
    let huge = serde_json::to_vec(&with(json!({"context": "x".repeat(2 << 20)}))).unwrap();
    let (status, error) = raw(huge, json_type).await;
    assert_error(status, &error, 413, "PAYLOAD_TOO_LARGE");

    // The versioned paths answer in their own error forms.
    let (status, v1) = call(
        POST,
        &format!("{base}/api/v1/debates"),
        Some(TEST_TOKEN),
        Some(json!({"agents": DEMO})),
    )
    .await;
    assert_eq!((status, &v1["status"]), (400, &json!(400)), "{v1}");
    assert!(
        v1["error"].as_str().is_some_and(|m| m.contains("topic")),
        "{v1}"
    );
    let v2_body = json!({"task": "t", "agents": ["gpt-4o"], "auto_select": false});
    let (status, v2) = call(
        POST,
        &format!("{base}/api/v2/debates"),
        Some(TEST_TOKEN),
        Some(v2_body),
    )
    .await;
    assert_eq!((status, &v2["code"]), (400, &json!("BAD_REQUEST")), "{v2}");
    assert!(
        v2["error"]
            .as_str()
            .is_some_and(|m| m.contains("OPENAI_API_KEY")),
        "{v2}"
    );

    let (_, list) = call(GET, &format!("{base}/api/debates"), Some(TEST_TOKEN), None).await;
    assert_eq!(list["total"], 0, "nothing stored: {list}");
    app.stop.cancel();
}

/// `Deprecation`, `Sunset`, `Link` to `successor` and the level headers of §9.
fn assert_deprecated(headers: &HeaderMap, successor: &str) {
    let header = |name: &str| headers.get(name).map_or("", |v| v.to_str().unwrap());
    assert_eq!(header("deprecation"), "@1735689600", "{headers:?}");
    let sunset = header("sunset");
    let date = chrono::DateTime::parse_from_rfc2822(sunset)
        .or_else(|_| chrono::DateTime::parse_from_rfc3339(sunset))
        .map(|d| d.date_naive().to_string())
        .or_else(|_| chrono::NaiveDate::parse_from_str(sunset, "%Y-%m-%d").map(|d| d.to_string()));
    assert_eq!(date.as_deref(), Ok("2026-06-01"), "{sunset}");
    assert_eq!(
        header("link"),
        format!("<{successor}>; rel=\"successor-version\"")
    );
    assert!(
        ["warning", "critical", "sunset"].contains(&header("x-deprecation-level")),
        "{headers:?}"
    );
    assert_eq!(header("x-api-deprecated"), "true");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deprecated_aliases_work_and_name_their_successors() {
    let app = spawn(&[]).await;
    let base = app.base.as_str();
    let client = crate::support::client();
    for (n, path) in ["/api/debate/new", "/api/debates/start", "/api/debate"]
        .into_iter()
        .enumerate()
    {
        let body = json!({"topic": format!("Alias {n}"), "agents": DEMO, "max_rounds": 1});
        let response = client
            .post(format!("{base}{path}"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201, "{path}");
        assert_deprecated(response.headers(), "/api/debates");
        let created: Value = response.json().await.unwrap();
        finished(
            base,
            TEST_TOKEN,
            &assert_created(&created, &format!("Alias {n}")),
        )
        .await;
    }
    let response = client
        .get(format!("{base}/api/debates/list?limit=2"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_deprecated(response.headers(), "/api/debates");
    let list: Value = response.json().await.unwrap();
    assert_eq!(
        (list["count"].as_u64(), list["total"].as_u64()),
        (Some(2), Some(3))
    );
    let body = json!({"task": "Current", "agents": DEMO, "rounds": 1});
    let response = client
        .post(format!("{base}/api/v2/debates"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    assert!(response.headers().get("deprecation").is_none());
    app.stop.cancel();
}

/// §9 names `POST /api/debates/start` as the replacement of `POST /api/debate/new`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "bug: /api/debate/new links to </api/debates>, and /api/debates/start is itself deprecated, where §9 names /api/debates/start as the successor"]
async fn debate_new_names_debates_start_as_its_successor() {
    let app = spawn(&[]).await;
    let client = crate::support::client();
    let body = json!({"topic": "Alias", "agents": DEMO, "rounds": 1});
    let old = client
        .post(format!("{}/api/debate/new", app.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(old.status(), 201);
    assert_deprecated(old.headers(), "/api/debates/start");
    let new = client
        .post(format!("{}/api/debates/start", app.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(new.status(), 201);
    assert!(
        new.headers().get("deprecation").is_none(),
        "{:?}",
        new.headers()
    );
    app.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leaderboard_ranks_demo_agents_after_two_debates() {
    let app = spawn(&[]).await;
    let (base, t) = (app.base.as_str(), TEST_TOKEN);
    let (status, empty) = call(GET, &format!("{base}/api/leaderboard"), Some(t), None).await;
    assert_eq!(
        (status, &empty["agents"], &empty["total"]),
        (200, &json!([]), &json!(0))
    );
    for topic in ["Tabs or spaces?", "Should homework be abolished?"] {
        let id = demo(base, t, topic).await;
        finished(base, t, &id).await;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let board = loop {
        let (_, board) = call(GET, &format!("{base}/api/leaderboard"), Some(t), None).await;
        let agents = board["agents"].as_array().unwrap();
        if agents.len() == 3 && agents.iter().all(|a| a["debates"] == 2) {
            break board;
        }
        assert!(
            Instant::now() < deadline,
            "the leaderboard never counted both debates: {board}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let agents = board["agents"].as_array().unwrap();
    let mut names: Vec<&str> = agents.iter().map(|a| a["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, DEMO);
    let elos: Vec<f64> = agents
        .iter()
        .map(|a| a["elo"].as_f64().expect("elo is a number"))
        .collect();
    assert!(elos.windows(2).all(|w| w[0] >= w[1]), "best first: {board}");
    assert!(
        (elos.iter().sum::<f64>() - 1500.0 * 3.0).abs() < 0.2,
        "zero-sum: {board}"
    );
    assert_eq!(board["total"], 3);
    let (mut wins, mut losses) = (0, 0);
    for (rank, agent) in agents.iter().enumerate() {
        assert_eq!(agent["rank"], rank + 1);
        let games = ["wins", "losses", "draws"].map(|k| agent[k].as_u64().unwrap());
        assert_eq!(
            games.iter().sum::<u64>(),
            4,
            "two opponents in each of two debates: {agent}"
        );
        (wins, losses) = (wins + games[0], losses + games[1]);
    }
    assert_eq!(wins, losses, "{board}");
    for path in ["/api/leaderboard/rankings", "/api/v1/leaderboard"] {
        let (status, same) = call(GET, &format!("{base}{path}"), Some(t), None).await;
        assert_eq!((status, &same), (200, &board), "{path}");
    }
    for path in ["/api/v2/agents/leaderboard", "/api/v2/agents/rankings"] {
        let (status, v2) = call(GET, &format!("{base}{path}"), Some(t), None).await;
        assert_eq!((status, &v2["data"]), (200, &board), "{path}");
    }
    let (_, one) = call(
        GET,
        &format!("{base}/api/leaderboard?limit=1"),
        Some(t),
        None,
    )
    .await;
    assert_eq!(
        (&one["agents"].as_array().unwrap()[..], &one["total"]),
        (&agents[..1], &json!(3))
    );
    for bad in ["limit=0", "limit=101", "limit=many"] {
        let (status, body) = call(
            GET,
            &format!("{base}/api/leaderboard/rankings?{bad}"),
            Some(t),
            None,
        )
        .await;
        assert_error(status, &body, 400, "BAD_REQUEST");
    }
    app.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn agent_health_and_circuit_breakers() {
    let app = spawn(&[]).await;
    let (base, t) = (app.base.as_str(), TEST_TOKEN);
    let (status, health) = call(GET, &format!("{base}/api/agents/health"), Some(t), None).await;
    assert_eq!(status, 200, "{health}");
    assert_eq!(
        (&health["status"], &health["demo_available"]),
        (&json!("healthy"), &json!(true))
    );
    assert_eq!(
        (&health["open"], health["circuit_breakers"].is_array()),
        (&json!([]), true)
    );
    let providers = health["providers"].as_array().unwrap();
    let provider = |name: &str| {
        providers
            .iter()
            .find(|p| p["provider"] == name)
            .unwrap_or_else(|| panic!("{name}: {health}"))
    };
    assert_eq!(provider("demo")["configured"], true);
    assert_eq!(
        (
            &provider("anthropic")["configured"],
            &provider("anthropic")["variable"]
        ),
        (&json!(false), &json!("ANTHROPIC_API_KEY"))
    );
    finished(base, t, &demo(base, t, "Health check").await).await;
    for path in [
        "/api/agents/circuit-breakers",
        "/api/circuit-breakers",
        "/api/system/circuit-breakers",
    ] {
        let (status, body) = call(GET, &format!("{base}{path}"), Some(t), None).await;
        assert_eq!(status, 200, "{path}: {body}");
        let breakers = body["circuit_breakers"]
            .as_array()
            .expect("circuit_breakers");
        assert_eq!(
            (&body["open"], body["total"].as_u64()),
            (&json!([]), Some(breakers.len() as u64))
        );
        assert!(
            breakers
                .iter()
                .all(|b| b["state"] == "closed" && b["agent"].is_string()),
            "{body}"
        );
    }
    app.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn auto_select_without_keys_picks_demo_agents() {
    let app = spawn(&[]).await;
    let (base, t) = (app.base.as_str(), TEST_TOKEN);
    let current = create(
        base,
        t,
        "/api/debates",
        json!({"topic": "Pick for me", "rounds": 1, "auto_select": true}),
    )
    .await;
    let v2 = create(
        base,
        t,
        "/api/v2/debates",
        json!({"task": "Pick for me too", "rounds": 1}),
    )
    .await;
    for created in [&current, &v2["data"]] {
        assert_eq!(created["agents"], json!(DEMO), "{created}");
        let detail = finished(base, t, created["id"].as_str().unwrap()).await;
        assert_plan(&detail, 1);
        assert_consensus_body(&detail["consensus"], 3);
    }
    app.stop.cancel();
}
