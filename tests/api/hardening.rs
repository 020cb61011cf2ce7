//! What an attacker, an operator and a browser meet at the edge: public
//! documentation, operations data for admins only, security headers, RFC
//! 6750 challenges, oversized heads in the spec's error form, and limits
//! that are all configurable and checked at start.

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::serve::{Spawned, spawn_with};
use crate::support::Kind;
use crate::support::accounts::{call, signed_in};

#[tokio::test]
async fn the_documentation_opens_without_a_credential() {
    let app = spawn_with(Kind::Sqlite, &[]).await;
    let anonymous = reqwest::Client::new();
    for path in [
        "/api/docs",
        "/api/docs/swagger-ui.css",
        "/api/redoc",
        "/api/redoc/redoc.standalone.js",
        "/api/openapi",
        "/api/openapi.json",
        "/api/openapi.yaml",
        "/api/v1/openapi.json",
        "/api/postman.json",
    ] {
        let response = anonymous
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let headers = response.headers();
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(headers["referrer-policy"], "no-referrer", "{path}");
        if headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
        {
            assert_eq!(headers["x-frame-options"], "DENY", "{path}");
            assert!(
                headers["content-security-policy"]
                    .to_str()
                    .unwrap()
                    .contains("frame-ancestors 'none'")
            );
        }
    }
    app.stop.cancel();
}

