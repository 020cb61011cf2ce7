//! Sign-up, verification and invitations hinge on mails and one-time
//! tokens: these tests read the mails the service really sends (through a
//! fake SMTP server, or from the outbox folder) and use their tokens over
//! HTTP as a user would, including reuse, expiry and the wrong addressee.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::Method;
use serde_json::{Value, json};

use crate::serve::{Spawned, spawn_with};
use crate::support::Kind;
use crate::support::accounts::{call, login, register, signed_in};
use crate::support::smtp::{FakeSmtp, ReceivedMail};

/// Where links in mails point (not the test server: tests rewrite it).
const PUBLIC_URL: &str = "https://agon.example.test";
/// The sender configured for the service's mail.
const MAIL_FROM: &str = "Agon Tests <tests@agon.example>";
const PASSWORD: &str = "correct horse battery";
const VERIFY_SUBJECT: &str = "Verify your Agon email address";

/// The whole service, mailing through `fake`.
async fn with_smtp(fake: &FakeSmtp) -> Spawned {
    spawn_with(
        Kind::Sqlite,
        &[
            ("SERVICE_SMTP_URL", &fake.url()),
            ("SERVICE_PUBLIC_URL", PUBLIC_URL),
            ("SERVICE_MAIL_FROM", MAIL_FROM),
        ],
    )
    .await
}

