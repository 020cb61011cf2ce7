//! Erasure by crypto-shredding on the hash-chained log (ARCHITECTURE.md
//! "Erasure"): personal fields of new registrations are stored sealed, an
//! erased user's fields read as `[erased]`, sign-in is refused, the address
//! can be registered again, and the log still verifies with its seals.
//! Accounts registered before sealing (plaintext v1 events) still load.

use agon::crypto::password::PasswordHasher;
use agon::store::db::PoolRef;
use cqrs_es::persist::SerializedEvent;
use reqwest::Method;
use serde_json::{Value, json};

use crate::auth::ROOMY;
use crate::serve::{Spawned, spawn_with};
use crate::support::accounts::{call, login, me};
use crate::support::{Kind, TEST_TOKEN, on_both_backends};

const PASSWORD: &str = "correct horse battery";
const ERASED: &str = "[erased]";

on_both_backends! {
    a_user_erases_their_account => a_user_erases_their_account;
    an_admin_erases_a_user => an_admin_erases_a_user;
    an_account_from_before_sealing_loads_and_erases => an_account_from_before_sealing_loads_and_erases;
}

async fn spawn(kind: Kind) -> Spawned {
    spawn_with(kind, &ROOMY).await
}

/// Registers `email` under `name`; returns the user id.
async fn register(base: &str, email: &str, name: &str) -> String {
    let (status, body) = call(
        Method::POST,
        &format!("{base}/api/auth/register"),
        None,
        Some(json!({"email": email, "password": PASSWORD, "name": name})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    body["user"]["user_id"].as_str().unwrap().to_owned()
}

/// The admin directory's entry of `user_id` (searching `search`), if listed.
async fn listed(base: &str, search: &str, user_id: &str) -> Option<Value> {
    let url = reqwest::Url::parse_with_params(
        &format!("{base}/api/admin/users"),
        &[("search", search), ("limit", "100")],
    )
    .unwrap();
    let (status, body) = call(Method::GET, url.as_str(), Some(TEST_TOKEN), None).await;
    assert_eq!(status, 200, "{body}");
    body["users"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["user_id"] == user_id)
        .cloned()
}

/// Every stored event's stream id and payload, as the events table holds them.
async fn raw_events(app: &Spawned) -> Vec<(String, String)> {
    let sql = "SELECT aggregate_id, payload FROM events";
    match app.app.log.db().reader() {
        PoolRef::Sqlite(pool) => sqlx::query_as(sql).fetch_all(pool).await.unwrap(),
        PoolRef::Postgres(pool) => sqlx::query_as(sql).fetch_all(pool).await.unwrap(),
    }
}

async fn subject_keys_of(app: &Spawned, user_id: &str) -> i64 {
    let sql = "SELECT COUNT(*) FROM subject_keys WHERE subject = $1";
    match app.app.log.db().reader() {
        PoolRef::Sqlite(pool) => sqlx::query_scalar(sql).bind(user_id).fetch_one(pool).await,
        PoolRef::Postgres(pool) => sqlx::query_scalar(sql).bind(user_id).fetch_one(pool).await,
    }
    .unwrap()
}

/// Seals what is unsealed, then runs the check `agon verify` runs; again
/// while work detached from a request (a refused sign-in is recorded after
/// its answer) appended after the seal.
async fn assert_log_verifies(app: &Spawned) {
    let log = &app.app.log;
    let mut report = None;
    for _ in 0..50 {
        log.seal_now(&app.app.seal_key).await.unwrap();
        let checked = log.verify(&app.app.seal_key.public_hex()).await.unwrap();
        assert!(checked.problem.is_none(), "{:?}", checked.problem);
        let done = checked.unsealed_events == 0;
        report = Some(checked);
        if done {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let report = report.unwrap();
    assert!(
        report.seals_checked > 0 && report.unsealed_events == 0,
        "{report:?}"
    );
}

async fn sign_in_status(base: &str, email: &str) -> u16 {
    call(
        Method::POST,
        &format!("{base}/api/auth/login"),
        None,
        Some(json!({"email": email, "password": PASSWORD})),
    )
    .await
    .0
}

async fn a_user_erases_their_account(kind: Kind) {
    let app = spawn(kind).await;
    let base = &app.base;
    let (email, name) = ("erin@example.com", "Erin Example");
    let user_id = register(base, email, name).await;
    let token = login(base, email, PASSWORD).await["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, profile) = me(base, &token).await;
    assert_eq!(status, 200);
    assert_eq!(
        (profile["email"].as_str(), profile["name"].as_str()),
        (Some(email), Some(name))
    );

    // Neither the address nor the name is stored in any event, nor in the
    // id of any stream (the email claim's is the blind index).
    let events = raw_events(&app).await;
    assert!(events.iter().any(|(id, _)| *id == user_id));
    for (id, payload) in &events {
        for secret in [email, name] {
            assert!(
                !payload.contains(secret) && !id.contains(secret),
                "{id}: {payload}"
            );
        }
    }
    // Admins see it in the clear, and find it by part of its email or name.
    for search in ["ERIN@", "rin exa"] {
        let entry = listed(base, search, &user_id).await.unwrap();
        assert_eq!(
            (entry["email"].as_str(), entry["name"].as_str()),
            (Some(email), Some(name))
        );
    }

    let url = format!("{base}/api/v1/privacy/account");
    let erase = |password: &str, confirm: bool| json!({"password": password, "confirm": confirm});
    let (status, body) = call(
        Method::DELETE,
        &url,
        Some(&token),
        Some(erase(PASSWORD, false)),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    let (status, body) = call(
        Method::DELETE,
        &url,
        Some(&token),
        Some(erase("wrong password", true)),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = call(
        Method::DELETE,
        &url,
        Some(&token),
        Some(erase(PASSWORD, true)),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["user_id"], user_id.as_str());
    assert_eq!(body["sessions_revoked"], 1);

    // The session is gone, sign-in finds no account, the key is destroyed.
    assert_eq!(me(base, &token).await.0, 401);
    assert_eq!(sign_in_status(base, email).await, 401);
    assert_eq!(subject_keys_of(&app, &user_id).await, 0);
    let entry = listed(base, ERASED, &user_id).await.unwrap();
    assert_eq!(
        (entry["email"].as_str(), entry["name"].as_str()),
        (Some(ERASED), Some(ERASED))
    );
    assert!(listed(base, email, &user_id).await.is_none());

    // The address is free again, for a new account.
    let again = register(base, email, "Erin Again").await;
    assert_ne!(again, user_id);
    let signed = login(base, email, PASSWORD).await;
    let (status, profile) = me(base, signed["access_token"].as_str().unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(profile["name"], "Erin Again");
    assert_log_verifies(&app).await;
}

async fn an_admin_erases_a_user(kind: Kind) {
    let app = spawn(kind).await;
    let base = &app.base;
    let email = "frank@example.com";
    let user_id = register(base, email, "Frank Example").await;
    let signed = login(base, email, PASSWORD).await;
    let refresh = signed["refresh_token"].as_str().unwrap().to_owned();
    let access = signed["access_token"].as_str().unwrap();
    let (status, key) = call(
        Method::POST,
        &format!("{base}/api/auth/api-keys"),
        Some(access),
        Some(json!({"name": "ci"})),
    )
    .await;
    assert_eq!(status, 201, "{key}");
    let key = key["api_key"].as_str().unwrap().to_owned();
    // The key's caller reads the account with its fields opened.
    assert_eq!(me(base, &key).await.0, 200);
    let erase = |id: &str| format!("{base}/admin/users/{id}/erase");
    let (status, body) = call(Method::POST, &erase(&user_id), Some(TEST_TOKEN), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["sessions_revoked"], 1);
    assert_eq!(me(base, &key).await.0, 401);
    let (status, _) = call(
        Method::POST,
        &format!("{base}/api/auth/refresh"),
        None,
        Some(json!({"refresh_token": refresh})),
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(sign_in_status(base, email).await, 401);
    let entry = listed(base, ERASED, &user_id).await.unwrap();
    assert_eq!(entry["email"], ERASED);
    // Again: nothing more to do, still fine; an unknown user is not found.
    let (status, body) = call(Method::POST, &erase(&user_id), Some(TEST_TOKEN), None).await;
    assert_eq!(
        (status, &body["sessions_revoked"]),
        (200, &json!(0)),
        "{body}"
    );
    let unknown = "00000000-0000-4000-8000-000000000000";
    assert_eq!(
        call(Method::POST, &erase(unknown), Some(TEST_TOKEN), None)
            .await
            .0,
        404
    );
    // Only admins erase others.
    let (_, other, _) = crate::support::accounts::signed_in(base, "gina@example.com").await;
    let other_id = register(base, "hal@example.com", "Hal").await;
    assert_eq!(
        call(Method::POST, &erase(&other_id), Some(&other), None)
            .await
            .0,
        403
    );
    register(base, email, "Frank Again").await;
    assert_log_verifies(&app).await;
}

/// One event as the code before sealing stored it.
fn v1_event(
    stream: &str,
    aggregate_type: &str,
    event_type: &str,
    payload: Value,
) -> SerializedEvent {
    SerializedEvent {
        aggregate_id: stream.to_owned(),
        sequence: 1,
        aggregate_type: aggregate_type.to_owned(),
        event_type: event_type.to_owned(),
        event_version: "1".to_owned(),
        payload,
        metadata: json!({"actor": "test"}),
    }
}

async fn an_account_from_before_sealing_loads_and_erases(kind: Kind) {
    let app = spawn(kind).await;
    let base = &app.base;
    let (user_id, email) = ("0b3f5c1e-8d2a-4c7e-9f10-2a6b7c8d9e0f", "old@example.com");
    let hash = PasswordHasher::new()
        .hash(PASSWORD.to_owned())
        .await
        .unwrap();
    let log = &app.app.log;
    log.append(&[v1_event(
        email,
        "email",
        "EmailClaimed",
        json!({"EmailClaimed": {"user_id": user_id}}),
    )])
    .await
    .unwrap();
    let registered = json!({"Registered": {"user_id": user_id, "email": email, "name": "Old Timer",
        "password_hash": hash, "role": "user", "email_verified": true,
        "at": "2026-01-15T08:00:00Z"}});
    log.append(&[v1_event(user_id, "account", "Registered", registered)])
        .await
        .unwrap();

    let token = login(base, email, PASSWORD).await["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, profile) = me(base, &token).await;
    assert_eq!(status, 200, "{profile}");
    assert_eq!(
        (profile["email"].as_str(), profile["name"].as_str()),
        (Some(email), Some("Old Timer"))
    );
    // Plaintext accounts are still found by any part of the address.
    assert!(listed(base, "old@", user_id).await.is_some());
    // The address is taken while the account lives.
    let (status, _) = call(
        Method::POST,
        &format!("{base}/api/auth/register"),
        None,
        Some(json!({"email": email, "password": PASSWORD, "name": "Someone"})),
    )
    .await;
    assert_eq!(status, 409);

    let url = format!("{base}/admin/users/{user_id}/erase");
    let (status, body) = call(Method::POST, &url, Some(TEST_TOKEN), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(sign_in_status(base, email).await, 401);
    let entry = listed(base, ERASED, user_id).await.unwrap();
    assert_eq!(entry["name"], ERASED);
    let again = register(base, email, "New Timer").await;
    assert_ne!(again, user_id);
    assert_eq!(sign_in_status(base, email).await, 200);
    assert_log_verifies(&app).await;
}
