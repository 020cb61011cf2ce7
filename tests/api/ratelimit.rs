//! Rate limits (§8.1): the global per-address bucket, trusted proxies, the
//! endpoint limits, per-user action buckets and tiers, shared counting in
//! Redis and what happens while Redis is away.

use std::time::Duration;

use agon::http::ratelimit::{Principal, Tier};
use axum::extract::Request;
use axum::middleware::{Next, from_fn};
use reqwest::{Client, Method};

use crate::platform::send;
use crate::serve::{build_app, serve_router};
use crate::support::{Kind, LoopbackServer, free_port};

/// The API on a random port; `x-test-user` (and `x-test-tier`) stand in for
/// the principal that authentication will supply.
async fn spawn(vars: &[(&str, &str)]) -> (String, tempfile::TempDir) {
    let (app, dir) = build_app(Kind::Sqlite, vars).await;
    let router =
        agon::http::router(app).layer(from_fn(|mut request: Request, next: Next| async move {
            let user = request
                .headers()
                .get("x-test-user")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            if let Some(user_id) = user {
                let tier = match request
                    .headers()
                    .get("x-test-tier")
                    .and_then(|v| v.to_str().ok())
                {
                    Some("free") => Some(Tier::Free),
                    Some("enterprise") => Some(Tier::Enterprise),
                    _ => None,
                };
                request.extensions_mut().insert(Principal { user_id, tier });
            }
            next.run(request).await
        }));
    (serve_router(router).await, dir)
}

async fn status_of(c: &Client, url: &str, headers: &[(&str, &str)]) -> u16 {
    send(c, Method::GET, url, headers, None).await.0.status
}

