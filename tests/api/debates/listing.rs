//! Messages a page at a time, listing by owner, status and page, batch
//! reads, and export as JSON, NDJSON and CSV.

use reqwest::Method;
use serde_json::{Value, json};

use super::{Api, assert_consensus_body, assert_error, ids, pick};
use crate::support::accounts::{call, signed_in};

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
    let message = assert_error(status, &body, 422, "VALIDATION_ERROR");
    assert!(message.starts_with("debate_ids: "), "{message}");
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
        super::fetched(request)
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

/// How much one request may ask for is the deployment's: list pages,
/// batch fetches and exports follow their variables, and the published
/// document states each.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn page_batch_and_export_sizes_follow_their_variables() {
    let (app, api) = Api::spawn(&[
        ("SERVICE_MAX_PAGE_SIZE", "150"),
        ("SERVICE_MAX_BATCH_IDS", "2"),
        ("SERVICE_MAX_EXPORT_DEBATES", "2"),
    ])
    .await;
    let (_, doc) = api.get("/api/openapi.json").await;
    let limit_max = |path: &str| {
        let params = doc["paths"][path]["get"]["parameters"].as_array().unwrap();
        let limit = params.iter().find(|p| p["name"] == "limit").unwrap();
        limit["schema"]["maximum"].clone()
    };
    for path in [
        "/api/debates",
        "/api/debates/{id}/messages",
        "/api/gallery",
        "/api/leaderboard",
        "/api/webhooks",
        "/api/admin/users",
    ] {
        assert_eq!(limit_max(path), 150, "{path}");
    }
    assert_eq!(limit_max("/api/debates/export"), 2);
    let batch = &doc["components"]["schemas"]["BatchBody"]["properties"]["debate_ids"];
    assert_eq!(batch["maxItems"], 2, "{batch}");

    let ids: Vec<String> = [
        api.demo("One").await,
        api.demo("Two").await,
        api.demo("Three").await,
    ]
    .into();
    for id in &ids {
        api.finished(id).await;
    }
    // A page above the old fixed 100, within the deployment's 150.
    for path in [
        "/api/debates?limit=150",
        "/api/admin/users?limit=150",
        "/api/leaderboard?limit=150",
    ] {
        let (status, page) = api.get(path).await;
        assert_eq!(
            (status, &page["limit"]),
            (200, &json!(150)),
            "{path}: {page}"
        );
    }
    let (status, body) = api.get("/api/debates?limit=151").await;
    let message = assert_error(status, &body, 400, "BAD_REQUEST");
    assert_eq!(message, "limit must be between 1 and 150");

    // Batch: two ids, not three.
    let (status, found) = api
        .post("/api/debates/batch", json!({"debate_ids": ids[..2]}))
        .await;
    assert_eq!((status, &found["count"]), (200, &json!(2)), "{found}");
    let (status, body) = api
        .post("/api/debates/batch", json!({"debate_ids": ids}))
        .await;
    assert_error(status, &body, 422, "VALIDATION_ERROR");
    assert_eq!(body["details"]["max"], 2, "{body}");

    // Export: two debates unless asked for fewer; three is refused.
    let (status, export) = api.get("/api/debates/export").await;
    assert_eq!((status, &export["count"]), (200, &json!(2)), "{export}");
    let (status, body) = api.get("/api/debates/export?limit=3").await;
    assert_error(status, &body, 400, "BAD_REQUEST");
    app.stop.cancel();
}
