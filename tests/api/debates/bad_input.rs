//! Bad create requests: each refused with its status, code and a message
//! naming the fault, and none stored.

use serde_json::{Value, json};

use super::{Api, DEMO, assert_error, ids};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_create_requests_are_refused_and_store_nothing() {
    // A 64 KiB body limit: a body a little over it is written whole before
    // the 413 comes back, where a multi-megabyte one can be cut off mid-send.
    let (app, api) = Api::spawn(&[("SERVICE_MAX_REQUEST_BYTES", "65536")]).await;
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
    // Every fault of a field's value, whatever its kind (missing, wrong
    // type, out of range, unknown), is a 422 naming the field; a missing
    // provider key is a 400 (the request is fine, this deployment lacks it).
    let cases = [
        (json!({"agents": DEMO}), invalid, "topic"),
        (with(json!({"topic": "   "})), invalid, "topic"),
        (with(json!({"topic": "x".repeat(2001)})), invalid, "topic"),
        (
            with(json!({"context": "x".repeat(20_001)})),
            invalid,
            "context",
        ),
        (
            with(json!({"agents": [], "auto_select": false})),
            invalid,
            "agents",
        ),
        (with(json!({"agents": ["demo-a"]})), invalid, "agents"),
        (
            with(json!({"agents": ["demo-a", "nobody"]})),
            invalid,
            "unknown agent 'nobody'",
        ),
        (
            with(json!({"agents": ["demo-a", "claude"]})),
            bad,
            "ANTHROPIC_API_KEY",
        ),
        (with(json!({"agents": thirteen})), invalid, "12"),
        (
            with(json!({"agents": ["demo-a", "demo-a"]})),
            invalid,
            "demo-a",
        ),
        (
            with(json!({"agents": ["demo-a", "DEMO-A"]})),
            invalid,
            "lower case",
        ),
        (
            with(json!({"agents": ["demo-a", " demo-b"]})),
            invalid,
            "surrounding spaces",
        ),
        (
            with(json!({"agents": ["demo-a", "demo-b*"]})),
            invalid,
            "lower case",
        ),
        (with(json!({"agents": ["demo-a", ""]})), invalid, "agent"),
        (with(json!({"rounds": 0})), invalid, "rounds"),
        (with(json!({"rounds": 13})), invalid, "rounds"),
        (with(json!({"max_rounds": 13})), invalid, "rounds"),
        (
            with(json!({"rounds": 2, "max_rounds": 3})),
            invalid,
            "max_rounds",
        ),
        (
            with(json!({"rounds": 2, "max_rounds": 2})),
            invalid,
            "give one",
        ),
        (
            with(json!({"rounds": 2, "protocol": {"rounds": 2}})),
            invalid,
            "protocol.rounds",
        ),
        (with(json!({"rounds": 2.5})), invalid, "rounds"),
        (with(json!({"topic": "a", "task": "b"})), invalid, "task"),
        (with(json!({"topic": "a", "task": "a"})), invalid, "task"),
        (threshold(1.5), invalid, "consensus_threshold"),
        (threshold(-0.1), invalid, "consensus_threshold"),
        (
            phases(json!(["opening", "bad phase!"])),
            invalid,
            "bad phase!",
        ),
        (phases(json!([])), invalid, "phases"),
        (phases(json!(["Vote"])), invalid, "Vote"),
        (
            with(json!({"consensus": "plurality"})),
            invalid,
            "plurality",
        ),
        (with(json!({"consensus": "Majority"})), invalid, "Majority"),
        (
            with(json!({"judge": "nobody"})),
            invalid,
            "unknown agent 'nobody'",
        ),
        (with(json!({"colour": "red"})), invalid, "colour"),
        (
            with(json!({"protocol": {"speed": 3}})),
            invalid,
            "protocol.speed",
        ),
        (with(json!({"topic": 5})), invalid, "topic"),
        (with(json!({"agents": "demo-a"})), invalid, "agents"),
        (with(json!({"rounds": "two"})), invalid, "rounds"),
        (with(json!({"rounds": -1})), invalid, "rounds"),
        (with(json!({"auto_select": "yes"})), invalid, "auto_select"),
        (json!(["topic"]), invalid, "body"),
    ];
    for (body, (want, code), needle) in cases {
        let (status, error) = api.post("/api/debates", body.clone()).await;
        let message = assert_error(status, &error, want, code);
        assert!(
            message.contains(needle),
            "{needle:?} not in {message:?} for {body}"
        );
        if want == 422 {
            let field = error["details"]["field"].as_str().unwrap_or("");
            assert!(
                !field.is_empty() && message.starts_with(&format!("{field}: ")),
                "no field in {error} for {body}"
            );
        }
    }
    let (_, error) = api
        .post(
            "/api/debates",
            with(json!({"agents": ["demo-a", "nobody"]})),
        )
        .await;
    let message = error["error"].as_str().unwrap();
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
    let huge = with(json!({"context": "x".repeat(100_000)})).to_string();
    let (status, error) = raw(huge.as_bytes(), json_type).await;
    assert_error(status, &error, 413, "PAYLOAD_TOO_LARGE");

    // The versioned paths answer in their own error forms.
    let (status, v1) = api.post("/api/v1/debates", json!({"agents": DEMO})).await;
    assert_eq!((status, &v1["status"]), (422, &json!(422)), "{v1}");
    assert!(
        v1["error"].as_str().is_some_and(|m| m.contains("topic")),
        "{v1}"
    );
    let body = json!({"task": "t", "agents": ["demo-a", "gpt-4o"], "auto_select": false});
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
