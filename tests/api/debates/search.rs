//! Topic search on the debates list (`q`): case-insensitive beyond ASCII,
//! wildcards taken literally, combined with the status filter and pages,
//! only the caller's debates (admins: all), and its configured length.

use serde_json::{Value, json};

use super::{Api, assert_error, ids, pick};
use crate::support::accounts::signed_in;
use crate::support::{Kind, on_both_backends};

on_both_backends! {
    search_finds_topics_ignoring_case_and_wildcards => search_finds_topics;
}

/// `text` as one query value (percent-encoded).
fn q(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The list at `query`; asserts 200.
async fn search(api: &Api, query: String) -> Value {
    let (status, body) = api.get(format!("/api/debates?{query}")).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn search_finds_topics(kind: Kind) {
    let (app, admin) = Api::spawn_on(kind, &[("SERVICE_DEBATE_SEARCH_MAX_CHARS", "12")]).await;
    let ada = Api::with(&app.base, &signed_in(&app.base, "ada@example.com").await.1);
    let bob = Api::with(&app.base, &signed_in(&app.base, "bob@example.com").await.1);
    let apples = ada.demo("ÄPFEL oder Birnen?").await;
    let percent = ada.demo("Is 100% sure_thing real?").await;
    let plain = ada.demo("Plain 100 and sure").await;
    let rust = ada.demo("Rust versus Go").await;
    let bobs = bob.demo("Äpfel für Bob").await;
    for id in [&apples, &percent, &plain, &rust] {
        ada.finished(id).await;
    }
    bob.finished(&bobs).await;

    // Case-insensitive, non-ASCII too; only the caller's own debates.
    let found = search(&ada, format!("q={}", q("äpfel"))).await;
    assert_eq!(ids(&found), [apples.as_str()], "{found}");
    assert_eq!(found["total"], 1);
    let found = search(&bob, format!("q={}", q("äPfEl"))).await;
    assert_eq!(ids(&found), [bobs.as_str()]);
    let found = search(&admin, format!("q={}", q("ÄPFEL"))).await;
    assert_eq!(
        ids(&found),
        [bobs.as_str(), apples.as_str()],
        "admins see all"
    );

    // `%`, `_` and `\` are themselves, not wildcards.
    let found = search(&ada, format!("q={}", q("100%"))).await;
    assert_eq!(ids(&found), [percent.as_str()]);
    let found = search(&ada, format!("q={}", q("_"))).await;
    assert_eq!(ids(&found), [percent.as_str()]);
    let found = search(&ada, format!("q={}", q("100_"))).await;
    assert_eq!(found["total"], 0, "{found}");
    let found = search(&ada, format!("q={}", q("\\"))).await;
    assert_eq!(found["total"], 0, "{found}");
    let found = search(&ada, format!("q={}", q("%"))).await;
    assert_eq!(ids(&found), [percent.as_str()]);

    // With the status filter and pages.
    let found = search(&ada, format!("q={}&status=completed", q("RUST"))).await;
    assert_eq!(ids(&found), [rust.as_str()]);
    let found = search(&ada, format!("q={}&status=running", q("rust"))).await;
    assert_eq!(pick(&found, "total count"), json!({"total": 0, "count": 0}));
    let first = search(&ada, format!("q={}&limit=1", q("100"))).await;
    let second = search(&ada, format!("q={}&limit=1&offset=1", q("100"))).await;
    let past = search(&ada, format!("q={}&limit=1&offset=2", q("100"))).await;
    assert_eq!(ids(&first), [plain.as_str()], "newest first");
    assert_eq!(ids(&second), [percent.as_str()]);
    let want = json!({"total": 2, "count": 1, "has_more": true});
    assert_eq!(pick(&first, "total count has_more"), want);
    assert_eq!(pick(&past, "total count"), json!({"total": 2, "count": 0}));
    // A blank search is no search.
    let found = search(&ada, "q=%20".to_owned()).await;
    assert_eq!(found["total"], 4);

    // Every mount takes it.
    let found = search(&ada, format!("q={}", q("versus"))).await;
    let (_, v1) = ada.get(format!("/api/v1/debates?q={}", q("versus"))).await;
    let (_, v2) = ada.get(format!("/api/v2/debates?q={}", q("versus"))).await;
    assert_eq!(ids(&v1), ids(&found));
    assert_eq!(ids(&v2["data"]), [rust.as_str()], "{v2}");

    // The configured length, in characters, and the spec's error form.
    let twelve = "Ä".repeat(12);
    let found = search(&ada, format!("q={}", q(&twelve))).await;
    assert_eq!(found["total"], 0);
    for path in ["/api/debates", "/api/v1/debates"] {
        let (status, body) = ada.get(format!("{path}?q={}", q(&"Ä".repeat(13)))).await;
        let message = assert_error(status, &body, 400, "BAD_REQUEST");
        assert!(message.contains("12"), "{message}");
    }
    let (status, body) = ada
        .get(format!("/api/v2/debates?q={}", q(&"a".repeat(13))))
        .await;
    assert_eq!(
        (status, &body["code"]),
        (400, &json!("BAD_REQUEST")),
        "{body}"
    );
    let (status, body) = ada.get(format!("/api/debates?q={}", q("a\0b"))).await;
    assert_error(status, &body, 400, "BAD_REQUEST");

    // The OpenAPI document states the configured length on each mount.
    let (_, doc) = admin.get("/api/v1/openapi.json").await;
    for path in ["/api/debates", "/api/v1/debates", "/api/v2/debates"] {
        let parameters = doc["paths"][path]["get"]["parameters"].as_array().unwrap();
        let q = parameters.iter().find(|p| p["name"] == "q").unwrap();
        assert_eq!(q["schema"]["maxLength"], 12, "{path}: {q}");
    }
    app.stop.cancel();
}