#[tokio::test]
async fn the_global_limit_refuses_with_headers_and_the_rate_limit_form() {
    let (base, _dir) = spawn(&[
        ("SERVICE_IP_RATE_LIMIT", "3"),
        ("SERVICE_BURST_MULTIPLIER", "1"),
    ])
    .await;
    let c = Client::new(); // anonymous: counted per address
    let mut remaining = Vec::new();
    // Unknown routes count too: the limit spans every endpoint.
    for path in [
        "/api/rate-limits/config",
        "/api/nowhere",
        "/api/system/rate-limits",
    ] {
        let (r, _) = send(&c, Method::GET, &format!("{base}{path}"), &[], None).await;
        assert_eq!(r.headers["x-ratelimit-limit"], "3");
        remaining.push(
            r.headers["x-ratelimit-remaining"]
                .to_str()
                .unwrap()
                .to_owned(),
        );
    }
    assert_eq!(remaining, ["2", "1", "0"]);
    let now = chrono::Utc::now().timestamp();
    for path in [
        "/api/rate-limits/config",
        "/api/v2/system/rate-limits",
        "/api/v1/health",
    ] {
        let (r, body) = send(&c, Method::GET, &format!("{base}{path}"), &[], None).await;
        assert_eq!(r.status, 429, "{path}");
        let retry: i64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((1..=20).contains(&retry), "{retry}");
        let reset: i64 = r.headers["x-ratelimit-reset"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(reset >= now && reset <= now + 61, "{reset} vs {now}");
        assert_eq!(body["error"].as_str().unwrap(), "rate limit exceeded");
        assert_eq!(body["retry_after"], retry);
        assert_eq!(body["limit"], 3);
        assert_eq!(body["remaining"], 0);
    }
}

#[tokio::test]
async fn forwarded_addresses_count_only_behind_trusted_proxies() {
    let c = crate::support::client();
    let limits = [
        ("SERVICE_IP_RATE_LIMIT", "2"),
        ("SERVICE_BURST_MULTIPLIER", "1"),
    ];
    let (trusting, _a) = spawn(&[
        limits[0],
        limits[1],
        ("SERVICE_TRUSTED_PROXIES", "127.0.0.0/8"),
    ])
    .await;
    let url = format!("{trusting}/api/rate-limits/config");
    let first = [("x-forwarded-for", "198.51.100.1")];
    let second = [("x-forwarded-for", "203.0.113.8, 198.51.100.2")];
    assert_eq!(status_of(&c, &url, &first).await, 200);
    assert_eq!(status_of(&c, &url, &first).await, 200);
    assert_eq!(status_of(&c, &url, &first).await, 429);
    assert_eq!(
        status_of(&c, &url, &second).await,
        200,
        "another client, another bucket"
    );

    let (distrusting, _b) = spawn(&limits).await;
    let url = format!("{distrusting}/api/rate-limits/config");
    assert_eq!(status_of(&c, &url, &first).await, 200);
    assert_eq!(status_of(&c, &url, &second).await, 200);
    assert_eq!(
        status_of(&c, &url, &[("x-forwarded-for", "192.0.2.77")]).await,
        429,
        "forged headers are ignored"
    );
}

#[tokio::test]
async fn health_has_its_own_endpoint_limit() {
    let (base, _dir) = spawn(&[
        ("SERVICE_IP_RATE_LIMIT", "10000"),
        ("SERVICE_BURST_MULTIPLIER", "1"),
    ])
    .await;
    let c = Client::new(); // anonymous: counted per address
    for _ in 0..120 {
        let (r, _) = send(&c, Method::GET, &format!("{base}/api/health"), &[], None).await;
        assert_eq!(r.status, 200);
    }
    let (r, body) = send(
        &c,
        Method::GET,
        &format!("{base}/api/v2/system/health"),
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 429, "the v2 path shares the endpoint's bucket");
    assert_eq!(body["limit"], 120);
    let c = crate::support::client(); // the rest needs a credential
    assert_eq!(
        status_of(&c, &format!("{base}/api/rate-limits/config"), &[]).await,
        200
    );
    let (_, config) = send(
        &c,
        Method::GET,
        &format!("{base}/api/rate-limits/config"),
        &[],
        None,
    )
    .await;
    let endpoints = config["endpoints"].as_array().unwrap();
    assert!(
        endpoints
            .iter()
            .any(|e| e["path"] == "/api/health" && e["quota"]["per_minute"] == 120)
    );
    assert_eq!(config["per_ip"]["per_minute"], 10000);
    assert_eq!(config["actions"]["debate_create"]["per_minute"], 10);
    assert_eq!(
        config["tiers"]["professional"],
        serde_json::json!({"per_minute": 200, "burst": 400})
    );
    assert_eq!(
        config["auth_paths"]["login"],
        serde_json::json!({"per_minute": 10, "burst": 10})
    );
    assert_eq!(config["backend"], "memory");
}

#[tokio::test]
async fn users_have_a_bucket_per_action_and_tiers_change_the_default() {
    let (base, _dir) = spawn(&[
        ("SERVICE_RATE_LIMIT_DEFAULT", "2"),
        ("SERVICE_BURST_MULTIPLIER", "1"),
    ])
    .await;
    let c = crate::support::client();
    let alice = [("x-test-user", "alice")];
    let url = format!("{base}/api/rate-limits/config");
    let (r, _) = send(&c, Method::GET, &url, &alice, None).await;
    assert_eq!(r.headers["x-ratelimit-action"], "default");
    assert_eq!(r.headers["x-ratelimit-limit"], "2");
    let (r, _) = send(
        &c,
        Method::GET,
        &format!("{base}/api/admin/stats"),
        &alice,
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["x-ratelimit-action"], "admin");

    let (r, status) = send(
        &c,
        Method::GET,
        &format!("{base}/api/rate-limit/status"),
        &alice,
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(status["user_id"], "alice");
    assert_eq!(status["limits"]["default"]["limit"], 2);
    assert_eq!(
        status["limits"]["default"]["remaining"], 0,
        "config and status took both: {status}"
    );
    assert_eq!(status["limits"]["admin"]["remaining"], 299);
    assert_eq!(status["limits"]["export"]["limit"], 5);
    assert_eq!(status["limits"].as_object().unwrap().len(), 6);

    let (r, body) = send(&c, Method::GET, &url, &alice, None).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.headers["x-ratelimit-action"], "default");
    assert_eq!(body["limit"], 2);
    assert_eq!(
        status_of(&c, &url, &[("x-test-user", "bob")]).await,
        200,
        "bob has his own bucket"
    );

    let free = [("x-test-user", "carol"), ("x-test-tier", "free")];
    let (_, tiered) = send(
        &c,
        Method::GET,
        &format!("{base}/api/rate-limit/status"),
        &free,
        None,
    )
    .await;
    assert_eq!(tiered["limits"]["default"]["limit"], 10);
    assert_eq!(
        tiered["limits"]["default"]["remaining"], 59,
        "free tier bursts to 60"
    );

    let (r, anonymous) = send(
        &Client::new(),
        Method::GET,
        &format!("{base}/api/rate-limit/status"),
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 401);
    assert_eq!(anonymous["code"], "UNAUTHORIZED");
}

#[tokio::test]
async fn redis_shares_counts_and_its_absence_falls_back_to_memory() {
    let mut redis = LoopbackServer::redis().await;
    let url = redis.url();
    let vars = [
        ("SERVICE_REDIS_URL", url.as_str()),
        ("SERVICE_IP_RATE_LIMIT", "4"),
        ("SERVICE_BURST_MULTIPLIER", "1"),
    ];
    let (a, _da) = spawn(&vars).await;
    let (b, _db) = spawn(&vars).await;
    let c = crate::support::client();
    let path = "/api/rate-limits/config";
    let (_, config) = send(&c, Method::GET, &format!("{a}{path}"), &[], None).await;
    assert_eq!(config["backend"], "redis");
    assert_eq!(status_of(&c, &format!("{a}{path}"), &[]).await, 200);
    assert_eq!(status_of(&c, &format!("{b}{path}"), &[]).await, 200);
    assert_eq!(status_of(&c, &format!("{b}{path}"), &[]).await, 200);
    assert_eq!(
        status_of(&c, &format!("{a}{path}"), &[]).await,
        429,
        "the replicas share one bucket"
    );

    redis.stop();
    // The first call after the loss fails over; from then on memory counts.
    let mut statuses = Vec::new();
    for _ in 0..6 {
        statuses.push(status_of(&c, &format!("{a}{path}"), &[]).await);
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        2,
        "{statuses:?}"
    );
    assert_eq!(status_of(&c, &format!("{a}/api/health"), &[]).await, 429);
    let (_, state) = send(
        &c,
        Method::GET,
        &format!("{b}/api/system/rate-limits"),
        &[],
        None,
    )
    .await;
    assert_eq!(state["redis"], "unavailable");
    assert_eq!(state["backend"], "memory_fallback");

    redis.restart().await;
    let mut back = false;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let (_, state) = send(
            &c,
            Method::GET,
            &format!("{b}/api/system/rate-limits"),
            &[],
            None,
        )
        .await;
        if state["redis"] == "healthy" {
            back = true;
            break;
        }
    }
    assert!(back, "the limiter reconnects when Redis returns");
}

