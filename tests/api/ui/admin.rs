//! `/admin` from outside: an admin sees the overview and the users with
//! their lock, and each account action changes the account as the API
//! sees it; a non-admin gets 403 on every page and action and nothing
//! changes; an anonymous visitor is sent to sign in; a cross-site post is
//! refused.

use reqwest::Method;

use super::account::{get, post};
use super::{Jar, PASSWORD, browser, ui_sign_in};
use crate::serve::{Spawned, spawn_with};
use crate::support::accounts::{admin_get, call, login, me, register};
use crate::support::provider::{
    Behavior, FakeProvider, create_debate, quiet_limits, wait_finished,
};
use crate::support::{Kind, client, on_both_backends};

on_both_backends! {
    an_admin_unlocks_resets_disables_and_revokes => an_admin_unlocks_resets_disables_and_revokes;
    others_get_403_and_change_nothing => others_get_403_and_change_nothing;
    the_overview_shows_an_open_breaker => the_overview_shows_an_open_breaker;
    the_users_page_holds_the_configured_rows => the_users_page_holds_the_configured_rows;
}

const BOSS: &str = "boss@example.com";
const ACTIONS: [&str; 5] = ["unlock", "reset-mfa", "disable", "enable", "revoke-all"];

async fn spawn(kind: Kind) -> (Spawned, Jar) {
    let app = spawn_with(kind, &[("SERVICE_ADMIN_EMAILS", BOSS)]).await;
    let jar = ui_sign_in(&app.base, BOSS).await;
    (app, jar)
}

async fn lock(base: &str, email: &str) {
    for _ in 0..5 {
        let (status, _) = call(
            Method::POST,
            &format!("{base}/api/auth/login"),
            None,
            Some(serde_json::json!({"email": email, "password": "not the password"})),
        )
        .await;
        assert!(status == 401 || status == 429, "{status}");
    }
}

