//! The fields the upstream Python SDK (`aragora-sdk`) reads, beside the
//! spec's own: `success` on create, the detail's `rounds` as a list of
//! rounds with `max_rounds` and `rounds_completed`, `final_answer`, the
//! consensus `reached`/`supporting_agents`/`dissenting_agents`, and lists
//! under `items` that an offset paginator walks to the end.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{Api, DEMO, ids, pick};

/// The messages of `detail` grouped by round: its `rounds` must be these.
fn grouped(messages: &[Value]) -> Vec<Value> {
    let mut rounds: Vec<Value> = Vec::new();
    for message in messages {
        let round = &message["round"];
        match rounds.last_mut() {
            Some(last) if &last["round_number"] == round => {
                last["messages"]
                    .as_array_mut()
                    .unwrap()
                    .push(message.clone());
            }
            _ => rounds.push(json!({"round_number": round, "messages": [message]})),
        }
    }
    rounds
}

fn names(list: &Value) -> BTreeSet<String> {
    let list = list
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"));
    list.iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect()
}

/// The consensus fields the SDK reads agree with the §2.1 ones and the votes.
fn assert_sdk_consensus(body: &Value) {
    let reached = body["status"] == "consensus_reached";
    assert_eq!(body["reached"], reached, "{body}");
    assert_eq!(
        body["confidence"], body["consensus"]["confidence"],
        "{body}"
    );
    assert_eq!(body["final_answer"], body["consensus"]["summary"], "{body}");
    let (supporting, dissenting) = (
        names(&body["supporting_agents"]),
        names(&body["dissenting_agents"]),
    );
    assert!(supporting.is_disjoint(&dissenting), "{body}");
    let votes = body["votes"].as_array().unwrap();
    for vote in votes {
        let agent = vote["agent"].as_str().unwrap();
        let side = if vote["choice"] == "disagree" {
            &dissenting
        } else {
            &supporting
        };
        assert!(side.contains(agent), "{agent} on the wrong side: {body}");
    }
    let voters: BTreeSet<String> = votes
        .iter()
        .map(|v| v["agent"].as_str().unwrap().to_owned())
        .collect();
    let sides: BTreeSet<String> = supporting.union(&dissenting).cloned().collect();
    assert_eq!(sides, voters, "{body}");
    let counts = &body["voting_summary"];
    let agreeing =
        counts["agree"].as_u64().unwrap() + counts["agree_with_modifications"].as_u64().unwrap();
    assert_eq!(supporting.len() as u64, agreeing, "{body}");
    assert_eq!(
        dissenting.len() as u64,
        counts["disagree"].as_u64().unwrap(),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_completed_debate_reads_as_the_sdk_models_expect() {
    let (app, api) = Api::spawn(&[]).await;
    let body = json!({"topic": "Trams or buses?", "agents": DEMO, "rounds": 2});
    let created = api.create("/api/debates", body).await;
    let want = json!({"success": true, "rounds": 2});
    assert_eq!(pick(&created, "success rounds"), want, "{created}");
    let v1 = api
        .create(
            "/api/v1/debates",
            json!({"topic": "v1", "agents": DEMO, "max_rounds": 1}),
        )
        .await;
    assert_eq!(v1["success"], true, "{v1}");
    let v2 = api
        .create(
            "/api/v2/debates",
            json!({"task": "v2", "agents": DEMO, "rounds": 1}),
        )
        .await;
    assert_eq!(v2["data"]["success"], true, "{v2}");

    let id = created["id"].as_str().unwrap();
    let detail = api.finished(id).await;
    let want = json!({"max_rounds": 2, "rounds_completed": 2});
    assert_eq!(pick(&detail, "max_rounds rounds_completed"), want);
    let rounds = detail["rounds"].as_array().expect("rounds is a list");
    assert_eq!(rounds.len(), 2, "{detail}");
    let (status, page) = api
        .get(format!("/api/debates/{id}/messages?limit=100"))
        .await;
    assert_eq!(status, 200, "{page}");
    let messages = page["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 15, "2 rounds of 3 agents: {page}");
    assert_eq!(page["items"], page["messages"], "the page under items too");
    assert_eq!(Value::from(grouped(messages)), detail["rounds"]);
    let numbers: Vec<&Value> = rounds.iter().map(|r| &r["round_number"]).collect();
    assert_eq!(numbers, [&json!(1), &json!(2)]);

    let (status, consensus) = api.get(format!("/api/debates/{id}/consensus")).await;
    assert_eq!(status, 200, "{consensus}");
    assert_sdk_consensus(&consensus);
    assert_eq!(
        names(&consensus["supporting_agents"]).len() + names(&consensus["dissenting_agents"]).len(),
        3
    );
    assert_eq!(detail["consensus"], consensus);
    let summary = consensus["consensus"]["summary"].as_str().unwrap();
    assert!(!summary.is_empty());
    assert_eq!(detail["final_answer"], summary);

    // The same bodies under /api/v1 and, wrapped, under /api/v2.
    assert_eq!(
        api.get(format!("/api/v1/debates/{id}")).await,
        (200, detail.clone())
    );
    let (status, v2) = api.get(format!("/api/v2/debates/{id}")).await;
    assert_eq!((status, &v2["data"]), (200, &detail), "{v2}");
    let (status, v2) = api.get(format!("/api/v2/debates/{id}/consensus")).await;
    assert_eq!((status, &v2["data"]), (200, &consensus), "{v2}");

    // List items carry the counts, not the rounds themselves.
    let list = api.listed("?status=completed", 3).await;
    let item = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == id)
        .expect("listed");
    let want = json!({"max_rounds": 2, "rounds_completed": 2, "rounds": null});
    assert_eq!(pick(item, "max_rounds rounds_completed rounds"), want);
    app.stop.cancel();
}

/// A running debate: the round under way is listed with what landed so
/// far, and nothing is completed or decided yet. One agent talks to a
/// server that never answers, so the first round never ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_running_debate_shows_its_partial_round() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", silent.local_addr().unwrap());
    let (app, api) = Api::spawn(&[("SERVICE_OPENAI_COMPATIBLE_URL", &url)]).await;
    let body = json!({"topic": "Stuck", "agents": ["demo-a", "local"], "rounds": 2});
    let created = api.create("/api/debates", body).await;
    let id = created["id"].as_str().unwrap();
    let path = format!("/api/debates/{id}");
    let detail = api.until(&path, |d| d["message_count"] == 1).await;
    let want = json!({"status": "running", "max_rounds": 2, "rounds_completed": 0,
        "final_answer": null, "consensus": null});
    let fields = "status max_rounds rounds_completed final_answer consensus";
    assert_eq!(pick(&detail, fields), want, "{detail}");
    let messages = detail["messages"].as_array().unwrap();
    assert_eq!(Value::from(grouped(messages)), detail["rounds"]);
    assert_eq!(detail["rounds"][0]["messages"][0]["agent"], "demo-a");
    let (status, _) = api.get(format!("/api/debates/{id}/consensus")).await;
    assert_eq!(status, 202);
    app.stop.cancel();
}

/// Walks `path` as the SDK's `list_all` does: `limit`, then `offset` moved
/// on by the items read, until a short page or `total` is reached.
async fn walk(api: &Api, path: &str, page_size: usize) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        let join = if path.contains('?') { '&' } else { '?' };
        let url = format!("{path}{join}limit={page_size}&offset={}", seen.len());
        let (status, page) = api.get(&url).await;
        assert_eq!(status, 200, "{url}: {page}");
        assert_eq!(page["items"], page["debates"], "{page}");
        let items = page["items"].as_array().unwrap();
        let more = seen.len() + items.len() < page["total"].as_u64().unwrap() as usize;
        assert_eq!(page["has_more"], more, "{page}");
        seen.extend(items.iter().map(|d| d["id"].as_str().unwrap().to_owned()));
        if items.len() < page_size || !more {
            return seen;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_list_pages_under_items_to_the_last_debate() {
    let (app, api) = Api::spawn(&[]).await;
    let mut all = Vec::new();
    for n in 0..7 {
        all.push(api.demo(&format!("Paged {n}")).await);
    }
    for id in &all {
        api.finished(id).await;
    }
    all.reverse(); // newest first
    for path in ["/api/debates", "/api/v1/debates", "/api/debates/list"] {
        for page_size in [2, 7, 20] {
            assert_eq!(
                walk(&api, path, page_size).await,
                all,
                "{path} by {page_size}"
            );
        }
    }
    let completed = walk(&api, "/api/v1/debates?status=completed", 3).await;
    assert_eq!(completed, all);
    assert!(walk(&api, "/api/debates?status=failed", 3).await.is_empty());

    // v2 wraps the same page, and its `links` follow the offsets.
    let (status, v2) = api.get("/api/v2/debates?limit=3&offset=3").await;
    assert_eq!(status, 200, "{v2}");
    let data = &v2["data"];
    assert_eq!(data["items"], data["debates"], "{v2}");
    assert_eq!(ids(data), all[3..6]);
    let want = json!({"total": 7, "count": 3, "has_more": true});
    assert_eq!(pick(data, "total count has_more"), want);
    assert!(
        v2["links"]["next"].as_str().unwrap().contains("offset=6"),
        "{v2}"
    );

    // Batch: the found debates under `items` too.
    let body = json!({"debate_ids": [all[0], "no-such-id", all[1]]});
    let (status, found) = api.post("/api/debates/batch", body).await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["items"], found["debates"]);
    assert_eq!(ids(&found), all[..2]);
    let shaped =
        found["items"].as_array().unwrap().iter().all(|d| {
            d["rounds"].as_array().map(Vec::len) == Some(1) && d["final_answer"].is_string()
        });
    assert!(shaped, "{found}");
    app.stop.cancel();
}

/// One debate exported: the detail as JSON, its summary, messages and votes
/// as CSV tables, and a Markdown report; another user's debate is a 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_debate_exports_as_json_csv_and_markdown() {
    let (app, api) = Api::spawn(&[]).await;
    let id = api.demo("Tea, or coffee?").await;
    let detail = api.finished(&id).await;
    let fetch = |path: String| {
        let request = crate::support::client()
            .get(format!("{}{path}", api.base))
            .bearer_auth(crate::support::TEST_TOKEN);
        super::fetched(request)
    };
    for prefix in ["/api", "/api/v1"] {
        let (status, kind, body) = fetch(format!("{prefix}/debates/{id}/export/json")).await;
        assert_eq!((status, kind.as_str()), (200, "application/json"));
        let exported: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(exported, detail, "the JSON export is the detail");
    }
    let (status, kind, summary) = fetch(format!("/api/debates/{id}/export/csv")).await;
    assert_eq!((status, kind.as_str()), (200, "text/csv; charset=utf-8"));
    let lines: Vec<&str> = summary.lines().collect();
    assert!(lines[0].starts_with("id,topic,status,"), "{summary}");
    assert!(lines[1].starts_with(&format!("{id},\"Tea, or coffee?\",completed,")));
    let messages = detail["messages"].as_array().unwrap().len();
    let (_, _, table) = fetch(format!("/api/debates/{id}/export/csv?table=messages")).await;
    assert!(table.starts_with("index,round,phase,agent,"), "{table}");
    let rows = table
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()));
    assert_eq!(rows.count(), messages, "one row a message: {table}");
    let (_, _, votes) = fetch(format!("/api/debates/{id}/export/csv?table=votes")).await;
    for agent in DEMO {
        assert!(votes.contains(&format!("\n{agent},")), "{agent} in {votes}");
    }
    let (status, kind, report) = fetch(format!("/api/debates/{id}/export/md")).await;
    assert_eq!(
        (status, kind.as_str()),
        (200, "text/markdown; charset=utf-8")
    );
    assert!(report.starts_with("# Tea, or coffee?\n"), "{report}");
    let summary_text = detail["final_answer"].as_str().unwrap();
    assert!(
        report.contains("## Consensus") && report.contains("## Votes"),
        "{report}"
    );
    assert!(report.contains(summary_text.trim()), "{report}");
    for bad in ["pdf", "csv?table=critiques"] {
        let (status, _, _) = fetch(format!("/api/debates/{id}/export/{bad}")).await;
        assert_eq!(status, 400, "{bad}");
    }
    let (status, _, _) = fetch("/api/debates/no-such-debate/export/json".to_owned()).await;
    assert_eq!(status, 404);
    app.stop.cancel();
}