/// POST /api/v1/auth/signup, asserting 201; returns the body.
async fn signup(base: &str, email: &str) -> Value {
    let (status, body) = call(
        Method::POST,
        &format!("{base}/api/v1/auth/signup"),
        None,
        Some(json!({"email": email, "password": PASSWORD, "name": "Sign Up"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    body
}

/// POST /api/v1/auth/signup as if from `ip` (the service trusts 127.0.0.1
/// as a proxy in the tests that use this), so that many attempts stay
/// under the per-address registration limit.
async fn signup_from(base: &str, ip: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}/api/v1/auth/signup"))
        .header("x-forwarded-for", ip)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn post(base: &str, path: &str, token: Option<&str>, body: Value) -> (u16, Value) {
    call(Method::POST, &format!("{base}{path}"), token, Some(body)).await
}

async fn get(base: &str, path: &str, token: Option<&str>) -> (u16, Value) {
    call(Method::GET, &format!("{base}{path}"), token, None).await
}

/// The access token of a fresh sign-in.
async fn access_token(base: &str, email: &str, password: &str) -> String {
    login(base, email, password).await["access_token"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Exactly `count` mails from the fake server.
async fn mails(fake: &FakeSmtp, count: usize) -> Vec<ReceivedMail> {
    let mails = fake.wait_for(count, Duration::from_secs(10)).await;
    assert_eq!(mails.len(), count, "mails received: {mails:#?}");
    mails
}

/// The token after the first `token=` in `text`.
fn token_in(text: &str) -> String {
    let start = text
        .find("token=")
        .unwrap_or_else(|| panic!("no token= in {text}"))
        + "token=".len();
    text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect()
}

/// The caller's profile once `done` holds for it (the profile is a
/// projection), or the last one read after 5 seconds.
async fn profile_when(base: &str, token: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut profile = Value::Null;
    for _ in 0..100 {
        let (status, body) = get(base, "/api/auth/me", Some(token)).await;
        assert_eq!(status, 200, "{body}");
        profile = body;
        if done(&profile) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    profile
}

/// A signed-in owner of a fresh organization: (access token, org id).
async fn owner_of(base: &str, email: &str, org_name: &str) -> (String, String) {
    let (_, token, _) = signed_in(base, email).await;
    let (status, body) = post(
        base,
        "/api/v1/auth/setup-organization",
        Some(&token),
        json!({"org_name": org_name}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    (token, body["org_id"].as_str().unwrap().to_owned())
}

/// Invites `email` as `role`, asserting 201; returns the response body.
async fn invite(base: &str, token: &str, email: &str, role: &str) -> Value {
    let (status, body) = post(
        base,
        "/api/v1/auth/invite",
        Some(token),
        json!({"email": email, "role": role}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    body
}

/// The invitation token in the newest mail of `fake`, which must be the
/// `count`th mail and addressed to `email`.
async fn invite_token(fake: &FakeSmtp, count: usize, email: &str) -> String {
    let mail = mails(fake, count).await.pop().unwrap();
    assert_eq!(mail.to, vec![email.to_owned()]);
    token_in(&mail.body())
}

/// POSTs `token` to /api/v1/auth/verify-email; returns (status, body).
async fn verify(base: &str, token: &str) -> (u16, Value) {
    let body = json!({"token": token});
    post(base, "/api/v1/auth/verify-email", None, body).await
}

/// Accepts `token` by creating the invited account; returns (status, body).
async fn accept_as_new(base: &str, token: &str, name: &str) -> (u16, Value) {
    post(
        base,
        "/api/v1/auth/accept-invite",
        None,
        json!({"token": token, "name": name, "password": PASSWORD}),
    )
    .await
}

fn check_path(token: &str) -> String {
    format!("/api/v1/auth/check-invite?token={token}")
}

#[tokio::test]
async fn signup_mails_the_verification_link_over_smtp() {
    let fake = FakeSmtp::start().await;
    let spawned = with_smtp(&fake).await;

    let body = signup(&spawned.base, "Alice@Example.COM").await;
    assert_eq!(body["success"], true);
    assert_eq!(body["verification_sent"], true);
    assert_eq!(body["user"]["email"], "alice@example.com");
    assert_eq!(body["user"]["email_verified"], false);
    let user_id = body["user"]["user_id"].as_str().unwrap();
    assert!(!user_id.is_empty());

    let mail = mails(&fake, 1).await.remove(0);
    assert_eq!(mail.to, vec!["alice@example.com".to_owned()]);
    assert_eq!(mail.from, "tests@agon.example");
    assert!(
        mail.header("From").unwrap().contains("tests@agon.example"),
        "{mail:?}"
    );
    assert_eq!(mail.header("Subject").as_deref(), Some(VERIFY_SUBJECT));
    let text = mail.body();
    let link = format!("{PUBLIC_URL}/api/v1/auth/verify-email?token={user_id}.");
    assert!(text.contains(&link), "{text}");
    let token = token_in(&text);
    let secret = token.strip_prefix(&format!("{user_id}.")).unwrap();
    assert!(secret.len() >= 32, "a long secret: {token}");
    spawned.stop.cancel();
}

#[tokio::test]
async fn without_smtp_mails_are_written_to_the_outbox_folder() {
    let spawned = spawn_with(Kind::Sqlite, &[("SERVICE_PUBLIC_URL", PUBLIC_URL)]).await;
    let base = &spawned.base;
    let outbox = spawned.app.settings.data_dir.join("outbox");
    let read_outbox = || -> Vec<(PathBuf, String)> {
        let mut files: Vec<(PathBuf, String)> = std::fs::read_dir(&outbox)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "eml"))
            .map(|path| {
                let text = std::fs::read_to_string(&path).unwrap();
                (path, text)
            })
            .collect();
        files.sort();
        files
    };

    let body = signup(base, "olive@example.com").await;
    assert_eq!(body["verification_sent"], true);
    let user_id = body["user"]["user_id"].as_str().unwrap();
    let files = read_outbox();
    assert_eq!(files.len(), 1, "{files:?}");
    let text = &files[0].1;
    assert!(text.contains("To: olive@example.com\r\n"), "{text}");
    assert!(
        text.contains(&format!("Subject: {VERIFY_SUBJECT}\r\n")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "{PUBLIC_URL}/api/v1/auth/verify-email?token={user_id}."
        )),
        "{text}"
    );
    let (status, verified) = post(
        base,
        "/api/auth/verify-email",
        None,
        json!({"token": token_in(text)}),
    )
    .await;
    assert_eq!(status, 200, "the outbox token works: {verified}");

    // The invitation mail goes to the outbox too.
    let token = access_token(base, "olive@example.com", PASSWORD).await;
    // Unprefixed like most paths, and `name` for `org_name` (the upstream
    // client's spelling).
    let (status, org) = post(
        base,
        "/api/auth/setup-organization",
        Some(&token),
        json!({"name": "Olive Grove"}),
    )
    .await;
    assert_eq!(status, 201, "{org}");
    assert!(org.to_string().contains("Olive Grove"), "{org}");
    let sent = invite(base, &token, "pete@example.com", "viewer").await;
    assert_eq!(sent["email_sent"], true);
    let files = read_outbox();
    assert_eq!(files.len(), 2, "{files:?}");
    let invitation = files
        .iter()
        .map(|(_, text)| text)
        .find(|text| text.contains("To: pete@example.com\r\n"))
        .unwrap_or_else(|| panic!("no invitation in {files:?}"));
    assert!(
        invitation.contains("Subject: You are invited to Olive Grove on Agon\r\n"),
        "{invitation}"
    );
    let token = token_in(invitation);
    assert!(
        token.starts_with(&format!(
            "{}.{}.",
            org["org_id"].as_str().unwrap(),
            sent["invite_id"].as_str().unwrap()
        )),
        "{token}"
    );
    let (status, check) = get(base, &check_path(&token), None).await;
    assert_eq!(status, 200);
    assert_eq!(check["valid"], true, "{check}");
    spawned.stop.cancel();
}

#[tokio::test]
async fn a_verification_token_works_once_by_post() {
    let fake = FakeSmtp::start().await;
    let spawned = with_smtp(&fake).await;
    let base = &spawned.base;
    signup(base, "vera@example.com").await;
    let token = token_in(&mails(&fake, 1).await[0].body());
    let access = access_token(base, "vera@example.com", PASSWORD).await;
    let (_, before) = get(base, "/api/auth/me", Some(&access)).await;
    assert_eq!(before["email_verified"], false, "{before}");

    let (status, body) = verify(base, &token).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["success"], true);

    let profile = profile_when(base, &access, |p| p["email_verified"] == true).await;
    assert_eq!(profile["email_verified"], true, "{profile}");

    let (status, again) = verify(base, &token).await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"], "Email is already verified");
    let (status, by_link) = get(
        base,
        &format!("/api/v1/auth/verify-email?token={token}"),
        None,
    )
    .await;
    assert_eq!(status, 409, "the link is used up too: {by_link}");
    spawned.stop.cancel();
}

#[tokio::test]
async fn the_link_in_the_mail_verifies_by_get() {
    let fake = FakeSmtp::start().await;
    let spawned = with_smtp(&fake).await;
    let base = &spawned.base;
    signup(base, "gina@example.com").await;
    let text = mails(&fake, 1).await[0].body();
    let link = text
        .split_whitespace()
        .find(|word| word.starts_with(PUBLIC_URL))
        .unwrap_or_else(|| panic!("no link in {text}"));
    let local = link.replacen(PUBLIC_URL, base, 1);

    let response = reqwest::get(&local).await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["success"], true, "{body}");

    let access = access_token(base, "gina@example.com", PASSWORD).await;
    let profile = profile_when(base, &access, |p| p["email_verified"] == true).await;
    assert_eq!(profile["email_verified"], true, "{profile}");
    let response = reqwest::get(&local).await.unwrap();
    assert_eq!(response.status(), 409, "a second click finds it verified");
    spawned.stop.cancel();
}

#[tokio::test]
async fn bad_verification_tokens_are_refused() {
    let fake = FakeSmtp::start().await;
    let spawned = with_smtp(&fake).await;
    let base = &spawned.base;
    let user_id = signup(base, "bart@example.com").await["user"]["user_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let token = token_in(&mails(&fake, 1).await[0].body());

    let unknown_user = format!("{}.{}", uuid::Uuid::new_v4(), "x".repeat(43));
    let wrong_secret = format!("{user_id}.{}", "x".repeat(43));
    for bad in [
        "",
        "no-dot-at-all",
        unknown_user.as_str(),
        wrong_secret.as_str(),
    ] {
        let (status, body) = verify(base, bad).await;
        assert_eq!(status, 404, "an unknown token, {bad:?}: {body}");
        assert!(body["error"].is_string(), "{body}");
    }
    let (status, _) = get(
        base,
        &format!("/api/v1/auth/verify-email?token={wrong_secret}"),
        None,
    )
    .await;
    assert_eq!(status, 404, "the link refuses a wrong secret too");
    let (status, _) = post(
        base,
        "/api/v1/auth/verify-email",
        None,
        json!({"token": token, "user_id": user_id}),
    )
    .await;
    assert_eq!(status, 422, "unknown fields are refused");

    let (status, body) = verify(base, &token).await;
    assert_eq!(
        status, 200,
        "bad attempts leave the real token working: {body}"
    );
    spawned.stop.cancel();
}

#[tokio::test]
async fn a_verification_token_expires_after_24_hours() {
    let fake = FakeSmtp::start().await;
    let spawned = with_smtp(&fake).await;
    let base = &spawned.base;
    signup(base, "ezra@example.com").await;
    let token = token_in(&mails(&fake, 1).await[0].body());

    spawned.app.clock.advance(Duration::from_secs(25 * 3600));
    let (status, body) = verify(base, &token).await;
    assert_eq!(status, 409, "an expired token: {body}");
    assert_eq!(body["error"], "Verification token expired");

    // A fresh link works.
    let access = access_token(base, "ezra@example.com", PASSWORD).await;
    let (status, body) = post(
        base,
        "/api/v1/auth/resend-verification",
        Some(&access),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let fresh = token_in(&mails(&fake, 2).await[1].body());
    let (status, body) = verify(base, &fresh).await;
    assert_eq!(status, 200, "{body}");
    spawned.stop.cancel();
}

/// How long mail links work is the deployment's, and their mails say it.
#[tokio::test]
async fn mail_links_last_as_long_as_their_variables_say() {
    let fake = FakeSmtp::start().await;
    let spawned = spawn_with(
        Kind::Sqlite,
        &[
            ("SERVICE_SMTP_URL", &fake.url()),
            ("SERVICE_PUBLIC_URL", PUBLIC_URL),
            ("SERVICE_MAIL_FROM", MAIL_FROM),
            ("SERVICE_EMAIL_VERIFICATION_HOURS", "2"),
            ("SERVICE_INVITE_DAYS", "30"),
        ],
    )
    .await;
    let base = &spawned.base;
    signup(base, "ezra@example.com").await;
    let mail = mails(&fake, 1).await[0].body();
    assert!(mail.contains("for 2 hours"), "{mail}");
    spawned.app.clock.advance(Duration::from_secs(3 * 3600));
    let token = token_in(&mail);
    let (status, body) = verify(base, &token).await;
    assert_eq!(status, 409, "{body}");

    // An invitation outlives the default week.
    let (owner, _) = owner_of(base, "olga@example.com", "Olga's").await;
    invite(base, &owner, "ivan@example.com", "member").await;
    let mail = mails(&fake, 2).await.pop().unwrap().body();
    assert!(mail.contains("for 30 days"), "{mail}");
    spawned.app.clock.advance(Duration::from_secs(20 * 86_400));
    let (status, body) = accept_as_new(base, &token_in(&mail), "Ivan").await;
    assert!(status < 300, "{status}: {body}");
    spawned.stop.cancel();
}

#[tokio::test]
async fn resending_the_verification_replaces_the_earlier_token() {
    let fake = FakeSmtp::start().await;
    let spawned = with_smtp(&fake).await;
    let base = &spawned.base;
    signup(base, "remy@example.com").await;
    let first = token_in(&mails(&fake, 1).await[0].body());
    let access = access_token(base, "remy@example.com", PASSWORD).await;

    let (status, _) = post(base, "/api/v1/auth/resend-verification", None, json!({})).await;
    assert_eq!(status, 401, "resending needs a signed-in user");

    let (status, body) = post(
        base,
        "/api/v1/auth/resend-verification",
        Some(&access),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["success"], true);
    assert_eq!(body["sent"], true);
    let resent = mails(&fake, 2).await.remove(1);
    assert_eq!(resent.to, vec!["remy@example.com".to_owned()]);
    assert_eq!(resent.header("Subject").as_deref(), Some(VERIFY_SUBJECT));
    let second = token_in(&resent.body());
    assert_ne!(first, second);

    let (status, body) = verify(base, &first).await;
    assert_eq!(status, 404, "the earlier token stopped working: {body}");
    let (status, body) = verify(base, &second).await;
    assert_eq!(status, 200, "{body}");

    let (status, body) = post(
        base,
        "/api/v1/auth/resend-verification",
        Some(&access),
        json!({}),
    )
    .await;
    assert_eq!(status, 409, "nothing to resend once verified: {body}");
    assert_eq!(fake.received().len(), 2, "no mail for a refused resend");
    spawned.stop.cancel();
}

#[tokio::test]
async fn a_duplicate_email_is_refused_whatever_its_case() {
    let fake = FakeSmtp::start().await;
    let spawned = with_smtp(&fake).await;
    let base = &spawned.base;
    signup(base, "dana@example.com").await;
    for again in ["dana@example.com", "  DANA@Example.com "] {
        let (status, body) = post(
            base,
            "/api/v1/auth/signup",
            None,
            json!({"email": again, "password": "another password", "name": "Dana Two"}),
        )
        .await;
        assert_eq!(status, 409, "{again:?}: {body}");
    }
    assert_eq!(
        mails(&fake, 1).await.len(),
        1,
        "a refused sign-up mails nothing"
    );
    login(base, "dana@example.com", PASSWORD).await;
    spawned.stop.cancel();
}

#[tokio::test]
async fn errors_under_api_v1_take_the_v1_form() {
    let fake = FakeSmtp::start().await;
    let spawned = with_smtp(&fake).await;
    let base = &spawned.base;
    signup(base, "vick@example.com").await;

    let (status, v1) = post(
        base,
        "/api/v1/auth/signup",
        None,
        json!({"email": "vick@example.com", "password": PASSWORD, "name": "Vick"}),
    )
    .await;
    assert_eq!(status, 409);
    assert_eq!(v1["error"], "Email is already registered", "{v1}");
    assert_eq!(v1["status"], 409, "{v1}");
    assert!(
        v1["trace_id"].as_str().is_some_and(|t| !t.is_empty()),
        "{v1}"
    );

    // The same refusal on an unversioned path takes the general form.
    let (status, general) = post(
        base,
        "/api/auth/register",
        None,
        json!({"email": "vick@example.com", "password": PASSWORD, "name": "Vick"}),
    )
    .await;
    assert_eq!(status, 409);
    assert_eq!(general["code"], "CONFLICT", "{general}");
    assert_eq!(general["error"], "Email is already registered");

    let (status, invalid) = post(
        base,
        "/api/v1/auth/verify-email",
        None,
        json!({"token": "nonsense", "extra": 1}),
    )
    .await;
    assert_eq!(status, 422);
    assert!(invalid["error"].is_string(), "{invalid}");
    assert_eq!(invalid["status"], 422, "{invalid}");
    let (status, unknown) = verify(base, "nonsense").await;
    assert_eq!(status, 404);
    assert!(unknown["error"].is_string(), "{unknown}");
    assert_eq!(unknown["status"], 404, "{unknown}");
    spawned.stop.cancel();
}

#[tokio::test]
async fn signup_refuses_bad_passwords_emails_names_and_fields() {
    let fake = FakeSmtp::start().await;
    let spawned = spawn_with(
        Kind::Sqlite,
        &[
            ("SERVICE_SMTP_URL", &fake.url()),
            ("SERVICE_TRUSTED_PROXIES", "127.0.0.1"),
        ],
    )
    .await;
    let base = &spawned.base;
    let body = |email: &str, password: &str| json!({"email": email, "password": password, "name": "Input Check"});
    let refused = [
        ("seven chars", body("p1@example.com", "1234567")),
        ("129 chars", body("p2@example.com", &"p".repeat(129))),
        ("no at sign", body("not-an-email", PASSWORD)),
        ("empty domain", body("x@", PASSWORD)),
        ("domain ends in a dot", body("x@example.", PASSWORD)),
        ("empty local part", body("@example.com", PASSWORD)),
        ("space inside", body("a b@example.com", PASSWORD)),
        (
            "blank name",
            json!({"email": "p3@example.com", "password": PASSWORD, "name": "  "}),
        ),
        (
            "unknown field",
            json!({"email": "p4@example.com", "password": PASSWORD, "name": "N", "role": "admin"}),
        ),
        (
            "missing password",
            json!({"email": "p5@example.com", "name": "N"}),
        ),
    ];
    for (n, (what, request)) in refused.into_iter().enumerate() {
        let (status, answer) = signup_from(base, &format!("10.0.1.{n}"), request).await;
        assert_eq!(status, 422, "{what}: {answer}");
        assert!(answer["error"].is_string(), "{what}: {answer}");
    }

    // The limits themselves are allowed.
    let (status, answer) =
        signup_from(base, "10.0.2.1", body("eight@example.com", "12345678")).await;
    assert_eq!(status, 201, "8 characters: {answer}");
    let (status, answer) =
        signup_from(base, "10.0.2.2", body("long@example.com", &"é".repeat(128))).await;
    assert_eq!(status, 201, "128 characters: {answer}");
    login(base, "long@example.com", &"é".repeat(128)).await;
    assert_eq!(
        mails(&fake, 2).await.len(),
        2,
        "only accepted sign-ups are mailed"
    );
    spawned.stop.cancel();
}

#[tokio::test]
async fn mail_failures_are_reported_but_do_not_undo_the_change() {
    let closed = crate::support::free_port();
    let url = format!("smtp://127.0.0.1:{closed}");
    let spawned = spawn_with(Kind::Sqlite, &[("SERVICE_SMTP_URL", &url)]).await;
    let base = &spawned.base;
    let body = signup(base, "nomail@example.com").await;
    assert_eq!(body["verification_sent"], false, "{body}");
    assert_eq!(body["user"]["email_verified"], false);

    let token = access_token(base, "nomail@example.com", PASSWORD).await;
    let (status, body) = post(
        base,
        "/api/v1/auth/resend-verification",
        Some(&token),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["sent"], false, "{body}");
    let (status, body) = post(
        base,
        "/api/v1/auth/setup-organization",
        Some(&token),
        json!({"org_name": "Offline"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let sent = invite(base, &token, "someone@example.com", "member").await;
    assert_eq!(sent["email_sent"], false, "{sent}");
    spawned.stop.cancel();
}

#[tokio::test]
async fn signup_answers_even_when_the_mail_server_hangs() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("smtp://{}", listener.local_addr().unwrap());
    // Accepts connections and never says a word.
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let spawned = spawn_with(
        Kind::Sqlite,
        &[
            ("SERVICE_SMTP_URL", &url),
            ("SERVICE_SMTP_TIMEOUT_SECONDS", "1"),
        ],
    )
    .await;
    let (status, body) = post(
        &spawned.base,
        "/api/v1/auth/signup",
        None,
        json!({"email": "hang@example.com", "password": PASSWORD, "name": "Hang"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["verification_sent"], false, "{body}");
    silent.abort();
    spawned.stop.cancel();
}

#[tokio::test]
async fn setting_up_an_organization_makes_the_caller_its_owner() {
    let spawned = spawn_with(Kind::Sqlite, &[]).await;
    let base = &spawned.base;
    let (user_id, token, _) = signed_in(base, "owen@example.com").await;
    let path = "/api/v1/auth/setup-organization";

    let (status, _) = post(base, path, None, json!({"org_name": "Nobody's"})).await;
    assert_eq!(status, 401);
    for bad in ["", "   ", &"o".repeat(101)] {
        let (status, body) = post(base, path, Some(&token), json!({"org_name": bad})).await;
        assert_eq!(status, 422, "{bad:?}: {body}");
    }
    let (status, body) = post(
        base,
        path,
        Some(&token),
        json!({"org_name": "Acme Debates"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["user_id"], user_id.as_str());
    assert_eq!(body["org_name"], "Acme Debates");
    assert_eq!(body["role"], "owner");
    let org_id = body["org_id"].as_str().unwrap().to_owned();
    assert!(!org_id.is_empty());

    let (status, body) = post(base, path, Some(&token), json!({"org_name": "Second"})).await;
    assert_eq!(status, 409, "one organization per user: {body}");

    let profile = profile_when(base, &token, |p| p["org_id"] == org_id.as_str()).await;
    assert_eq!(profile["org_id"], org_id.as_str(), "{profile}");
    assert_eq!(profile["org_role"], "owner", "{profile}");
    spawned.stop.cancel();
}

#[tokio::test]
async fn an_invitation_creates_the_account_that_accepts_it() {
    let fake = FakeSmtp::start().await;
    let spawned = with_smtp(&fake).await;
    let base = &spawned.base;
    let (owner, org_id) = owner_of(base, "olga@example.com", "Acme").await;

    let sent = invite(base, &owner, " Bob@Example.com", "member").await;
    let invite_id = sent["invite_id"].as_str().unwrap().to_owned();
    assert_eq!(sent["email"], "bob@example.com");
    assert_eq!(sent["role"], "member");
    assert_eq!(sent["email_sent"], true);
    let expires_at: DateTime<Utc> = sent["expires_at"].as_str().unwrap().parse().unwrap();
    let hours = (expires_at - spawned.app.clock.now()).num_hours();
    assert!((167..=168).contains(&hours), "7 days, was {hours} hours");

    let mail = mails(&fake, 1).await.remove(0);
    assert_eq!(mail.to, vec!["bob@example.com".to_owned()]);
    assert_eq!(mail.from, "tests@agon.example");
    assert_eq!(
        mail.header("Subject").as_deref(),
        Some("You are invited to Acme on Agon")
    );
    let text = mail.body();
    assert!(
        text.contains(&format!("{PUBLIC_URL}/api/v1/auth/check-invite?token=")),
        "{text}"
    );
    let token = token_in(&text);
    assert!(
        token.starts_with(&format!("{org_id}.{invite_id}.")),
        "{token}"
    );

    let (status, check) = get(base, &check_path(&token), None).await;
    assert_eq!(status, 200, "{check}");
    assert_eq!(check["valid"], true, "{check}");
    assert_eq!(check["reason"], Value::Null);
    assert_eq!(check["email"], "bob@example.com");
    assert_eq!(check["org_id"], org_id.as_str());
    assert_eq!(check["org_name"], "Acme");
    assert_eq!(check["role"], "member");
    assert_eq!(check["expires_at"], sent["expires_at"]);

    let (status, joined) = accept_as_new(base, &token, "Bob Builder").await;
    assert_eq!(status, 200, "{joined}");
    assert_eq!(joined["org_id"], org_id.as_str());
    assert_eq!(joined["org_name"], "Acme");
    assert_eq!(joined["role"], "member");
    let bob_id = joined["user_id"].as_str().unwrap().to_owned();

    let signed = login(base, "bob@example.com", PASSWORD).await;
    let bob = signed["access_token"].as_str().unwrap();
    let profile = profile_when(base, bob, |p| p["org_id"] == org_id.as_str()).await;
    assert_eq!(profile["user_id"], bob_id.as_str(), "{profile}");
    assert_eq!(profile["name"], "Bob Builder");
    assert_eq!(profile["org_id"], org_id.as_str(), "{profile}");
    assert_eq!(profile["org_role"], "member", "{profile}");
    assert_eq!(
        profile["email_verified"], true,
        "the invitation mail proved the address"
    );

    let (status, check) = get(base, &check_path(&token), None).await;
    assert_eq!(status, 200);
    assert_eq!(check["valid"], false, "{check}");
    assert!(
        check["reason"]
            .as_str()
            .is_some_and(|r| r.to_lowercase().contains("used")),
        "{check}"
    );
    let (status, again) = accept_as_new(base, &token, "Bob Again").await;
    assert_eq!(status, 409, "an invitation works once: {again}");
    spawned.stop.cancel();
}

#[tokio::test]
async fn invitations_grant_only_admin_member_or_viewer() {
    let fake = FakeSmtp::start().await;
    let spawned = with_smtp(&fake).await;
    let base = &spawned.base;
    let (owner, _) = owner_of(base, "rita@example.com", "Roles Inc").await;

    for role in ["owner", "superuser", ""] {
        let (status, body) = post(
            base,
            "/api/v1/auth/invite",
            Some(&owner),
            json!({"email": "x@example.com", "role": role}),
        )
        .await;
        assert_eq!(status, 422, "{role:?}: {body}");
    }
    let (status, body) = post(
        base,
        "/api/v1/auth/invite",
        Some(&owner),
        json!({"email": "not-an-email", "role": "member"}),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        fake.received().is_empty(),
        "refused invitations mail nothing"
    );

    for (n, role) in ["admin", "member", "viewer"].into_iter().enumerate() {
        let email = format!("{role}@example.com");
        let sent = invite(base, &owner, &email, role).await;
        assert_eq!(sent["role"], role);
        let token = invite_token(&fake, n + 1, &email).await;
        let (_, check) = get(base, &check_path(&token), None).await;
        assert_eq!(check["role"], role, "{check}");
    }

    let (_, lone, _) = signed_in(base, "lone@example.com").await;
    let (status, body) = post(
        base,
        "/api/v1/auth/invite",
        Some(&lone),
        json!({"email": "y@example.com", "role": "member"}),
    )
    .await;
    assert_eq!(status, 409, "no organization to invite into: {body}");
    let (status, _) = post(
        base,
        "/api/v1/auth/invite",
        None,
        json!({"email": "y@example.com", "role": "member"}),
    )
    .await;
    assert_eq!(status, 401);
    spawned.stop.cancel();
}

#[tokio::test]
async fn a_member_may_not_invite_but_an_admin_may() {
    let fake = FakeSmtp::start().await;
    let spawned = with_smtp(&fake).await;
    let base = &spawned.base;
    let (owner, org_id) = owner_of(base, "otto@example.com", "Hierarchy").await;

    invite(base, &owner, "mia@example.com", "member").await;
    let token = invite_token(&fake, 1, "mia@example.com").await;
    let (status, body) = accept_as_new(base, &token, "Mia").await;
    assert_eq!(status, 200, "{body}");
    invite(base, &owner, "adam@example.com", "admin").await;
    let token = invite_token(&fake, 2, "adam@example.com").await;
    let (status, body) = accept_as_new(base, &token, "Adam").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["role"], "admin");

    let member = access_token(base, "mia@example.com", PASSWORD).await;
    let (status, body) = post(
        base,
        "/api/v1/auth/invite",
        Some(&member),
        json!({"email": "friend@example.com", "role": "viewer"}),
    )
    .await;
    assert_eq!(status, 403, "a plain member may not invite: {body}");
    assert_eq!(fake.received().len(), 2, "nothing mailed for it");

    let admin = access_token(base, "adam@example.com", PASSWORD).await;
    let sent = invite(base, &admin, "friend@example.com", "viewer").await;
    assert_eq!(sent["email_sent"], true);
    let token = invite_token(&fake, 3, "friend@example.com").await;
    let (_, check) = get(base, &check_path(&token), None).await;
    assert_eq!(check["org_id"], org_id.as_str(), "{check}");
    assert_eq!(check["role"], "viewer");
    spawned.stop.cancel();
}

#[tokio::test]
async fn an_invitation_is_refused_to_a_signed_in_user_with_another_email() {
    let fake = FakeSmtp::start().await;
    let spawned = with_smtp(&fake).await;
    let base = &spawned.base;
    let (owner, org_id) = owner_of(base, "oscar@example.com", "Addressed").await;
    invite(base, &owner, "carol@example.com", "member").await;
    let token = invite_token(&fake, 1, "carol@example.com").await;

    let (_, dave, _) = signed_in(base, "dave@example.com").await;
    let (status, body) = post(
        base,
        "/api/v1/auth/accept-invite",
        Some(&dave),
        json!({"token": token}),
    )
    .await;
    assert_eq!(status, 403, "addressed to someone else: {body}");
    let (status, body) = post(
        base,
        "/api/v1/auth/accept-invite",
        Some(&dave),
        json!({"token": token, "name": "Dave", "password": PASSWORD}),
    )
    .await;
    assert_eq!(status, 403, "a bearer wins over name and password: {body}");
    let profile = get(base, "/api/auth/me", Some(&dave)).await.1;
    assert_eq!(profile["org_id"], Value::Null, "{profile}");

    let (_, check) = get(base, &check_path(&token), None).await;
    assert_eq!(
        check["valid"], true,
        "still open for its addressee: {check}"
    );
    let (status, body) = accept_as_new(base, &token, "Carol").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["org_id"], org_id.as_str());
    spawned.stop.cancel();
}

#[tokio::test]
async fn an_invitation_to_an_existing_account_needs_its_sign_in() {
    let fake = FakeSmtp::start().await;
    let spawned = with_smtp(&fake).await;
    let base = &spawned.base;
    let (owner, org_id) = owner_of(base, "opal@example.com", "Existing").await;
    let erin_id = register(base, "erin@example.com", PASSWORD).await;
    invite(base, &owner, "ERIN@example.com", "viewer").await;
    let token = invite_token(&fake, 1, "erin@example.com").await;

    let (status, body) = accept_as_new(base, &token, "Erin Impostor").await;
    assert_eq!(status, 409, "{body}");
    login(base, "erin@example.com", PASSWORD).await;

    let (status, body) = post(
        base,
        "/api/v1/auth/accept-invite",
        None,
        json!({"token": token}),
    )
    .await;
    assert_eq!(
        status, 422,
        "neither signed in nor creating an account: {body}"
    );

    let erin = access_token(base, "erin@example.com", PASSWORD).await;
    let (status, body) = post(
        base,
        "/api/v1/auth/accept-invite",
        Some(&erin),
        json!({"token": token}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["user_id"], erin_id.as_str());
    assert_eq!(body["org_id"], org_id.as_str());
    assert_eq!(body["role"], "viewer");
    let profile = profile_when(base, &erin, |p| p["org_id"] == org_id.as_str()).await;
    assert_eq!(profile["org_role"], "viewer", "{profile}");
    spawned.stop.cancel();
}

#[tokio::test]
async fn an_invitation_expires_after_7_days() {
    let fake = FakeSmtp::start().await;
    let spawned = with_smtp(&fake).await;
    let base = &spawned.base;
    let (owner, _) = owner_of(base, "omar@example.com", "Late").await;
    invite(base, &owner, "tardy@example.com", "member").await;
    let token = invite_token(&fake, 1, "tardy@example.com").await;

    spawned
        .app
        .clock
        .advance(Duration::from_secs(8 * 24 * 3600));
    let (status, check) = get(base, &check_path(&token), None).await;
    assert_eq!(status, 200);
    assert_eq!(check["valid"], false, "{check}");
    assert!(
        check["reason"]
            .as_str()
            .is_some_and(|r| r.to_lowercase().contains("expired")),
        "{check}"
    );
    let (status, body) = accept_as_new(base, &token, "Tardy").await;
    assert_eq!(status, 409, "{body}");
    let (status, _) = post(
        base,
        "/api/auth/login",
        None,
        json!({"email": "tardy@example.com", "password": PASSWORD}),
    )
    .await;
    assert_eq!(status, 401, "no account was created");
    spawned.stop.cancel();
}

#[tokio::test]
async fn garbage_invitation_tokens_are_not_valid() {
    let fake = FakeSmtp::start().await;
    let spawned = with_smtp(&fake).await;
    let base = &spawned.base;
    let (owner, org_id) = owner_of(base, "gus@example.com", "Guarded").await;
    let sent = invite(base, &owner, "hal@example.com", "member").await;
    let real = invite_token(&fake, 1, "hal@example.com").await;
    let wrong_secret = format!(
        "{org_id}.{}.{}",
        sent["invite_id"].as_str().unwrap(),
        "x".repeat(43)
    );

    for garbage in ["nonsense", "a.b.c", "..", wrong_secret.as_str()] {
        let (status, check) = get(base, &check_path(garbage), None).await;
        assert_eq!(status, 200, "{garbage:?}: {check}");
        assert_eq!(check["valid"], false, "{garbage:?}: {check}");
        assert!(check["reason"].is_string(), "{garbage:?}: {check}");
        assert_eq!(check["email"], Value::Null, "{garbage:?}: {check}");
        let (status, body) = accept_as_new(base, garbage, "Hal").await;
        assert_eq!(status, 404, "{garbage:?}: {body}");
        assert!(body["error"].is_string(), "{garbage:?}: {body}");
    }
    let (_, check) = get(base, &check_path(&real), None).await;
    assert_eq!(check["valid"], true, "{check}");
    spawned.stop.cancel();
}
