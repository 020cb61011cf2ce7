//! The HTTP platform: error forms per version, bad input of every kind,
//! versions and the v2 envelope, deprecation headers, request ids, CORS,
//! timeouts, the health family, recent errors and start-up checks.

use std::time::Duration;

use agon::http::error::ApiError;
use agon::http::extract::ApiJson;
use agon::http::routes::{RouteSpec, Routes};
use reqwest::header::HeaderMap;
use reqwest::{Client, Method};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::serve::{build_app, serve_router, spawn_app};
use crate::support::Kind;

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct Echo {
    name: String,
    count: u32,
}

#[utoipa::path(post, path = "/api/test/echo", request_body = Echo, responses((status = 200, body = Echo)))]
async fn echo(ApiJson(body): ApiJson<Echo>) -> axum::Json<Echo> {
    axum::Json(body)
}

#[utoipa::path(get, path = "/api/test/broken", responses((status = 500)))]
async fn broken() -> Result<(), ApiError> {
    Err(ApiError::Internal(
        "secret table agon_internal is gone".into(),
    ))
}

#[utoipa::path(get, path = "/api/test/slow", responses((status = 200)))]
async fn slow() -> &'static str {
    tokio::time::sleep(Duration::from_secs(5)).await;
    "late"
}

#[utoipa::path(get, path = "/api/test/items/{id}", params(("id" = String, Path)), responses((status = 200)))]
async fn item(
    agon::http::extract::ApiPath(id): agon::http::extract::ApiPath<String>,
) -> axum::Json<Value> {
    axum::Json(json!({ "id": id }))
}

/// The platform around test routes that exercise bodies, failures and time.
async fn spawn_test_routes(vars: &[(&str, &str)]) -> (String, tempfile::TempDir) {
    let (app, dir) = build_app(Kind::Sqlite, vars).await;
    let routes = agon::http::routes()
        .merge(Routes::new().add(routes!(echo), RouteSpec::new()))
        .merge(Routes::new().add(routes!(broken), RouteSpec::new()))
        .merge(Routes::new().add(routes!(slow), RouteSpec::new()))
        .merge(
            Routes::new().add(
                routes!(item),
                RouteSpec::new()
                    .v2_at("/api/v2/test/things/{id}")
                    .deprecated_alias("/api/test/old-items/{id}"),
            ),
        );
    let base = serve_router(agon::http::with_platform(app, routes)).await;
    (base, dir)
}

/// What a request got back.
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
}

