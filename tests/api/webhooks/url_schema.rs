//! A subscription's `url` is refused exactly where the OpenAPI document's
//! schema says (format uri, its pattern and length bounds, the maximum from
//! `SERVICE_WEBHOOK_URL_MAX_CHARS`), at registration and on change, with a
//! 422 naming the field; a URL of the right form whose host is private is
//! refused by the SSRF guard on top, also with a 422. The description is
//! bounded the same way, by `SERVICE_WEBHOOK_DESCRIPTION_MAX_CHARS`.

use reqwest::Method;
use serde_json::json;

use super::User;
use crate::serve::spawn_with;
use crate::support::{Kind, on_both_backends};

on_both_backends! {
    urls_are_refused_exactly_where_the_schema_says => urls_are_refused_exactly_where_the_schema_says;
    descriptions_are_bounded_by_the_setting => descriptions_are_bounded_by_the_setting;
}

const MAX: usize = 64;

/// Candidate URLs and whether each is an RFC 3986 URI (the schema's
/// `format: uri`, which the test states rather than re-implements). Every
/// host is 127.0.0.1, inside the allowed network, so that whatever the
/// form admits is also reachable.
fn candidates() -> Vec<(String, bool)> {
    let longest = format!("http://127.0.0.1/{}", "a".repeat(MAX - 17));
    let too_long = format!("{longest}a");
    let mut cases: Vec<(String, bool)> = [
        ("http://127.0.0.1", true),
        ("https://127.0.0.1:8443/hook?x=1&y=%2F#top", true),
        ("http://[::ffff:127.0.0.1]:9/a:b@c/", true),
        ("http://127.0.0.1/~u/!$&'()*+,;=", true),
        ("", false),
        ("http://", true),
        ("http://:80/", true),
        ("HTTP://127.0.0.1/", true),
        (" http://127.0.0.1/", false),
        ("ftp://127.0.0.1/", true),
        ("http://127.0.0.1/a b", false),
        ("http://127.0.0.1/{x}", false),
        ("http://127.0.0.1/#a#b", false),
        ("http://127.0.0.1/%zz", false),
        ("http://u:p@127.0.0.1/", true),
    ]
    .iter()
    .map(|(url, uri)| ((*url).to_owned(), *uri))
    .collect();
    cases.push((longest, true));
    cases.push((too_long, true));
    cases
}

async fn urls_are_refused_exactly_where_the_schema_says(kind: Kind) {
    let mut vars = crate::auth::ROOMY.to_vec();
    let max = MAX.to_string();
    vars.extend([
        ("SERVICE_WEBHOOK_ALLOWED_NETWORKS", "127.0.0.0/8"),
        ("SERVICE_WEBHOOK_MAX_PER_USER", "1000"),
        ("SERVICE_WEBHOOK_URL_MAX_CHARS", max.as_str()),
    ]);
    let app = spawn_with(kind, &vars).await;
    let user = User::new(&app.base, "erin@example.com").await;
    let (_, doc) = user.call(Method::GET, "/api/openapi.json", None).await;
    let schemas = &doc["components"]["schemas"];
    let url_schema = &schemas["CreateWebhook"]["properties"]["url"];
    for component in ["CreateWebhook", "UpdateWebhook"] {
        let url = &schemas[component]["properties"]["url"];
        assert_eq!(url["format"], "uri", "{component}: {url}");
        assert_eq!(url["maxLength"], json!(MAX), "{component}: {url}");
        assert_eq!(url["pattern"], url_schema["pattern"], "{component}");
        assert_eq!(url["minLength"], url_schema["minLength"], "{component}");
    }
    let pattern = regex::Regex::new(url_schema["pattern"].as_str().unwrap()).unwrap();
    let min = url_schema["minLength"].as_u64().unwrap() as usize;
    let admits = |url: &str, uri: bool| {
        let chars = url.chars().count();
        uri && pattern.is_match(url) && (min..=MAX).contains(&chars)
    };

    let events = ["debate.completed"];
    let first = json!({"url": "http://127.0.0.1/first", "events": events});
    let (status, created) = user.call(Method::POST, "/api/webhooks", Some(first)).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let one = format!("/api/webhooks/{id}");
    let mut admitted = 0;
    let mut current = "http://127.0.0.1/first".to_owned();
    for (url, uri) in candidates() {
        let (want_create, want_change) = match admits(&url, uri) {
            true => (201, 200),
            false => (422, 422),
        };
        admitted += usize::from(want_create == 201);
        let body = json!({"url": url, "events": events});
        let (status, answer) = user.call(Method::POST, "/api/webhooks", Some(body)).await;
        assert_eq!(status, want_create, "POST {url:?}: {answer}");
        let (status, answer) = user
            .call(Method::PATCH, &one, Some(json!({"url": url})))
            .await;
        assert_eq!(status, want_change, "PATCH {url:?}: {answer}");
        if status == 422 {
            assert_eq!(answer["details"]["field"], "url", "{url:?}: {answer}");
        }
        if status == 200 {
            current = url.clone();
        }
        // A refused change leaves the subscription as it was.
        let (_, now) = user.call(Method::GET, &one, None).await;
        assert_eq!(now["url"], json!(current), "after {url:?}");
    }
    assert_eq!(admitted, 5, "the cases cover both sides");

    // The right form, but a private host outside the allowed network: the
    // guard refuses it, again as the url's fault.
    let body = json!({"url": "http://10.0.0.1/hook", "events": events});
    let (status, answer) = user.call(Method::POST, "/api/webhooks", Some(body)).await;
    assert_eq!(
        (status, &answer["details"]["field"]),
        (422, &json!("url")),
        "{answer}"
    );
    app.stop.cancel();
}

async fn descriptions_are_bounded_by_the_setting(kind: Kind) {
    let mut vars = crate::auth::ROOMY.to_vec();
    vars.extend([
        ("SERVICE_WEBHOOK_ALLOWED_NETWORKS", "127.0.0.0/8"),
        ("SERVICE_WEBHOOK_DESCRIPTION_MAX_CHARS", "12"),
    ]);
    let app = spawn_with(kind, &vars).await;
    let user = User::new(&app.base, "desc@example.com").await;
    let (_, doc) = user.call(Method::GET, "/api/openapi.json", None).await;
    for component in ["CreateWebhook", "UpdateWebhook"] {
        let description = &doc["components"]["schemas"][component]["properties"]["description"];
        assert_eq!(description["maxLength"], 12, "{component}: {description}");
    }
    let hook = |description: &str| json!({"url": "http://127.0.0.1/hook", "events": ["debate.completed"], "description": description});
    // Twelve characters, not bytes: the bound counts what a person reads.
    let longest = "é".repeat(12);
    let (status, created) = user
        .call(Method::POST, "/api/webhooks", Some(hook(&longest)))
        .await;
    assert_eq!(status, 201, "{created}");
    let (status, refused) = user
        .call(
            Method::POST,
            "/api/webhooks",
            Some(hook(&format!("{longest}x"))),
        )
        .await;
    assert_eq!(
        (status, &refused["details"]["field"], &refused["rule"]),
        (422, &json!("description"), &json!("WEBHOOK_DESCRIPTION")),
        "{refused}"
    );
    let one = format!("/api/webhooks/{}", created["id"].as_str().unwrap());
    let (status, refused) = user
        .call(
            Method::PATCH,
            &one,
            Some(json!({"description": "x".repeat(13)})),
        )
        .await;
    assert_eq!(status, 422, "{refused}");
    let (_, kept) = user.call(Method::GET, &one, None).await;
    assert_eq!(kept["description"], json!(longest));
    app.stop.cancel();
}