#[tokio::test]
async fn health_says_when_redis_is_unreachable_and_fail_open_stops_counting() {
    let nowhere = format!("redis://127.0.0.1:{}", free_port());
    let c = crate::support::client();
    let (closed, _d1) = spawn(&[
        ("SERVICE_REDIS_URL", nowhere.as_str()),
        ("SERVICE_IP_RATE_LIMIT", "3"),
        ("SERVICE_BURST_MULTIPLIER", "1"),
    ])
    .await;
    let (r, health) = send(&c, Method::GET, &format!("{closed}/api/health"), &[], None).await;
    assert_eq!(r.status, 200);
    assert_eq!(health["status"], "degraded");
    assert_eq!(health["components"]["redis"], "unavailable");
    assert_eq!(health["checks"]["redis"]["status"], "unavailable");
    assert_eq!(
        status_of(&c, &format!("{closed}/api/health"), &[]).await,
        200
    );
    assert_eq!(
        status_of(&c, &format!("{closed}/api/health"), &[]).await,
        200
    );
    assert_eq!(
        status_of(&c, &format!("{closed}/api/health"), &[]).await,
        429,
        "memory still limits"
    );

    let (open, _d2) = spawn(&[
        ("SERVICE_REDIS_URL", nowhere.as_str()),
        ("SERVICE_IP_RATE_LIMIT", "3"),
        ("SERVICE_BURST_MULTIPLIER", "1"),
        ("SERVICE_RATE_LIMIT_FAIL_OPEN", "true"),
    ])
    .await;
    for _ in 0..8 {
        assert_eq!(
            status_of(&c, &format!("{open}/api/rate-limits/config"), &[]).await,
            200
        );
    }
    let (_, state) = send(
        &c,
        Method::GET,
        &format!("{open}/api/system/rate-limits"),
        &[],
        None,
    )
    .await;
    assert_eq!(state["backend"], "fail_open");
    assert!(state["uncounted"].as_u64().unwrap() >= 8, "{state}");
}
