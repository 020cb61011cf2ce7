//! The lockout under concurrency (§8.2): a burst of guesses checks no more
//! passwords than the threshold, a locked account answers alike whatever the
//! password, the owner's security actions stay open under someone else's
//! lock with their own per-session budget; one-use MFA step tokens, refused
//! same-password changes, a disabled user's refresh, and the admin user
//! directory with re-enabling. Each on SQLite and PostgreSQL.

use std::time::{Duration, Instant};

use agon_aggregates::account::REAUTH_LIMIT;
use futures::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};

use crate::auth::{ROOMY, attempt};
use crate::serve::{Spawned, spawn_with};
use crate::support::accounts::{call, login, register, signed_in};
use crate::support::{Kind, TEST_TOKEN, on_both_backends};

const PASSWORD: &str = "correct horse battery";
/// Failures at which the first lock starts.
const THRESHOLD: usize = 5;

async fn spawn(kind: Kind) -> Spawned {
    spawn_with(kind, &ROOMY).await
}

fn message(body: &Value) -> &str {
    body["error"].as_str().unwrap_or_default()
}

on_both_backends! {
    a_burst_checks_no_more_passwords_than_the_threshold => burst;
    a_lock_leaves_the_owners_security_actions_open => owner_actions;
    step_tokens_same_passwords_and_disabled_refresh => account_rules;
    admins_list_search_and_re_enable_users => directory;
}

async fn burst(kind: Kind) {
    let app = spawn(kind).await;
    let base = &app.base;
    let user_id = register(base, "ann@example.com", PASSWORD).await;
    let wrong = (0..40).map(|_| attempt(base, "ann@example.com", "wrong password"));
    let answers = join_all(wrong).await;
    let unauthorized = answers.iter().filter(|(s, _)| *s == 401).count();
    let locked = answers.iter().filter(|(s, _)| *s == 423).count();
    assert!(
        unauthorized <= THRESHOLD,
        "{unauthorized} passwords were checked"
    );
    assert_eq!(unauthorized + locked, 40, "{answers:?}");
    for (_, body) in answers.iter().filter(|(s, _)| *s == 423) {
        assert!(message(body).starts_with("Account locked for "), "{body}");
    }
    let status_url = format!("{base}/api/v2/admin/users/{user_id}/lockout-status");
    let (_, lock) = call(Method::GET, &status_url, Some(TEST_TOKEN), None).await;
    assert_eq!(lock["data"]["locked"], true, "{lock}");
    assert!(lock["data"]["failed_login_count"].as_u64().unwrap() <= THRESHOLD as u64);
    // Locked: the right password gets exactly the wrong one's answer.
    let (mixed, again) = tokio::join!(
        join_all((0..10).map(|_| attempt(base, "ann@example.com", "wrong password"))),
        attempt(base, "ann@example.com", PASSWORD),
    );
    let shape =
        |(status, body): &(u16, Value)| (*status, body["code"].clone(), body["details"].clone());
    let expected = shape(&mixed[0]);
    assert_eq!(expected.0, 423);
    assert_eq!(shape(&again), expected, "the right password stands out");
    assert!(mixed.iter().all(|answer| shape(answer) == expected));
    // Nothing of the burst was counted while locked.
    let (_, after) = call(Method::GET, &status_url, Some(TEST_TOKEN), None).await;
    assert_eq!(
        after["data"]["failed_login_count"],
        lock["data"]["failed_login_count"]
    );
    app.app.clock.advance(Duration::from_secs(61));
    let body = login(base, "ann@example.com", PASSWORD).await;
    assert!(body["user"]["last_login_at"].is_string(), "{body}");
}

