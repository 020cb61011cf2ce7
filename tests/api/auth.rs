//! Sign-in and tokens end to end (§4.1, §5.2, §8.2): passwords, the lockout
//! ladder on a moved clock, token types and expiry, refresh rotation,
//! sessions, MFA, API keys, service headers and revocation across replicas.

use std::time::Duration;

use agon::crypto::jwt::{Claims, JwtAlgorithm, JwtKeys, TokenType};
use agon::crypto::totp;
use reqwest::Method;
use serde_json::{Value, json};

use crate::serve::{Spawned, build_app_on, serve_app, spawn_with};
use crate::support::accounts::{call, login, me, register, signed_in};
use crate::support::{Kind, LoopbackServer, TEST_TOKEN};

pub const SECRET: &str = "test-jwt-secret-that-is-long-enough-0123";
const PASSWORD: &str = "correct horse battery";

/// The keys every replica of one deployment must share.
pub const SHARED_KEYS: [(&str, &str); 2] = [
    (
        "SERVICE_ENCRYPTION_KEY",
        "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f",
    ),
    (
        "SERVICE_BLIND_INDEX_KEY",
        "1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100",
    ),
];

/// Limits high enough that no test trips them by accident.
pub const ROOMY: [(&str, &str); 6] = [
    ("SERVICE_JWT_SECRET", SECRET),
    ("SERVICE_IP_RATE_LIMIT", "1000000"),
    ("SERVICE_RATE_LIMIT_DEFAULT", "1000000"),
    ("SERVICE_RATE_LIMIT_AUTH", "1000000"),
    ("SERVICE_RATE_LIMIT_OAUTH", "1000000"),
    ("SERVICE_RATE_LIMIT_SSO", "1000000"),
];

async fn spawn(extra: &[(&str, &str)]) -> Spawned {
    let mut vars = ROOMY.to_vec();
    vars.extend_from_slice(extra);
    spawn_with(Kind::Sqlite, &vars).await
}

fn message(body: &Value) -> &str {
    body["error"].as_str().unwrap_or_default()
}

/// One sign-in with `email` and `password`.
pub async fn attempt(base: &str, email: &str, password: &str) -> (u16, Value) {
    call(
        Method::POST,
        &format!("{base}/api/auth/login"),
        None,
        Some(json!({"email": email, "password": password})),
    )
    .await
}