/// Sends a request and parses the (always JSON) body.
pub async fn send(
    client: &Client,
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> (Reply, Value) {
    let mut request = client.request(method, url);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    if let Some(body) = body {
        request = request.body(body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    let body: Value = serde_json::from_str(&text)
        .unwrap_or_else(|_| panic!("{status}: body is not JSON: {text:?}"));
    (Reply { status, headers }, body)
}

#[tokio::test]
async fn every_error_answers_in_the_form_of_its_version() {
    let spawned = spawn_app(Kind::Sqlite).await;
    let c = crate::support::client();
    let base = &spawned.base;

    // Unprefixed `/api` paths are v1 (§9 rule 4): `error` is a string a
    // client can print, with the code and trace id beside it.
    let (r, unprefixed) = send(
        &c,
        Method::GET,
        &format!("{base}/api/nowhere"),
        &[("x-request-id", "req-123")],
        None,
    )
    .await;
    assert_eq!(r.status, 404);
    assert_eq!(unprefixed["code"], "NOT_FOUND");
    assert_eq!(unprefixed["status"], 404);
    assert!(unprefixed["error"].is_string(), "{unprefixed}");
    assert!(unprefixed["details"].is_object());
    assert_eq!(unprefixed["trace_id"], "req-123");
    assert_eq!(r.headers["x-request-id"], "req-123");

    // Outside `/api` no version applies: §7's general form.
    let (r, general) = send(&c, Method::GET, &format!("{base}/nowhere"), &[], None).await;
    assert_eq!(r.status, 404);
    assert_eq!(general["error"]["code"], "NOT_FOUND", "{general}");
    assert!(general["error"]["message"].is_string());

    let (r, v1) = send(
        &c,
        Method::GET,
        &format!("{base}/api/v1/nowhere"),
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 404);
    assert_eq!(v1["status"], 404);
    assert_eq!(v1["code"], "NOT_FOUND");
    assert!(v1["error"].is_string());

    let (_, v1_by_header) = send(
        &c,
        Method::GET,
        &format!("{base}/api/nowhere"),
        &[("x-api-version", "1")],
        None,
    )
    .await;
    assert_eq!(v1_by_header["status"], 404, "{v1_by_header}");

    let (r, v2) = send(
        &c,
        Method::GET,
        &format!("{base}/api/v2/nowhere"),
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 404);
    assert_eq!(v2["code"], "NOT_FOUND");
    assert_eq!(v2["trace_id"], r.headers["x-request-id"].to_str().unwrap());
    for field in ["error", "resource_type", "resource_id", "support_url"] {
        assert!(v2.get(field).is_some(), "v2 error lacks {field}: {v2}");
    }

    let (r, wrong_method) =
        send(&c, Method::DELETE, &format!("{base}/api/health"), &[], None).await;
    assert_eq!(r.status, 405);
    assert_eq!(wrong_method["code"], "METHOD_NOT_ALLOWED");
    assert!(r.headers["allow"].to_str().unwrap().contains("GET"));

    let (r, wrong_method_v2) = send(
        &c,
        Method::POST,
        &format!("{base}/api/v2/system/health"),
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 405);
    assert_eq!(wrong_method_v2["code"], "METHOD_NOT_ALLOWED");

    let (r, bad_version) = send(
        &c,
        Method::GET,
        &format!("{base}/api/health"),
        &[("x-api-version", "banana")],
        None,
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(bad_version["error"].as_str().unwrap().contains("banana"));

    let (r, bad_accept) = send(
        &c,
        Method::GET,
        &format!("{base}/api/health"),
        &[("accept", "application/json; version=9")],
        None,
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(bad_accept["code"], "BAD_REQUEST");

    let (r, bad_query) = send(
        &c,
        Method::GET,
        &format!("{base}/api/system/errors?limit=-4"),
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(bad_query["code"], "BAD_REQUEST");
    let (r, _) = send(
        &c,
        Method::GET,
        &format!("{base}/api/system/errors?limit=100000"),
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 400);
    spawned.stop.cancel();
}

#[tokio::test]
async fn bad_bodies_are_refused_clearly_and_internal_causes_stay_inside() {
    let (base, _dir) = spawn_test_routes(&[
        ("SERVICE_MAX_REQUEST_BYTES", "1024"),
        ("SERVICE_REQUEST_TIMEOUT_SECONDS", "1"),
    ])
    .await;
    let c = crate::support::client();
    let url = format!("{base}/api/test/echo");
    let json_type = [("content-type", "application/json")];
    let post = |headers: &'static [(&'static str, &'static str)], body: &[u8]| {
        send(&c, Method::POST, &url, headers, Some(body.to_vec()))
    };

    let (r, ok) = post(
        &[("content-type", "application/json")],
        br#"{"name":"a","count":2}"#,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(ok, json!({"name": "a", "count": 2}));

    let cases: [(&[u8], u16, &str); 6] = [
        (br#"{"name":"a","#, 400, "BAD_REQUEST"),
        (br#"{"name":5,"count":2}"#, 422, "VALIDATION_ERROR"),
        (br#"{"name":"a","count":-1}"#, 422, "VALIDATION_ERROR"),
        (
            br#"{"name":"a","count":2,"extra":true}"#,
            422,
            "VALIDATION_ERROR",
        ),
        (br#"{"name":"a"}"#, 422, "VALIDATION_ERROR"),
        (b"{\"name\":\"\xff\xfe\",\"count\":1}", 400, "BAD_REQUEST"),
    ];
    for (body, status, code) in cases {
        let (r, error) = send(&c, Method::POST, &url, &json_type, Some(body.to_vec())).await;
        assert_eq!(r.status, status, "{}", String::from_utf8_lossy(body));
        assert_eq!(error["code"], code, "{error}");
    }

    let (r, error) = post(
        &[("content-type", "text/plain")],
        br#"{"name":"a","count":2}"#,
    )
    .await;
    assert_eq!(r.status, 415);
    assert_eq!(error["code"], "UNSUPPORTED_MEDIA_TYPE");

    let big = format!(r#"{{"name":"{}","count":1}}"#, "x".repeat(4096));
    let (r, error) = send(&c, Method::POST, &url, &json_type, Some(big.into_bytes())).await;
    assert_eq!(r.status, 413);
    assert_eq!(error["code"], "PAYLOAD_TOO_LARGE");

    let (r, v2) = send(
        &c,
        Method::POST,
        &format!("{base}/api/v2/test/echo"),
        &json_type,
        Some(b"[".to_vec()),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(v2["code"], "BAD_REQUEST");

    let (r, internal) = send(
        &c,
        Method::GET,
        &format!("{base}/api/test/broken"),
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 500);
    assert_eq!(internal["code"], "INTERNAL_ERROR");
    assert!(
        !internal.to_string().contains("agon_internal"),
        "{internal}"
    );

    let (r, late) = send(&c, Method::GET, &format!("{base}/api/test/slow"), &[], None).await;
    assert_eq!(r.status, 408);
    assert_eq!(late["code"], "REQUEST_TIMEOUT");

    let (_, recent) = send(
        &c,
        Method::GET,
        &format!("{base}/api/system/errors?limit=3"),
        &[],
        None,
    )
    .await;
    let errors = recent["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 3);
    assert_eq!(errors[0]["status"], 408, "newest first: {recent}");
    assert_eq!(errors[1]["status"], 500);
    assert_eq!(errors[1]["path"], "/api/test/broken");
    assert!(!recent.to_string().contains("agon_internal"));
    assert!(recent["total"].as_u64().unwrap() >= 10);
}

/// The ring of recent errors holds what `SERVICE_RECENT_ERRORS` says, and
/// the published `limit` says the same.
#[tokio::test]
async fn recent_errors_keep_what_the_deployment_says() {
    let (base, _dir) = spawn_test_routes(&[("SERVICE_RECENT_ERRORS", "3")]).await;
    let c = crate::support::client();
    for _ in 0..5 {
        let (r, _) = send(
            &c,
            Method::GET,
            &format!("{base}/api/test/broken"),
            &[],
            None,
        )
        .await;
        assert_eq!(r.status, 500);
    }
    let errors = |query: &'static str| {
        let url = format!("{base}/api/system/errors{query}");
        let c = c.clone();
        async move { send(&c, Method::GET, &url, &[], None).await }
    };
    // The default page (20) is more than is held: it is what is held.
    for query in ["", "?limit=3"] {
        let (r, recent) = errors(query).await;
        assert_eq!(r.status, 200, "{recent}");
        assert_eq!(recent["errors"].as_array().unwrap().len(), 3, "{recent}");
        assert_eq!(
            (&recent["total"], &recent["capacity"]),
            (&json!(3), &json!(3))
        );
    }
    let (r, refused) = errors("?limit=4").await;
    assert_eq!((r.status, &refused["code"]), (400, &json!("BAD_REQUEST")));
    let (_, doc) = send(
        &c,
        Method::GET,
        &format!("{base}/api/openapi.json"),
        &[],
        None,
    )
    .await;
    let params = doc["paths"]["/api/system/errors"]["get"]["parameters"]
        .as_array()
        .unwrap();
    let limit = params.iter().find(|p| p["name"] == "limit").unwrap();
    assert_eq!(limit["schema"]["maximum"], 3, "{limit}");
}

#[tokio::test]
async fn versions_are_chosen_echoed_wrapped_and_deprecated() {
    let spawned = spawn_app(Kind::Sqlite).await;
    let c = crate::support::client();
    let base = &spawned.base;

    // The unprefixed quick-start path answers v1 bodies and is not deprecated.
    let (r, v1) = send(&c, Method::GET, &format!("{base}/api/health"), &[], None).await;
    assert_eq!(r.headers["x-api-version"], "1");
    assert_eq!(v1["status"], "healthy");
    for name in [
        "deprecation",
        "sunset",
        "x-deprecation-level",
        "x-api-deprecated",
    ] {
        assert!(r.headers.get(name).is_none(), "{name} on /api/health");
    }

    // v1 asked for by name is past its sunset and says so.
    let (r, _) = send(
        &c,
        Method::GET,
        &format!("{base}/api/health"),
        &[("x-api-version", "1")],
        None,
    )
    .await;
    assert_eq!(r.headers["x-deprecation-level"], "sunset");
    let (r, _) = send(&c, Method::GET, &format!("{base}/api/v1/health"), &[], None).await;
    let h = r.headers;
    assert_eq!(h["deprecation"], "@1735689600");
    assert_eq!(h["sunset"], "Mon, 01 Jun 2026 00:00:00 GMT");
    assert_eq!(
        h["link"],
        "</api/v2/system/health>; rel=\"successor-version\""
    );
    assert_eq!(h["x-deprecation-level"], "sunset");
    assert_eq!(h["x-api-deprecated"], "true");
    assert_eq!(h["x-api-version"], "1");

    for (url, headers) in [
        (format!("{base}/api/v2/system/health"), vec![]),
        (format!("{base}/api/health"), vec![("x-api-version", "2")]),
        (
            format!("{base}/api/health"),
            vec![("accept", "application/json; version=2")],
        ),
        // The prefix beats the header.
        (
            format!("{base}/api/v2/system/health"),
            vec![("x-api-version", "1")],
        ),
    ] {
        let (r, v2) = send(&c, Method::GET, &url, &headers, None).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.headers["x-api-version"], "2", "{url} {headers:?}");
        assert!(r.headers.get("deprecation").is_none());
        assert_eq!(v2["data"]["status"], "healthy", "{v2}");
        assert_eq!(v2["meta"]["version"], "2");
        assert_eq!(
            v2["meta"]["request_id"],
            r.headers["x-request-id"].to_str().unwrap()
        );
        assert!(v2["meta"]["timestamp"].as_str().unwrap().ends_with('Z'));
        assert!(v2.get("links").is_none(), "links only on lists");
    }

    let (_, list) = send(
        &c,
        Method::GET,
        &format!("{base}/api/v2/system/errors?limit=5"),
        &[],
        None,
    )
    .await;
    assert_eq!(list["links"]["self"], "/api/v2/system/errors?limit=5");
    assert!(list["links"]["next"].is_null());
    assert!(list["data"]["errors"].is_array());

    // The Prometheus text is never wrapped.
    let text = c
        .get(format!("{base}/api/v2/system/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(text.headers()["x-api-version"], "2");
    assert!(text.text().await.unwrap().contains("# TYPE"));
    spawned.stop.cancel();
}

#[tokio::test]
async fn request_ids_are_kept_or_made() {
    let spawned = spawn_app(Kind::Sqlite).await;
    let c = crate::support::client();
    let url = format!("{}/api/health", spawned.base);
    let given = c
        .get(&url)
        .header("x-request-id", "abc-DEF_1.2")
        .send()
        .await
        .unwrap();
    assert_eq!(given.headers()["x-request-id"], "abc-DEF_1.2");
    let made = c.get(&url).send().await.unwrap();
    let id = made.headers()["x-request-id"].to_str().unwrap();
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");
    let long = "x".repeat(300);
    let replaced = c
        .get(&url)
        .header("x-request-id", &long)
        .send()
        .await
        .unwrap();
    assert_ne!(replaced.headers()["x-request-id"], long.as_str());
    spawned.stop.cancel();
}

#[tokio::test]
async fn cors_allows_only_the_configured_origins() {
    let (app, _dir) = build_app(
        Kind::Sqlite,
        &[(
            "SERVICE_ALLOWED_ORIGINS",
            "https://app.example, http://localhost:3000",
        )],
    )
    .await;
    let base = serve_router(agon::http::router(app)).await;
    let c = crate::support::client();
    let preflight = c
        .request(Method::OPTIONS, format!("{base}/api/health"))
        .header("origin", "https://app.example")
        .header("access-control-request-method", "GET")
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success());
    assert_eq!(
        preflight.headers()["access-control-allow-origin"],
        "https://app.example"
    );
    let simple = c
        .get(format!("{base}/api/health"))
        .header("origin", "http://localhost:3000")
        .send()
        .await
        .unwrap();
    assert_eq!(
        simple.headers()["access-control-allow-origin"],
        "http://localhost:3000"
    );
    assert!(
        simple.headers()["access-control-expose-headers"]
            .to_str()
            .unwrap()
            .contains("x-request-id")
    );
    let stranger = c
        .get(format!("{base}/api/health"))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert!(
        stranger
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
}

#[tokio::test]
async fn health_comes_in_both_forms_and_in_detail() {
    let spawned = spawn_app(Kind::Postgres).await;
    let c = crate::support::client();
    let health = spawned.get_json(&c, "/api/health").await;
    assert_eq!(health["components"]["database"], "healthy");
    assert_eq!(health["components"]["agents"], "healthy");
    assert_eq!(health["checks"]["database"]["status"], "healthy");
    assert_eq!(health["checks"]["redis"]["status"], "not_configured");
    for path in ["/api/health/detailed", "/api/metrics/health"] {
        let detail = spawned.get_json(&c, path).await;
        assert_eq!(detail["status"], "healthy", "{detail}");
        assert_eq!(detail["database"]["backend"], "postgres");
        assert!(detail["database"]["latency_ms"].as_f64().unwrap() >= 0.0);
        assert_eq!(detail["event_bus"]["kind"], "in-process");
        assert_eq!(detail["rate_limits"]["backend"], "memory");
        assert_eq!(detail["projections"][0]["name"], "admin_stats");
        assert_eq!(detail["seals"]["interval_seconds"], 60);
        assert!(detail["components"].is_object() && detail["checks"].is_object());
    }
    // Orchestrators' probes: public, unversioned, plain.
    let anonymous = |path: &str| c.get(format!("{}{path}", spawned.base)).send();
    let live = anonymous("/healthz").await.unwrap();
    assert_eq!(live.status(), 200);
    assert_eq!(live.json::<Value>().await.unwrap(), json!({"status": "ok"}));
    // Ready once the projections have applied the start's own events.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let ready = loop {
        let response = anonymous("/readyz").await.unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        if status == 200 {
            break body;
        }
        assert_eq!(
            (status.as_u16(), &body["status"]),
            (503, &json!("not_ready"))
        );
        assert!(std::time::Instant::now() < deadline, "never ready: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let want =
        json!({"status": "ready", "store": true, "bus": true, "projections": true, "behind": []});
    assert_eq!(ready, want);
    assert_eq!(anonymous("/api/v1/healthz").await.unwrap().status(), 404);
    spawned.stop.cancel();
}

/// `agon serve` with `vars`: its exit code and what it printed.
fn start_binary(vars: &[(&str, &str)]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_agon"))
        .args(["serve", "--api-port", "0", "--host", "127.0.0.1"])
        .env_clear()
        .env("SERVICE_DATA_DIR", dir.path())
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn unsafe_or_incomplete_configuration_stops_the_start() {
    let secret = "s".repeat(32);
    let cases: [(&[(&str, &str)], &str); 4] = [
        (
            &[("SERVICE_ALLOWED_ORIGINS", "*")],
            "SERVICE_ALLOWED_ORIGINS",
        ),
        (&[("SERVICE_ENV", "production")], "SERVICE_JWT_SECRET"),
        (&[("SERVICE_REQUIRE_DISTRIBUTED", "true")], "DATABASE_URL"),
        (
            &[("SERVICE_REQUIRE_DISTRIBUTED_STATE", "yes")],
            "SERVICE_REQUIRE_DISTRIBUTED",
        ),
    ];
    for (vars, named) in cases {
        let (code, stderr) = start_binary(vars);
        assert_eq!(code, Some(2), "{vars:?}: {stderr}");
        assert!(stderr.contains(named), "{vars:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    }
    let (code, stderr) = start_binary(&[
        ("SERVICE_ENV", "production"),
        ("SERVICE_JWT_SECRET", &secret),
        ("SERVICE_ALLOWED_ORIGINS", "https://*.example"),
    ]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("wildcard"), "{stderr}");
}

#[tokio::test]
async fn renamed_routes_and_deprecated_aliases_point_at_their_successors() {
    let (base, _dir) = spawn_test_routes(&[]).await;
    let c = crate::support::client();
    let (r, v1) = send(
        &c,
        Method::GET,
        &format!("{base}/api/v1/test/items/a7"),
        &[],
        None,
    )
    .await;
    assert_eq!(v1, json!({"id": "a7"}));
    assert_eq!(
        r.headers["link"],
        "</api/v2/test/things/a7>; rel=\"successor-version\""
    );

    let (r, v2) = send(
        &c,
        Method::GET,
        &format!("{base}/api/v2/test/things/a7"),
        &[],
        None,
    )
    .await;
    assert_eq!(v2["data"], json!({"id": "a7"}));
    assert!(r.headers.get("deprecation").is_none());

    // An alias is deprecated whatever the version asked for.
    let (r, alias) = send(
        &c,
        Method::GET,
        &format!("{base}/api/test/old-items/b8"),
        &[("x-api-version", "2")],
        None,
    )
    .await;
    assert_eq!(alias["data"], json!({"id": "b8"}));
    assert_eq!(r.headers["x-api-deprecated"], "true");
    assert_eq!(
        r.headers["link"],
        "</api/test/items/b8>; rel=\"successor-version\""
    );
    assert_eq!(r.headers["x-deprecation-level"], "sunset");

    let (r, _) = send(
        &c,
        Method::GET,
        &format!("{base}/api/v2/test/items/a7"),
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 404, "the old name is not mounted under v2");
}