async fn owner_actions(kind: Kind) {
    let app = spawn(kind).await;
    let base = &app.base;
    let (_, access, _) = signed_in(base, "bea@example.com").await;
    for _ in 0..THRESHOLD {
        assert_eq!(
            attempt(base, "bea@example.com", "wrong password").await.0,
            401
        );
    }
    assert_eq!(attempt(base, "bea@example.com", PASSWORD).await.0, 423);
    // Someone else's failures locked sign-in; the owner's session still works.
    let url = |path: &str| format!("{base}{path}");
    let (status, key) = call(Method::POST, &url("/api/auth/api-key"), Some(&access), None).await;
    assert_eq!(status, 201, "{key}");
    let (status, setup) = call(
        Method::POST,
        &url("/api/auth/mfa/setup"),
        Some(&access),
        None,
    )
    .await;
    assert_eq!(status, 200, "{setup}");
    let change =
        |current: &str, new: &str| json!({"current_password": current, "new_password": new});
    let password_url = url("/api/auth/password");
    // A wrong MFA code counts against this session like a wrong password.
    let (status, _) = call(
        Method::POST,
        &url("/api/auth/mfa/enable"),
        Some(&access),
        Some(json!({"code": "ABCDE-FGHJK"})),
    )
    .await;
    assert_eq!(status, 401);
    for _ in 1..REAUTH_LIMIT - 1 {
        let (status, body) = call(
            Method::POST,
            &password_url,
            Some(&access),
            Some(change("guess one", "another good one")),
        )
        .await;
        assert_eq!(status, 403, "{body}");
    }
    let (status, body) = call(
        Method::POST,
        &password_url,
        Some(&access),
        Some(change(PASSWORD, "another good one")),
    )
    .await;
    assert_eq!(
        status, 200,
        "the owner changes the password while locked: {body}"
    );
    // The new session's budget: the fifth wrong current password ends it.
    app.app.clock.advance(Duration::from_secs(61));
    let body = login(base, "bea@example.com", "another good one").await;
    let access = body["access_token"].as_str().unwrap().to_owned();
    let guesses = join_all((0..20).map(|_| {
        call(
            Method::POST,
            &password_url,
            Some(&access),
            Some(change("guess two", "a third good one")),
        )
    }))
    .await;
    let wrong = guesses.iter().filter(|(s, _)| *s == 403).count();
    assert!(
        wrong < REAUTH_LIMIT as usize,
        "{wrong} guesses were checked: {guesses:?}"
    );
    let ended = "Too many failed checks: this session has ended; sign in again";
    assert!(
        guesses
            .iter()
            .any(|(s, b)| *s == 401 && message(b) == ended),
        "{guesses:?}"
    );
    assert!(
        guesses.iter().all(|(s, _)| matches!(*s, 401 | 403 | 409)),
        "{guesses:?}"
    );
    let (status, body) = call(Method::GET, &url("/api/auth/me"), Some(&access), None).await;
    assert_eq!(status, 401, "the session ended: {body}");
    // The account itself is not locked by those guesses.
    login(base, "bea@example.com", "another good one").await;
}