/// Waits until `/api/auth/me` (a read model) reports `mfa_enabled == want`.
async fn mfa_becomes(base: &str, token: &str, want: bool) {
    for _ in 0..200 {
        if me(base, token).await.1["mfa_enabled"] == want {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("mfa_enabled never became {want}");
}

async fn an_admin_unlocks_resets_disables_and_revokes(kind: Kind) {
    let (app, boss) = spawn(kind).await;
    let base = &app.base;
    let (status, overview) = get(base, &boss, "/admin").await;
    assert_eq!(status, 200, "{overview}");
    for part in [
        "Circuit breakers",
        "<dt>Event bus</dt><dd>healthy (",
        "<dt>Projections</dt><dd>",
        " caught up</dd>",
        "<dt>Last seal</dt>",
        "WebSocket clients",
        "href=\"/metrics\"",
    ] {
        assert!(overview.contains(part), "{part}: {overview}");
    }
    // The whole health report, errors, limits and metrics are pages of their
    // own; like records (the projections, the tiers) are a row each.
    for (path, part) in [
        (
            "/admin/health",
            "<h3>Projections</h3>\n<div class=\"scroll\" role=\"region\" aria-label=\"Health: Projections\" tabindex=\"0\">\n<table>\n<thead><tr><th scope=\"col\">name</th><th scope=\"col\">behind</th><th scope=\"col\">checkpoint_position</th><th scope=\"col\">stalled</th></tr></thead>",
        ),
        ("/admin/errors", "id=\"errors-h\">Recent errors"),
        (
            "/admin/limits",
            "<tr><th scope=\"row\">free</th><td>60</td><td>10</td></tr>",
        ),
        ("/admin/metrics", "Each metric summed over its labels."),
    ] {
        assert!(overview.contains(&format!("href=\"{path}\"")), "{path}");
        assert!(!overview.contains(part), "{part} on the overview");
        let (status, page) = get(base, &boss, path).await;
        assert_eq!(status, 200, "{path}");
        assert!(page.contains(part), "{part}: {page}");
    }
    assert_eq!(get(base, &boss, "/admin/nothing").await.0, 404);
    let victim = register(base, "vic@example.com", PASSWORD).await;
    let session = login(base, "vic@example.com", PASSWORD).await;
    let token = session["access_token"].as_str().unwrap().to_owned();
    lock(base, "vic@example.com").await;
    let (_, users) = get(base, &boss, "/admin/users?search=vic%40").await;
    assert!(users.contains("vic@example.com"), "{users}");
    assert_eq!(
        users.matches("<th scope=\"row\">").count(),
        1,
        "the search narrows"
    );
    assert!(users.contains("s left; 5 failed"), "{users}");
    let lockout = format!("/api/v2/admin/users/{victim}/lockout-status");
    assert_eq!(admin_get(base, &lockout).await["data"]["locked"], true);

    // Each action asks first; asking changes nothing.
    let unlock = format!("/admin/accounts/{victim}/unlock");
    let (status, question) = get(base, &boss, &unlock).await;
    assert_eq!(status, 200);
    assert!(question.contains("vic@example.com"));
    assert_eq!(admin_get(base, &lockout).await["data"]["locked"], true);
    let (status, location, _) = post(base, &boss, &unlock, &[]).await;
    assert_eq!(
        (status, location.as_str()),
        (303, "/admin/users?done=unlock")
    );
    let status = admin_get(base, &lockout).await["data"].clone();
    assert_eq!(
        (
            status["locked"].clone(),
            status["failed_login_count"].clone()
        ),
        (false.into(), 0.into())
    );

    // MFA on through the API, reset on the page.
    let (_, setup) = call(
        Method::POST,
        &format!("{base}/api/auth/mfa/setup"),
        Some(&token),
        None,
    )
    .await;
    let now = u64::try_from(chrono::Utc::now().timestamp()).unwrap();
    let code = agon::crypto::totp::code_at(setup["secret"].as_str().unwrap(), now).unwrap();
    let (status, _) = call(
        Method::POST,
        &format!("{base}/api/auth/mfa/enable"),
        Some(&token),
        Some(serde_json::json!({"code": code})),
    )
    .await;
    assert_eq!(status, 200);
    mfa_becomes(base, &token, true).await;
    assert_eq!(
        post(
            base,
            &boss,
            &format!("/admin/accounts/{victim}/reset-mfa"),
            &[]
        )
        .await
        .0,
        303
    );
    mfa_becomes(base, &token, false).await;

    // Revoke all ends the session.
    assert_eq!(
        post(
            base,
            &boss,
            &format!("/admin/accounts/{victim}/revoke-all"),
            &[]
        )
        .await
        .0,
        303
    );
    assert_eq!(me(base, &token).await.0, 401);

    // Disable refuses sign-in; re-enable allows it again.
    assert_eq!(
        post(
            base,
            &boss,
            &format!("/admin/accounts/{victim}/disable"),
            &[]
        )
        .await
        .0,
        303
    );
    let login_url = format!("{base}/api/auth/login");
    let sign_in = || {
        call(
            Method::POST,
            &login_url,
            None,
            Some(serde_json::json!({"email": "vic@example.com", "password": PASSWORD})),
        )
    };
    assert_eq!(sign_in().await.0, 403);
    let (_, users) = get(base, &boss, "/admin/users?search=vic").await;
    assert!(users.contains(">disabled<"), "{users}");
    assert_eq!(
        post(
            base,
            &boss,
            &format!("/admin/accounts/{victim}/enable"),
            &[]
        )
        .await
        .0,
        303
    );
    assert_eq!(sign_in().await.0, 200);

    // Unknown users and actions are not found.
    assert_eq!(
        get(base, &boss, "/admin/accounts/nobody/unlock").await.0,
        404
    );
    assert_eq!(
        get(base, &boss, &format!("/admin/accounts/{victim}/explode"))
            .await
            .0,
        404
    );
}

async fn others_get_403_and_change_nothing(kind: Kind) {
    let (app, boss) = spawn(kind).await;
    let base = &app.base;
    let plain = ui_sign_in(base, "plain@example.com").await;
    let victim = register(base, "vic@example.com", PASSWORD).await;
    let session = login(base, "vic@example.com", PASSWORD).await;
    let token = session["access_token"].as_str().unwrap().to_owned();
    for path in [
        "/admin",
        "/admin/users",
        "/admin/users?search=vic",
        "/admin/health",
        "/admin/errors",
        "/admin/limits",
        "/admin/metrics",
    ] {
        assert_eq!(get(base, &plain, path).await.0, 403, "{path}");
        let response = browser().get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(response.status(), 303, "{path}");
        assert!(
            response.headers()["location"]
                .to_str()
                .unwrap()
                .starts_with("/login?next=%2Fadmin")
        );
    }
    for action in ACTIONS {
        let path = format!("/admin/accounts/{victim}/{action}");
        assert_eq!(get(base, &plain, &path).await.0, 403, "{path}");
        assert_eq!(post(base, &plain, &path, &[]).await.0, 403, "{path}");
        // The admin's own cookie from another site is refused too.
        let response = browser()
            .post(format!("{base}{path}"))
            .header("cookie", boss.header())
            .header("sec-fetch-site", "cross-site")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 403, "{path}");
    }
    assert_eq!(me(base, &token).await.0, 200, "nothing was revoked");
    let (status, _) = call(
        Method::POST,
        &format!("{base}/api/auth/login"),
        None,
        Some(serde_json::json!({"email": "vic@example.com", "password": PASSWORD})),
    )
    .await;
    assert_eq!(status, 200, "nothing was disabled");
}

async fn the_overview_shows_an_open_breaker(kind: Kind) {
    let agent = "anthropic:claude-sonnet-4-5";
    let fake = FakeProvider::start().await;
    fake.script(move |c| {
        if c.agent == agent {
            Behavior::ServerError
        } else {
            Behavior::Answer
        }
    });
    let mut env = fake.env();
    env.extend(quiet_limits());
    env.push(("SERVICE_ADMIN_EMAILS".into(), BOSS.into()));
    let vars: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let app = spawn_with(kind, &vars).await;
    let boss = ui_sign_in(&app.base, BOSS).await;
    let c = client();
    for _ in 0..3 {
        let id = create_debate(&c, &app.base, &[agent, "demo-a", "demo-b"], 1).await;
        wait_finished(&c, &app.base, &id).await;
    }
    let (status, page) = get(&app.base, &boss, "/admin").await;
    assert_eq!(status, 200);
    let row = page
        .split("<tr>")
        .find(|row| row.contains(agent))
        .unwrap_or_else(|| panic!("{page}"));
    assert!(row.contains(">open<"), "{row}");
}

/// `SERVICE_UI_PAGE_SIZE` bounds the rows of a page; the others are a
/// "next page" away.
async fn the_users_page_holds_the_configured_rows(kind: Kind) {
    let vars = [
        ("SERVICE_ADMIN_EMAILS", BOSS),
        ("SERVICE_UI_PAGE_SIZE", "2"),
    ];
    let app = spawn_with(kind, &vars).await;
    let boss = ui_sign_in(&app.base, BOSS).await;
    for name in ["row1", "row2", "row3"] {
        register(&app.base, &format!("{name}@example.com"), PASSWORD).await;
    }
    let rows = |page: &str| {
        let body = page.split("<tbody>").nth(1).unwrap_or_default();
        body.split("</tbody>")
            .next()
            .unwrap_or_default()
            .matches("<tr>")
            .count()
    };
    // The users list is a read model: wait until it holds all three.
    let mut first = String::new();
    for _ in 0..100 {
        let (status, page) = get(&app.base, &boss, "/admin/users?search=row").await;
        assert_eq!(status, 200, "{page}");
        first = page;
        if first.contains("Next page") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(rows(&first), 2, "{first}");
    assert!(first.contains("offset=2\">Next page"), "{first}");
    let (_, second) = get(&app.base, &boss, "/admin/users?search=row&offset=2").await;
    assert_eq!(rows(&second), 1, "{second}");
    assert!(!second.contains("Next page"), "{second}");
    app.stop.cancel();
}