#[tokio::test]
async fn register_sign_in_and_read_the_profile() {
    let app = spawn(&[]).await;
    let base = &app.base;
    let user_id = register(base, "Ada@Example.com", PASSWORD).await;
    let body = login(base, "ada@example.com", PASSWORD).await;
    assert_eq!(body["token_type"], "bearer");
    assert_eq!(body["expires_in"], 3600);
    assert_eq!(body["user"]["email"], "ada@example.com");
    let access = body["access_token"].as_str().unwrap();
    let (status, profile) = me(base, access).await;
    assert_eq!(status, 200, "{profile}");
    assert_eq!(profile["user_id"], user_id.as_str());
    assert_eq!(profile["role"], "user");
    let (status, v2) = call(
        Method::GET,
        &format!("{base}/api/v2/users/me"),
        Some(access),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(v2["data"]["email"], "ada@example.com");
    // The access token carries the spec's claims and jti = session id.
    let claims = JwtKeys::new(SECRET.as_bytes(), JwtAlgorithm::Hs256)
        .verify(access, TokenType::Access, app.app.clock.unix())
        .unwrap();
    assert_eq!(claims.sub, user_id);
    assert_eq!(claims.jti, body["session_id"].as_str().unwrap());
    assert_eq!(claims.role.as_deref(), Some("user"));
    assert_eq!(claims.email.as_deref(), Some("ada@example.com"));
    let (status, dup) = call(
        Method::POST,
        &format!("{base}/api/auth/register"),
        None,
        Some(json!({"email": "ADA@example.com", "password": PASSWORD, "name": "Ada"})),
    )
    .await;
    assert_eq!(status, 409, "{dup}");
}

#[tokio::test]
async fn unknown_email_and_wrong_password_get_the_same_answer() {
    let app = spawn(&[]).await;
    register(&app.base, "bob@example.com", PASSWORD).await;
    let (s1, wrong) = attempt(&app.base, "bob@example.com", "Correct horse battery").await;
    let (s2, unknown) = attempt(&app.base, "nobody@example.com", PASSWORD).await;
    assert_eq!((s1, s2), (401, 401));
    assert_eq!(message(&wrong), "Invalid email or password");
    assert_eq!(message(&unknown), "Invalid email or password");
    for (password, expected) in [("short", 422), (&"x".repeat(129)[..], 422)] {
        let (status, _) = call(
            Method::POST,
            &format!("{}/api/auth/register", app.base),
            None,
            Some(json!({"email": "c@example.com", "password": password, "name": "C"})),
        )
        .await;
        assert_eq!(status, expected);
    }
}

#[tokio::test]
async fn the_lockout_ladder_names_the_remaining_seconds() {
    let app = spawn(&[]).await;
    let base = &app.base;
    let user_id = register(base, "eve@example.com", PASSWORD).await;
    let clock = &app.app.clock;
    let mut failures = 0;
    let mut locks = Vec::new();
    while failures < 15 {
        let (status, body) = attempt(base, "eve@example.com", "wrong password").await;
        if status == 423 {
            let remaining = body["details"]["retry_after"].as_i64().unwrap();
            assert_eq!(
                message(&body),
                format!("Account locked for {remaining} seconds")
            );
            locks.push((failures, remaining));
            // The right password does not get in while locked.
            let (status, _) = attempt(base, "eve@example.com", PASSWORD).await;
            assert_eq!(status, 423);
            clock.advance(Duration::from_secs(u64::try_from(remaining).unwrap()));
            continue;
        }
        assert_eq!(status, 401, "{body}");
        failures += 1;
    }
    // Locks start at 5 (1 minute), 10 (15 minutes) and 15 (1 hour).
    assert_eq!(locks[0], (5, 60));
    assert!(locks.iter().filter(|(n, _)| *n < 10).all(|(_, s)| *s == 60));
    assert!(locks.contains(&(10, 900)), "{locks:?}");
    let (status, body) = attempt(base, "eve@example.com", PASSWORD).await;
    assert_eq!(status, 423);
    assert_eq!(message(&body), "Account locked for 3600 seconds");
    clock.advance(Duration::from_secs(1_200));
    let (_, body) = attempt(base, "eve@example.com", PASSWORD).await;
    assert_eq!(message(&body), "Account locked for 2400 seconds");

    let status_url = format!("{base}/api/v2/admin/users/{user_id}/lockout-status");
    let (status, lock) = call(Method::GET, &status_url, Some(TEST_TOKEN), None).await;
    assert_eq!(status, 200);
    assert_eq!(lock["data"]["failed_login_count"], 15);
    assert_eq!(lock["data"]["locked"], true);
    assert!(lock["data"]["locked_until"].is_string());
    let (status, _) = call(
        Method::POST,
        &format!("{base}/api/v2/admin/users/{user_id}/unlock"),
        Some(TEST_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (_, lock) = call(Method::GET, &status_url, Some(TEST_TOKEN), None).await;
    assert_eq!(lock["data"]["failed_login_count"], 0);
    assert_eq!(lock["data"]["locked_until"], Value::Null);
    login(base, "eve@example.com", PASSWORD).await;
}

#[tokio::test]
async fn token_types_expiry_and_refresh_rotation() {
    let app = spawn(&[]).await;
    let base = &app.base;
    let (_, access, refresh) = signed_in(base, "tom@example.com").await;
    // A refresh token is not an access token, and the other way round.
    let (status, body) = me(base, &refresh).await;
    assert_eq!((status, message(&body)), (401, "Invalid token"));
    let refresh_url = format!("{base}/api/auth/refresh");
    let (status, body) = call(
        Method::POST,
        &refresh_url,
        None,
        Some(json!({"refresh_token": access})),
    )
    .await;
    assert_eq!((status, message(&body)), (401, "Invalid token"));

    let (status, pair) = call(
        Method::POST,
        &refresh_url,
        None,
        Some(json!({"refresh_token": refresh})),
    )
    .await;
    assert_eq!(status, 200, "{pair}");
    let new_access = pair["access_token"].as_str().unwrap().to_owned();
    let new_refresh = pair["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(new_refresh, refresh);
    assert_eq!(me(base, &new_access).await.0, 200);
    // Presenting the rotated token again ends the session.
    let (status, _) = call(
        Method::POST,
        &refresh_url,
        None,
        Some(json!({"refresh_token": refresh})),
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(me(base, &new_access).await.0, 401);
    let (status, _) = call(
        Method::POST,
        &refresh_url,
        None,
        Some(json!({"refresh_token": new_refresh})),
    )
    .await;
    assert_eq!(status, 401);

    // Access tokens expire after SERVICE_JWT_EXPIRY_HOURS (1).
    let (_, access, _) = signed_in(base, "tim@example.com").await;
    app.app.clock.advance(Duration::from_secs(3_601));
    let (status, body) = me(base, &access).await;
    assert_eq!((status, message(&body)), (401, "Token expired"));
}

#[tokio::test]
async fn forged_tokens_are_refused() {
    let app = spawn(&[]).await;
    let base = &app.base;
    let (user_id, access, _) = signed_in(base, "ivy@example.com").await;
    let now = app.app.clock.unix();
    let claims = Claims {
        exp: now + 600,
        iat: now,
        sub: user_id,
        jti: "made-up".to_owned(),
        token_type: TokenType::Access,
        email: None,
        role: Some("admin".to_owned()),
        generation: None,
        org_id: None,
        org_role: None,
        via: None,
    };
    let other = JwtKeys::new(
        b"another-secret-of-enough-length-9876543",
        JwtAlgorithm::Hs256,
    );
    let hs512 = JwtKeys::new(SECRET.as_bytes(), JwtAlgorithm::Hs512);
    let payload = access.split('.').nth(1).unwrap();
    let none = format!("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.{payload}.");
    for token in [
        other.issue(&claims).unwrap(),
        hs512.issue(&claims).unwrap(),
        none,
        "not-a-token".to_owned(),
        format!("{access}x"),
    ] {
        let (status, body) = me(base, &token).await;
        assert_eq!((status, message(&body)), (401, "Invalid token"), "{token}");
    }
    // Not a bearer scheme at all.
    let response = reqwest::Client::new()
        .get(format!("{base}/api/auth/me"))
        .header("authorization", format!("Basic {access}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
}

#[tokio::test]
async fn a_changed_secret_signs_everyone_out() {
    let vars = [("SERVICE_JWT_SECRET", SECRET)];
    let (first, dir) = build_app_on(None, &vars).await;
    let data_dir = first.settings.data_dir.clone();
    let first = serve_app(first, dir).await;
    let (_, access, _) = signed_in(&first.base, "max@example.com").await;
    assert_eq!(me(&first.base, &access).await.0, 200);
    first.stop.cancel();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let data = data_dir.to_str().unwrap();
    let rotated = [
        (
            "SERVICE_JWT_SECRET",
            "a-completely-different-secret-0123456789",
        ),
        ("SERVICE_DATA_DIR", data),
    ];
    let (second, dir) = build_app_on(None, &rotated).await;
    let second = serve_app(second, dir).await;
    let (status, body) = me(&second.base, &access).await;
    assert_eq!((status, message(&body)), (401, "Invalid token"));
    // The account itself survived: the same password signs in again.
    login(&second.base, "max@example.com", PASSWORD).await;
}

#[tokio::test]
async fn logout_and_session_limits() {
    let app = spawn(&[]).await;
    let base = &app.base;
    let (_, first, _) = signed_in(base, "liz@example.com").await;
    let mut tokens = vec![first];
    for _ in 0..10 {
        let body = login(base, "liz@example.com", PASSWORD).await;
        tokens.push(body["access_token"].as_str().unwrap().to_owned());
    }
    // The eleventh sign-in evicted the oldest session.
    assert_eq!(me(base, &tokens[0]).await.0, 401);
    assert_eq!(me(base, &tokens[1]).await.0, 200);
    let (_, list) = call(
        Method::GET,
        &format!("{base}/api/auth/sessions"),
        Some(&tokens[10]),
        None,
    )
    .await;
    assert_eq!(list["total"], 10, "{list}");
    assert_eq!(list["items"], list["sessions"], "the list under items too");
    let current: Vec<_> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["current"] == true)
        .collect();
    assert_eq!(current.len(), 1);

    let (status, _) = call(
        Method::POST,
        &format!("{base}/api/auth/logout"),
        Some(&tokens[1]),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = me(base, &tokens[1]).await;
    assert_eq!((status, message(&body)), (401, "Invalid token"));

    let victim = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["current"] == false)
        .unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, _) = call(
        Method::DELETE,
        &format!("{base}/api/auth/sessions/{victim}"),
        Some(&tokens[10]),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = call(
        Method::DELETE,
        &format!("{base}/api/auth/sessions/not-a-session"),
        Some(&tokens[10]),
        None,
    )
    .await;
    assert_eq!(status, 404);
    let (status, revoked) = call(
        Method::DELETE,
        &format!("{base}/api/auth/sessions"),
        Some(&tokens[10]),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(revoked["revoked"], 7, "{revoked}");
    assert_eq!(me(base, &tokens[10]).await.0, 200);
    for token in &tokens[2..10] {
        assert_eq!(me(base, token).await.0, 401);
    }
}

#[tokio::test]
async fn sessions_show_device_and_expire_when_idle() {
    let app = spawn(&[("SERVICE_SESSION_INACTIVITY_TIMEOUT", "120")]).await;
    let base = &app.base;
    register(base, "kim@example.com", PASSWORD).await;
    let response = reqwest::Client::new()
        .post(format!("{base}/api/auth/login"))
        .header(
            "user-agent",
            "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Version/17.0 Mobile/15E148 Safari/604.1",
        )
        .json(&json!({"email": "kim@example.com", "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    let access = body["access_token"].as_str().unwrap();
    let (_, list) = call(
        Method::GET,
        &format!("{base}/api/auth/sessions"),
        Some(access),
        None,
    )
    .await;
    let session = &list["sessions"][0];
    assert_eq!(session["device_type"], "mobile");
    assert_eq!(session["browser"], "Safari");
    assert!(session["last_activity"].is_string(), "{session}");
    app.app.clock.advance(Duration::from_secs(100));
    assert_eq!(me(base, access).await.0, 200, "used within the timeout");
    app.app.clock.advance(Duration::from_secs(121));
    let (status, body) = me(base, access).await;
    assert_eq!((status, message(&body)), (401, "Token expired"));
    assert_eq!(me(base, access).await.0, 401, "the session is over");
}

#[tokio::test]
async fn a_password_change_needs_the_old_one_and_ends_every_session() {
    let app = spawn(&[]).await;
    let base = &app.base;
    let (_, access, refresh) = signed_in(base, "ned@example.com").await;
    let url = format!("{base}/api/auth/password");
    let change =
        |current: &str, new: &str| json!({"current_password": current, "new_password": new});
    let (status, _) = call(
        Method::POST,
        &url,
        Some(&access),
        Some(change("wrong", "another good one")),
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = call(
        Method::POST,
        &url,
        Some(&access),
        Some(change(PASSWORD, "short")),
    )
    .await;
    assert_eq!(status, 422);
    let (status, _) = call(
        Method::POST,
        &url,
        Some(&access),
        Some(change(PASSWORD, "another good one")),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(me(base, &access).await.0, 401);
    let (status, _) = call(
        Method::POST,
        &format!("{base}/api/auth/refresh"),
        None,
        Some(json!({"refresh_token": refresh})),
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(attempt(base, "ned@example.com", PASSWORD).await.0, 401);
    login(base, "ned@example.com", "another good one").await;
}

#[tokio::test]
async fn mfa_needs_a_fresh_code_and_backup_codes_work_once() {
    let app = spawn(&[]).await;
    let base = &app.base;
    let clock = &app.app.clock;
    let (user_id, access, _) = signed_in(base, "mia@example.com").await;
    let (status, setup) = call(
        Method::POST,
        &format!("{base}/api/auth/mfa/setup"),
        Some(&access),
        None,
    )
    .await;
    assert_eq!(status, 200, "{setup}");
    let secret = setup["secret"].as_str().unwrap().to_owned();
    assert!(
        setup["otpauth_uri"]
            .as_str()
            .unwrap()
            .starts_with("otpauth://totp/")
    );
    let code = |clock: &agon::clock::Clock| {
        totp::code_at(&secret, u64::try_from(clock.unix()).unwrap()).unwrap()
    };
    let enable_url = format!("{base}/api/auth/mfa/enable");
    let (status, _) = call(
        Method::POST,
        &enable_url,
        Some(&access),
        Some(json!({"code": "000000"})),
    )
    .await;
    assert!(status == 401 || code(clock) == "000000");
    let (status, enabled) = call(
        Method::POST,
        &enable_url,
        Some(&access),
        Some(json!({"code": code(clock)})),
    )
    .await;
    assert_eq!(status, 200, "{enabled}");
    let backups: Vec<String> = enabled["backup_codes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(backups.len(), 10);

    let challenge = || async {
        let challenge = login(base, "mia@example.com", PASSWORD).await;
        assert_eq!(challenge["mfa_required"], true);
        assert!(challenge.get("access_token").is_none());
        challenge["mfa_token"].as_str().unwrap().to_owned()
    };
    let verify = |mfa_token: String, code: String| {
        let url = format!("{base}/api/auth/mfa/verify");
        async move {
            call(
                Method::POST,
                &url,
                None,
                Some(json!({"mfa_token": mfa_token, "code": code})),
            )
            .await
        }
    };
    let mfa_token = challenge().await;
    // The code that enabled MFA was spent: the same step is refused.
    assert_eq!(verify(mfa_token.clone(), code(clock)).await.0, 401);
    clock.advance(Duration::from_secs(30));
    let (status, signed) = verify(mfa_token.clone(), code(clock)).await;
    assert_eq!(status, 200, "{signed}");
    assert!(signed["access_token"].is_string());
    assert!(signed["user"]["last_login_at"].is_string(), "{signed}");
    // The step token finished its sign-in: it works once, even with a good code.
    let (status, body) = verify(mfa_token, backups[1].clone()).await;
    assert_eq!((status, message(&body)), (401, "Invalid token"));
    let mfa_token = challenge().await;
    assert_eq!(
        verify(mfa_token.clone(), code(clock)).await.0,
        401,
        "TOTP replay refused"
    );
    let (status, _) = verify(mfa_token, backups[0].to_lowercase()).await;
    assert_eq!(status, 200, "backup codes ignore case");
    assert_eq!(
        verify(challenge().await, backups[0].clone()).await.0,
        401,
        "backup code reused"
    );

    // The secret is stored as an encryption envelope, never in the clear.
    let stream = app
        .app
        .log
        .load_stream("account", &user_id, 0)
        .await
        .unwrap();
    let setup_event = stream
        .iter()
        .find(|e| e.event_type == "MfaSetupStarted")
        .unwrap();
    let payload = setup_event.payload_value().unwrap();
    assert_eq!(payload["MfaSetupStarted"]["secret"]["_encrypted"], true);
    assert!(!payload.to_string().contains(&secret));
    let text = crate::support::client()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for name in [
        "service_encryption_operations_total",
        "service_encryption_operation_latency_seconds",
        "service_rbac_permission_checks_total",
    ] {
        assert!(text.contains(name), "{name} missing from /metrics");
    }

    // An admin resets MFA: the password alone signs in again.
    let (status, _) = call(
        Method::DELETE,
        &format!("{base}/api/v2/admin/users/{user_id}/mfa"),
        Some(TEST_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let again = login(base, "mia@example.com", PASSWORD).await;
    assert!(again["access_token"].is_string());
}

#[tokio::test]
async fn mfa_can_be_turned_off_with_a_code() {
    let app = spawn(&[]).await;
    let base = &app.base;
    let (_, access, _) = signed_in(base, "ola@example.com").await;
    let (_, setup) = call(
        Method::POST,
        &format!("{base}/api/auth/mfa/setup"),
        Some(&access),
        None,
    )
    .await;
    let secret = setup["secret"].as_str().unwrap();
    let now = || u64::try_from(app.app.clock.unix()).unwrap();
    let (status, _) = call(
        Method::POST,
        &format!("{base}/api/auth/mfa/enable"),
        Some(&access),
        Some(json!({"code": totp::code_at(secret, now()).unwrap()})),
    )
    .await;
    assert_eq!(status, 200);
    app.app.clock.advance(Duration::from_secs(30));
    let disable = format!("{base}/api/auth/mfa/disable");
    let (status, _) = call(
        Method::POST,
        &disable,
        Some(&access),
        Some(json!({"code": "12345"})),
    )
    .await;
    assert_eq!(status, 401);
    let (status, _) = call(
        Method::POST,
        &disable,
        Some(&access),
        Some(json!({"code": totp::code_at(secret, now()).unwrap()})),
    )
    .await;
    assert_eq!(status, 200);
    assert!(login(base, "ola@example.com", PASSWORD).await["access_token"].is_string());
}

#[tokio::test]
async fn api_keys_are_shown_once_replaced_and_revoked() {
    let app = spawn(&[]).await;
    let base = &app.base;
    let (user_id, access, _) = signed_in(base, "pam@example.com").await;
    let url = format!("{base}/api/auth/api-key");
    let (status, first) = call(Method::POST, &url, Some(&access), None).await;
    assert_eq!(status, 201, "{first}");
    let first_key = first["api_key"].as_str().unwrap().to_owned();
    assert!(first_key.starts_with("agon_"));
    let (status, profile) = me(base, &first_key).await;
    assert_eq!(status, 200);
    assert_eq!(profile["user_id"], user_id.as_str());
    let (_, second) = call(Method::POST, &url, Some(&access), None).await;
    let second_key = second["api_key"].as_str().unwrap().to_owned();
    assert_eq!(me(base, &first_key).await.0, 401, "replaced key");
    assert_eq!(me(base, &second_key).await.0, 200);
    // A different last character (one key in 64 already ends in `A`).
    let other = if second_key.ends_with('A') { 'B' } else { 'A' };
    let tampered = format!("{}{other}", &second_key[..second_key.len() - 1]);
    assert_eq!(me(base, &tampered).await.0, 401);
    let (status, _) = call(Method::DELETE, &url, Some(&second_key), None).await;
    assert_eq!(status, 200);
    assert_eq!(me(base, &second_key).await.0, 401, "revoked key");
    let (status, _) = call(Method::DELETE, &url, Some(&access), None).await;
    assert_eq!(status, 409, "nothing left to revoke");
}

#[tokio::test]
async fn admins_disable_users_and_revoke_their_tokens() {
    let app = spawn(&[]).await;
    let base = &app.base;
    let (user_id, access, _) = signed_in(base, "ray@example.com").await;
    for path in [
        format!("/api/v2/admin/users/{user_id}/lockout-status"),
        "/api/admin/stats".to_owned(),
    ] {
        let (status, body) = call(Method::GET, &format!("{base}{path}"), Some(&access), None).await;
        assert_eq!(status, 403, "{path}: {body}");
    }
    let body = login(base, "ray@example.com", PASSWORD).await;
    let second = body["access_token"].as_str().unwrap().to_owned();
    let (status, revoked) = call(
        Method::POST,
        &format!("{base}/admin/users/{user_id}/revoke-all"),
        Some(TEST_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(revoked["sessions_revoked"], 2);
    assert_eq!(me(base, &access).await.0, 401);
    assert_eq!(me(base, &second).await.0, 401);

    let body = login(base, "ray@example.com", PASSWORD).await;
    let third = body["access_token"].as_str().unwrap().to_owned();
    let (status, _) = call(
        Method::POST,
        &format!("{base}/admin/users/{user_id}/disable"),
        Some(TEST_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(me(base, &third).await.0, 401);
    let (status, _) = attempt(base, "ray@example.com", PASSWORD).await;
    assert_eq!(status, 403);
    let (status, _) = call(
        Method::POST,
        &format!("{base}/admin/users/no-such-user/disable"),
        Some(TEST_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_signed_in_user_is_limited_under_their_own_id() {
    let app = spawn_with(Kind::Sqlite, &[("SERVICE_JWT_SECRET", SECRET)]).await;
    let (user_id, access, _) = signed_in(&app.base, "rex@example.com").await;
    let (status, body) = call(
        Method::GET,
        &format!("{}/api/rate-limit/status", app.base),
        Some(&access),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["user_id"], user_id.as_str());
    assert_eq!(body["limits"]["default"]["limit"], 60);
}

#[tokio::test]
async fn admin_emails_become_admins() {
    let app = spawn(&[("SERVICE_ADMIN_EMAILS", "boss@example.com")]).await;
    let (_, access, _) = signed_in(&app.base, "Boss@Example.com").await;
    let (status, _) = call(
        Method::GET,
        &format!("{}/api/admin/stats", app.base),
        Some(&access),
        None,
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn service_headers_count_only_from_trusted_networks_and_without_a_token() {
    let headers = |roles: &'static str| {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("x-user-id", "svc-7".parse().unwrap());
        h.insert("x-org-id", "org-1".parse().unwrap());
        h.insert("x-user-roles", roles.parse().unwrap());
        h
    };
    let get = |base: String, roles: &'static str, token: Option<String>| async move {
        let mut request = reqwest::Client::new()
            .get(format!("{base}/api/admin/stats"))
            .headers(headers(roles));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send().await.unwrap().status().as_u16()
    };
    let trusted = spawn(&[("SERVICE_TRUSTED_PROXIES", "127.0.0.1/32")]).await;
    assert_eq!(get(trusted.base.clone(), "admin", None).await, 200);
    assert_eq!(get(trusted.base.clone(), "viewer,member", None).await, 403);
    let (_, user_token, _) = signed_in(&trusted.base, "sam@example.com").await;
    assert_eq!(
        get(trusted.base.clone(), "admin", Some(user_token)).await,
        403,
        "a bearer token wins over the headers"
    );
    let untrusted = spawn(&[("SERVICE_TRUSTED_PROXIES", "10.0.0.0/8")]).await;
    assert_eq!(get(untrusted.base.clone(), "admin", None).await, 401);
}

#[tokio::test]
async fn a_revoked_token_is_refused_by_another_replica_at_once() {
    let nats = LoopbackServer::nats().await;
    let database = crate::support::fresh_postgres_database().await;
    let mut vars = ROOMY.to_vec();
    let url = nats.url();
    vars.push(("SERVICE_NATS_URL", &url));
    // Replicas share the keys that seal and find personal fields.
    vars.extend(SHARED_KEYS);
    let (a, dir_a) = build_app_on(Some(database.clone()), &vars).await;
    let (b, dir_b) = build_app_on(Some(database), &vars).await;
    let (a, b) = (serve_app(a, dir_a).await, serve_app(b, dir_b).await);
    let (_, access, _) = signed_in(&a.base, "zed@example.com").await;
    assert_eq!(me(&b.base, &access).await.0, 200, "B accepts A's token");
    let (status, _) = call(
        Method::POST,
        &format!("{}/api/auth/logout", a.base),
        Some(&access),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = me(&b.base, &access).await;
    assert_eq!((status, message(&body)), (401, "Invalid token"));
    a.stop.cancel();
    b.stop.cancel();
}

#[tokio::test]
async fn bad_sign_in_bodies_get_clear_errors_and_store_nothing() {
    let app = spawn(&[("SERVICE_MAX_REQUEST_BYTES", "4096")]).await;
    let base = &app.base;
    register(base, "uma@example.com", PASSWORD).await;
    let raw = |body: Vec<u8>, content_type: &'static str| {
        let url = format!("{base}/api/auth/login");
        async move {
            let response = reqwest::Client::new()
                .post(url)
                .header("content-type", content_type)
                .body(body)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap();
            (status, body["code"].as_str().unwrap_or_default().to_owned())
        }
    };
    let json = "application/json";
    let cases: Vec<(Vec<u8>, &str, u16, &str)> = vec![
        (
            br#"{"email":"uma@example.com","password":"x","extra":1}"#.to_vec(),
            json,
            422,
            "VALIDATION_ERROR",
        ),
        (
            br#"{"email":"uma@example.com","password":5}"#.to_vec(),
            json,
            422,
            "VALIDATION_ERROR",
        ),
        (
            br#"{"email":"uma@example.com"}"#.to_vec(),
            json,
            422,
            "VALIDATION_ERROR",
        ),
        (
            b"{\"email\":\"\xff\xfe\",\"password\":\"x\"}".to_vec(),
            json,
            400,
            "BAD_REQUEST",
        ),
        (b"{not json".to_vec(), json, 400, "BAD_REQUEST"),
        (
            br#"{"email":"uma@example.com","password":"x"}"#.to_vec(),
            "text/plain",
            415,
            "UNSUPPORTED_MEDIA_TYPE",
        ),
        (vec![b' '; 5_000], json, 413, "PAYLOAD_TOO_LARGE"),
    ];
    for (body, content_type, status, code) in cases {
        assert_eq!(raw(body, content_type).await, (status, code.to_owned()));
    }
    // A huge email or password is an ordinary failure, not a crash.
    let (status, _) = attempt(base, &"e".repeat(3_000), PASSWORD).await;
    assert_eq!(status, 401);
    let (status, _) = attempt(base, "uma@example.com", &"p".repeat(3_000)).await;
    assert_eq!(status, 401);
    // None of that cost the account anything but the two counted failures.
    login(base, "uma@example.com", PASSWORD).await;
}