async fn account_rules(kind: Kind) {
    let app = spawn(kind).await;
    let base = &app.base;
    let (user_id, access, refresh) = signed_in(base, "cal@example.com").await;
    let (status, body) = call(
        Method::POST,
        &format!("{base}/api/auth/password"),
        Some(&access),
        Some(json!({"current_password": PASSWORD, "new_password": PASSWORD})),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        message(&body),
        "New password must differ from the current one"
    );
    let (status, _) = call(
        Method::POST,
        &format!("{base}/admin/users/{user_id}/disable"),
        Some(TEST_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = call(
        Method::POST,
        &format!("{base}/api/auth/refresh"),
        None,
        Some(json!({"refresh_token": refresh})),
    )
    .await;
    assert_eq!((status, message(&body)), (401, "Invalid token"));
    // A disabled account's wrong password is an ordinary failure.
    assert_eq!(
        attempt(base, "cal@example.com", "wrong password").await.0,
        401
    );
    assert_eq!(attempt(base, "cal@example.com", PASSWORD).await.0, 403);
}

async fn directory(kind: Kind) {
    let app = spawn(kind).await;
    let base = &app.base;
    let clock = &app.app.clock;
    let (dee, access, _) = signed_in(base, "dee@example.com").await;
    clock.advance(Duration::from_secs(1));
    register(base, "dan@example.org", PASSWORD).await;
    clock.advance(Duration::from_secs(1));
    register(base, "eli@example.com", PASSWORD).await;
    let users = |query: &str, token: &str| {
        let url = format!("{base}/api/admin/users{query}");
        let token = token.to_owned();
        async move { call(Method::GET, &url, Some(&token), None).await }
    };
    let (status, _) = users("", &access).await;
    assert_eq!(status, 403, "a normal user may not list users");
    // The directory is a read model: wait until it has all three.
    let mut page = Value::Null;
    for _ in 0..50 {
        let (status, body) = users("", TEST_TOKEN).await;
        assert_eq!(status, 200, "{body}");
        page = body;
        if page["total"] == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(page["total"], 3, "{page}");
    assert_eq!(page["users"][0]["email"], "eli@example.com", "newest first");
    assert_eq!(page["items"], page["users"], "the page under items too");
    let (_, found) = users("?search=EXAMPLE.ORG", TEST_TOKEN).await;
    assert_eq!(found["total"], 1, "{found}");
    assert_eq!(found["users"][0]["email"], "dan@example.org");
    let (_, paged) = users("?limit=2&offset=2", TEST_TOKEN).await;
    assert_eq!(
        (paged["count"].as_u64(), paged["total"].as_u64()),
        (Some(1), Some(3))
    );
    let (status, v2) = call(
        Method::GET,
        &format!("{base}/api/v2/admin/users?limit=1"),
        Some(TEST_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        v2["links"]["next"].as_str().unwrap().contains("offset=1"),
        "{v2}"
    );
    assert_eq!(users("?limit=0", TEST_TOKEN).await.0, 400);

    let admin = |action: &str| {
        let url = format!("{base}/admin/users/{dee}/{action}");
        async move { call(Method::POST, &url, Some(TEST_TOKEN), None).await.0 }
    };
    assert_eq!(admin("disable").await, 200);
    assert_eq!(attempt(base, "dee@example.com", PASSWORD).await.0, 403);
    let (_, listed) = users("?search=dee", TEST_TOKEN).await;
    assert_eq!(listed["users"][0]["disabled"], true);
    let (status, _) = call(
        Method::POST,
        &format!("{base}/admin/users/{dee}/enable"),
        Some(&access),
        None,
    )
    .await;
    assert_eq!(status, 401, "the disabled user's own token is gone");
    assert_eq!(admin("enable").await, 200);
    let (_, listed) = users("?search=dee", TEST_TOKEN).await;
    assert_eq!(listed["users"][0]["disabled"], false);
    let body = login(base, "dee@example.com", PASSWORD).await;
    let fresh = body["access_token"].as_str().unwrap();
    let (status, _) = call(
        Method::POST,
        &format!("{base}/admin/users/{dee}/enable"),
        Some(fresh),
        None,
    )
    .await;
    assert_eq!(status, 403, "a normal user may not enable users");
    assert_eq!(
        call(
            Method::POST,
            &format!("{base}/admin/users/nobody/enable"),
            Some(TEST_TOKEN),
            None
        )
        .await
        .0,
        404
    );
}

/// Prints the median sign-in time for a known and an unknown email (wrong
/// password both): `cargo test --test api lockout::timing -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a measurement, not a check"]
async fn timing_of_known_and_unknown_emails() {
    for kind in [Kind::Sqlite, Kind::Postgres] {
        let app = spawn(kind).await;
        let base = &app.base;
        let user_id = register(base, "tim@example.com", PASSWORD).await;
        let unlock = format!("{base}/api/v2/admin/users/{user_id}/unlock");
        let mut known = Vec::new();
        let mut unknown = Vec::new();
        for round in 0..200 {
            if round % 4 == 0 {
                call(Method::POST, &unlock, Some(TEST_TOKEN), None).await;
            }
            let (email, times) = if round % 2 == 0 {
                ("tim@example.com", &mut known)
            } else {
                ("nobody@example.com", &mut unknown)
            };
            let started = Instant::now();
            let (status, _) = attempt(base, email, "wrong password").await;
            times.push(started.elapsed());
            assert_eq!(status, 401);
        }
        known.sort();
        unknown.sort();
        // The same, in process (no HTTP).
        let (mut k2, mut u2) = (Vec::new(), Vec::new());
        for round in 0..100 {
            if round % 4 == 0 {
                call(Method::POST, &unlock, Some(TEST_TOKEN), None).await;
            }
            let (email, times) = if round % 2 == 0 {
                ("tim@example.com", &mut k2)
            } else {
                ("nobody@example.com", &mut u2)
            };
            let device = agon_aggregates::account::Device::default();
            let started = Instant::now();
            let result = app.app.auth.login(email, "wrong password", device).await;
            times.push(started.elapsed());
            assert!(result.is_err());
        }
        k2.sort();
        u2.sort();
        println!(
            "in process: known {:?} unknown {:?}",
            k2[k2.len() / 2],
            u2[u2.len() / 2]
        );
        println!(
            "{kind:?}: median known {:.1} ms, unknown {:.1} ms ({} each)",
            known[known.len() / 2].as_secs_f64() * 1e3,
            unknown[unknown.len() / 2].as_secs_f64() * 1e3,
            known.len()
        );
    }
}