#[tokio::test]
async fn operations_data_is_for_admins_only() {
    let app = spawn_with(Kind::Sqlite, &crate::auth::ROOMY).await;
    let base = &app.base;
    let (_, user, _) = signed_in(base, "operator-curious@example.com").await;
    for path in [
        "/api/system/errors",
        "/api/metrics",
        "/metrics",
        "/api/health/detailed",
        "/api/metrics/health",
        "/api/system/rate-limits",
        "/api/rate-limits/config",
    ] {
        let (status, body) = call(Method::GET, &format!("{base}{path}"), Some(&user), None).await;
        assert_eq!(status, 403, "{path} as a user: {body}");
        let admin = crate::support::client()
            .get(format!("{base}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(admin.status(), 200, "{path} as the admin");
    }
    // Still public, and each user still sees their own buckets.
    let (status, _) = call(Method::GET, &format!("{base}/api/health"), None, None).await;
    assert_eq!(status, 200);
    let (status, mine) = call(
        Method::GET,
        &format!("{base}/api/rate-limit/status"),
        Some(&user),
        None,
    )
    .await;
    assert_eq!(status, 200, "{mine}");
    app.stop.cancel();
}

#[tokio::test]
async fn tokens_are_never_cached_and_refusals_name_the_scheme() {
    let app = spawn_with(Kind::Sqlite, &crate::auth::ROOMY).await;
    let base = &app.base;
    crate::support::accounts::register(base, "cache@example.com", "correct horse battery").await;
    let login = reqwest::Client::new()
        .post(format!("{base}/api/auth/login"))
        .json(
            &serde_json::json!({"email": "cache@example.com", "password": "correct horse battery"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200);
    assert_eq!(login.headers()["cache-control"], "no-store");

    let anonymous = reqwest::Client::new()
        .get(format!("{base}/api/auth/me"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    assert_eq!(
        anonymous.headers()["www-authenticate"],
        "Bearer realm=\"agon\""
    );
    let forged = reqwest::Client::new()
        .get(format!("{base}/api/auth/me"))
        .bearer_auth("not-a-token")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    assert_eq!(
        forged.headers()["www-authenticate"],
        "Bearer realm=\"agon\", error=\"invalid_token\""
    );
    app.stop.cancel();
}

#[tokio::test]
async fn oversized_heads_answer_in_the_error_form() {
    let app = spawn_with(Kind::Sqlite, &[("SERVICE_MAX_HEADER_BYTES", "4096")]).await;
    let client = reqwest::Client::new();
    let long_target = format!("{}/api/v1/health?pad={}", app.base, "a".repeat(5000));
    let response = client.get(long_target).send().await.unwrap();
    assert_eq!(response.status(), 414);
    assert_eq!(response.headers()["x-content-type-options"], "nosniff");
    let body: Value = response.json().await.unwrap();
    assert!(body["error"].is_string(), "{body}");
    assert_eq!(body["status"], 414);

    let response = client
        .get(format!("{}/api/v1/health", app.base))
        .header("x-padding", "b".repeat(5000))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 431);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], 431, "{body}");
    app.stop.cancel();
}

/// A service that allows `limit` health requests a minute, without a
/// burst, and a client without a credential.
async fn health_limited_to(limit: &str) -> (Spawned, reqwest::Client) {
    let app = spawn_with(
        Kind::Sqlite,
        &[
            ("SERVICE_RATE_LIMIT_HEALTH", limit),
            ("SERVICE_BURST_MULTIPLIER", "1"),
        ],
    )
    .await;
    (app, reqwest::Client::new())
}

#[tokio::test]
async fn fixed_endpoint_limits_have_variables() {
    let (app, client) = health_limited_to("2").await;
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let response = client
            .get(format!("{}/api/health", app.base))
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 429]);
    app.stop.cancel();
}

#[test]
fn a_rate_the_limiter_cannot_work_with_stops_the_start() {
    for (variable, value) in [
        ("SERVICE_IP_RATE_LIMIT", "100000000"),
        ("SERVICE_RATE_LIMIT_DEFAULT", "0"),
        ("SERVICE_RATE_LIMIT_EXPORT", "60000001"),
        ("SERVICE_MAX_CONNECTIONS", "0"),
        ("SERVICE_HTTP_HEADER_TIMEOUT_SECONDS", "0"),
        // Past chrono's calendar: a sign-in would have panicked on the expiry.
        ("SERVICE_JWT_REFRESH_EXPIRY_DAYS", "4000000000"),
        ("SERVICE_SEAL_INTERVAL_SECONDS", "4000000000"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_agon"))
            .args(["serve", "--api-port", "0"])
            .env_clear()
            .env("SERVICE_DATA_DIR", dir.path())
            .env(variable, value)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{variable}={value}: {stderr}"
        );
        assert!(stderr.contains(variable), "{stderr}");
    }
}

#[tokio::test]
async fn a_429_has_the_shape_of_its_versions_errors() {
    let (app, client) = health_limited_to("1").await;
    let get = |path: &'static str| {
        let client = client.clone();
        let url = format!("{}{path}", app.base);
        async move {
            let response = client.get(url).send().await.unwrap();
            (response.status(), response.json::<Value>().await.unwrap())
        }
    };
    assert_eq!(get("/api/v1/health").await.0, 200);
    let (status, v1) = get("/api/v1/health").await;
    assert_eq!(status, 429);
    assert_eq!(v1["status"], 429, "v1 keeps its status field: {v1}");
    assert!(v1["error"].is_string());
    assert_eq!(v1["limit"], 1);
    let (status, v2) = get("/api/v2/system/health").await;
    assert_eq!(status, 429);
    assert_eq!(v2["code"], "RATE_LIMIT_EXCEEDED");
    assert!(v2["support_url"].is_string(), "v2 keeps its fields: {v2}");
    assert!(v2.get("resource_type").is_some());
    assert_eq!(v2["remaining"], 0);
    app.stop.cancel();
}

#[tokio::test]
async fn v2_lists_carry_links() {
    let app = spawn_with(Kind::Sqlite, &crate::auth::ROOMY).await;
    let admin = crate::support::client();
    for n in 0..3 {
        let created = admin
            .post(format!("{}/api/v2/debates", app.base))
            .json(&serde_json::json!({"task": format!("Links {n}?"), "agents": ["demo-a", "demo-b"], "rounds": 1}))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 201);
    }
    let json_of = |path: &'static str| {
        let request = admin.get(format!("{}{path}", app.base));
        async move {
            let body: Value = request.send().await.unwrap().json().await.unwrap();
            body
        }
    };
    let page = json_of("/api/v2/debates?limit=2").await;
    assert_eq!(page["links"]["self"], "/api/v2/debates?limit=2", "{page}");
    assert_eq!(page["links"]["next"], "/api/v2/debates?limit=2&offset=2");
    assert!(page["links"]["prev"].is_null());
    let board = json_of("/api/v2/agents/leaderboard").await;
    assert!(board["links"].is_object(), "{board}");
    app.stop.cancel();
}
