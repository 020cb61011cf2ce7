//! Outgoing webhooks end to end: a receiver on 127.0.0.1 (a real HTTP
//! server) checks every delivery's signature with its own Standard Webhooks
//! verification (HMAC-SHA256 written here, not the service's), answers 500s
//! and a hang before 200 so that retries show, and the API's deliveries,
//! redelivery, test message, SSRF refusals, disabling after failures and
//! v2's OAuth rule are checked on both back ends. `crash` kills the real
//! binary during a delivery.

mod crash;
mod oauth;
mod url_schema;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::time::Instant;

use crate::serve::spawn_with;
use crate::support::accounts::{call, signed_in};
use crate::support::{Kind, on_both_backends};

on_both_backends! {
    deliveries_are_signed_retried_ordered_and_listed => deliveries_are_signed_retried_ordered_and_listed;
    a_failing_subscription_is_disabled_then_enabled => a_failing_subscription_is_disabled_then_enabled;
}

/// Settings that make retries quick and let the loopback receiver in.
pub const QUICK: [(&str, &str); 5] = [
    ("SERVICE_WEBHOOK_ALLOWED_NETWORKS", "127.0.0.0/8"),
    ("SERVICE_WEBHOOK_RETRY_BASE_MS", "100"),
    ("SERVICE_WEBHOOK_RETRY_MAX_MS", "400"),
    ("SERVICE_WEBHOOK_TIMEOUT_SECONDS", "1"),
    ("SERVICE_WEBHOOK_POLL_MS", "50"),
];

/// What the receiver answers a request with.
#[derive(Debug, Clone, Copy)]
pub enum Reply {
    Status(u16),
    /// Answers 200 after this long (within the service's timeout).
    Slow(Duration),
    /// Answers 200 only after this long (past the service's timeout).
    Hang(Duration),
}

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub id: String,
    pub timestamp: String,
    pub signature: String,
    pub body: String,
    pub reply: u16,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

#[derive(Default)]
struct Script {
    seen: Vec<Received>,
    plan: VecDeque<Reply>,
    otherwise: Option<Reply>,
}

/// A webhook receiver on a loopback port.
#[derive(Clone, Default)]
pub struct Receiver(Arc<Mutex<Script>>);

async fn hook(State(receiver): State<Receiver>, headers: HeaderMap, body: String) -> StatusCode {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let reply = {
        let mut script = receiver.0.lock().unwrap();
        let reply = script
            .plan
            .pop_front()
            .or(script.otherwise)
            .unwrap_or(Reply::Status(200));
        let status = match reply {
            Reply::Status(code) => code,
            Reply::Slow(_) => 200,
            Reply::Hang(_) => 0,
        };
        script.seen.push(Received {
            id: header("webhook-id"),
            timestamp: header("webhook-timestamp"),
            signature: header("webhook-signature"),
            body,
            reply: status,
        });
        reply
    };
    match reply {
        Reply::Status(code) => StatusCode::from_u16(code).unwrap(),
        Reply::Slow(delay) | Reply::Hang(delay) => {
            tokio::time::sleep(delay).await;
            StatusCode::OK
        }
    }
}

impl Receiver {
    /// Starts it; returns it and its URL.
    pub async fn start(plan: &[Reply]) -> (Receiver, String) {
        let receiver = Receiver::default();
        receiver.0.lock().unwrap().plan = plan.iter().copied().collect();
        let router = axum::Router::new()
            .route("/hook", axum::routing::post(hook))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        (receiver, url)
    }

    pub fn seen(&self) -> Vec<Received> {
        self.0.lock().unwrap().seen.clone()
    }

    pub fn answer_from_now(&self, reply: Reply) {
        self.0.lock().unwrap().otherwise = Some(reply);
    }

    /// Waits until `done` holds for what it received (at most a minute).
    pub async fn wait(&self, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let seen = self.seen();
            if done(&seen) {
                return seen;
            }
            assert!(Instant::now() < deadline, "{what}: got {seen:#?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Standard Webhooks verification, written from the convention: the
/// secret's base64 after `whsec_` keys an HMAC-SHA256 of
/// `{id}.{timestamp}.{body}`; one of the space-separated `v1,` values must
/// be its base64; the timestamp within five minutes.
pub fn verifies(secret: &str, received: &Received) -> bool {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{}.{}.{}", received.id, received.timestamp, received.body).as_bytes());
    let expected = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
    let sent: i64 = received.timestamp.parse().unwrap();
    let fresh = (chrono::Utc::now().timestamp() - sent).abs() < 300;
    fresh && received.signature.split(' ').any(|s| s == expected)
}

/// A caller of the API with a session token.
pub struct User {
    pub base: String,
    pub token: String,
}

impl User {
    pub async fn new(base: &str, email: &str) -> User {
        let (_, token, _) = signed_in(base, email).await;
        User {
            base: base.to_owned(),
            token,
        }
    }

    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        call(method, &url, Some(&self.token), body).await
    }

    /// Subscribes `url` to every event; returns (id, secret).
    pub async fn subscribe(&self, url: &str) -> (String, String) {
        let events = ["debate.completed", "debate.verdict", "debate.failed"];
        let (status, body) = self
            .call(
                Method::POST,
                "/api/webhooks",
                Some(json!({"url": url, "events": events})),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        (
            body["webhook_id"].as_str().unwrap().to_owned(),
            body["secret"].as_str().unwrap().to_owned(),
        )
    }

    /// A one-round demo debate; returns its id.
    pub async fn debate(&self, topic: &str) -> String {
        let body = json!({"topic": topic, "agents": ["demo-a", "demo-b"], "rounds": 1});
        let (status, created) = self.call(Method::POST, "/api/debates", Some(body)).await;
        assert_eq!(status, 201, "{created}");
        created["id"].as_str().unwrap().to_owned()
    }

    pub async fn deliveries(&self, id: &str) -> Value {
        let (status, body) = self
            .call(Method::GET, &format!("/api/webhooks/{id}/deliveries"), None)
            .await;
        assert_eq!(status, 200, "{body}");
        body
    }
}

fn vars(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut vars = crate::auth::ROOMY.to_vec();
    vars.push(("SERVICE_RATE_LIMIT_DEBATE_CREATE", "1000000"));
    vars.extend_from_slice(&QUICK);
    vars.extend_from_slice(extra);
    vars
}

fn of_type<'a>(seen: &'a [Received], kind: &str) -> Vec<&'a Received> {
    seen.iter().filter(|r| r.json()["type"] == kind).collect()
}

async fn deliveries_are_signed_retried_ordered_and_listed(kind: Kind) {
    let app = spawn_with(kind, &vars(&[])).await;
    let plan = [
        Reply::Status(500),
        Reply::Status(503),
        Reply::Hang(Duration::from_secs(3)),
    ];
    let (receiver, url) = Receiver::start(&plan).await;
    let (other_receiver, other_url) = Receiver::start(&[]).await;
    let alice = User::new(&app.base, "alice@example.com").await;
    let bob = User::new(&app.base, "bob@example.com").await;
    let (id, secret) = alice.subscribe(&url).await;
    let (bob_id, _) = bob.subscribe(&other_url).await;

    // The secret is shown once: never by reads or lists.
    let (_, read) = alice
        .call(Method::GET, &format!("/api/webhooks/{id}"), None)
        .await;
    assert_eq!(read["url"], url.as_str());
    assert!(read.get("secret").is_none(), "{read}");
    let (_, listed) = alice.call(Method::GET, "/api/webhooks", None).await;
    assert_eq!(listed["total"], 1);
    assert!(!listed.to_string().contains(&secret));

    let debate = alice.debate("Should we keep an event log?").await;
    let seen = receiver
        .wait("verdict and completion delivered", |seen| {
            seen.iter()
                .any(|r| r.reply == 200 && r.json()["type"] == "debate.completed")
        })
        .await;
    for received in &seen {
        assert!(verifies(&secret, received), "bad signature: {received:?}");
    }
    // 500, 503 and a hang were retried, with one id, then the next event.
    let verdicts = of_type(&seen, "debate.verdict");
    assert_eq!(
        verdicts.iter().map(|r| r.reply).collect::<Vec<_>>(),
        [500, 503, 0, 200]
    );
    assert!(verdicts.iter().all(|r| r.id == verdicts[0].id));
    let completed = of_type(&seen, "debate.completed");
    assert_eq!(completed.len(), 1);
    assert_ne!(completed[0].id, verdicts[0].id);
    let first_completion = seen
        .iter()
        .position(|r| r.json()["type"] == "debate.completed");
    assert!(first_completion > seen.iter().position(|r| r.reply == 200));
    let body = completed[0].json();
    assert_eq!(body["version"], 1);
    assert_eq!(body["data"]["debate_id"], debate.as_str());
    assert_eq!(body["data"]["status"], "completed");
    assert_eq!(body["data"]["verdict"]["mode"], "majority");

    // The deliveries list shows attempts and codes.
    let list = alice.deliveries(&id).await;
    assert_eq!(list["total"], 2, "{list}");
    let by_type = |kind: &str| {
        list["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["event_type"] == kind)
            .unwrap()
            .clone()
    };
    let verdict = by_type("debate.verdict");
    assert_eq!(verdict["status"], "delivered");
    assert_eq!(verdict["attempts"], 4);
    assert_eq!(verdict["response_code"], 200);
    assert_eq!(verdict["message_id"], verdicts[0].id.as_str());

    // Another user's subscription got nothing of alice's debate.
    assert_eq!(bob.deliveries(&bob_id).await["total"], 0);
    assert!(other_receiver.seen().is_empty());
    let (status, _) = bob
        .call(Method::GET, &format!("/api/webhooks/{id}/deliveries"), None)
        .await;
    assert_eq!(status, 404);

    // Redelivery sends the same message id again.
    let done = by_type("debate.completed");
    let path = format!(
        "/api/webhooks/{id}/deliveries/{}/redeliver",
        done["id"].as_str().unwrap()
    );
    let (status, body) = alice.call(Method::POST, &path, None).await;
    assert_eq!(status, 202, "{body}");
    let again = receiver
        .wait("redelivered", |seen| {
            seen.iter().filter(|r| r.id == completed[0].id).count() == 2
        })
        .await;
    assert!(again.iter().all(|r| verifies(&secret, r)));

    // A test message is sent at once, signed, and listed.
    let (status, ping) = alice
        .call(Method::POST, &format!("/api/webhooks/{id}/test"), None)
        .await;
    assert_eq!(status, 200, "{ping}");
    assert_eq!(ping["status"], "delivered");
    assert_eq!(ping["response_code"], 200);
    let pinged = receiver.seen();
    let last = pinged.last().unwrap();
    assert_eq!(last.json()["type"], "webhook.ping");
    assert!(verifies(&secret, last));

    // A rotated secret signs from then on; the old one no longer verifies.
    let (status, rotated) = alice
        .call(
            Method::POST,
            &format!("/api/webhooks/{id}/rotate-secret"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{rotated}");
    let new_secret = rotated["secret"].as_str().unwrap();
    assert_ne!(new_secret, secret);
    alice
        .call(Method::POST, &format!("/api/webhooks/{id}/test"), None)
        .await;
    let last = receiver.seen().last().unwrap().clone();
    assert_eq!(last.json()["type"], "webhook.ping");
    assert!(verifies(new_secret, &last), "{last:?} {rotated}");
    assert!(!verifies(&secret, &last));
}

async fn a_failing_subscription_is_disabled_then_enabled(kind: Kind) {
    let app = spawn_with(kind, &vars(&[("SERVICE_WEBHOOK_FAILURE_THRESHOLD", "3")])).await;
    let (receiver, url) = Receiver::start(&[]).await;
    receiver.answer_from_now(Reply::Status(500));
    let alice = User::new(&app.base, "carol@example.com").await;
    let (id, secret) = alice.subscribe(&url).await;
    alice.debate("Is failure final?").await;
    let path = format!("/api/webhooks/{id}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, read) = alice.call(Method::GET, &path, None).await;
        if read["active"] == false {
            assert_eq!(read["disabled_reason"], "failing");
            break;
        }
        let tried = receiver.seen().len();
        let list = alice.deliveries(&id).await;
        assert!(
            Instant::now() < deadline,
            "never disabled: {read} {tried} {list}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let failed = receiver.seen().len();
    assert_eq!(failed, 3, "the threshold's attempts, then none");
    let (_, active) = alice
        .call(Method::GET, "/api/webhooks?active_only=true", None)
        .await;
    assert_eq!(active["total"], 0);

    // Its owner enables it; what waited is delivered, in order.
    receiver.answer_from_now(Reply::Status(200));
    let (status, body) = alice
        .call(Method::PATCH, &path, Some(json!({"active": true})))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["active"], true);
    let seen = receiver
        .wait("delivered after enabling", |seen| {
            seen.iter().filter(|r| r.reply == 200).count() == 2
        })
        .await;
    let delivered: Vec<_> = seen
        .iter()
        .filter(|r| r.reply == 200)
        .map(|r| r.json()["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(delivered, ["debate.verdict", "debate.completed"]);
    assert!(seen.iter().all(|r| verifies(&secret, r)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn private_targets_and_bad_subscriptions_are_refused() {
    // No allowed networks: loopback is refused, by address and by name.
    let mut plain = crate::auth::ROOMY.to_vec();
    plain.push(("SERVICE_WEBHOOK_POLL_MS", "50"));
    let app = spawn_with(Kind::Sqlite, &plain).await;
    let (receiver, url) = Receiver::start(&[]).await;
    let port = url.rsplit(':').next().unwrap().trim_end_matches("/hook");
    let alice = User::new(&app.base, "dave@example.com").await;
    let events = ["debate.completed"];
    for target in [
        format!("http://127.0.0.1:{port}/hook"),
        format!("http://localhost:{port}/hook"),
        format!("http://[::1]:{port}/hook"),
        format!("http://[::ffff:127.0.0.1]:{port}/hook"),
        format!("http://0.0.0.0:{port}/hook"),
        "http://169.254.169.254/latest/meta-data".to_owned(),
        "ftp://example.com/hook".to_owned(),
        "http://user:pw@example.com/hook".to_owned(),
    ] {
        let body = json!({"url": target, "events": events});
        let (status, answer) = alice.call(Method::POST, "/api/webhooks", Some(body)).await;
        assert_eq!(status, 422, "{target}: {answer}");
    }
    for events in [
        json!([]),
        json!(["debate.nope"]),
        json!(["debate.failed", "debate.failed"]),
    ] {
        let body = json!({"url": "https://example.com/hook", "events": events});
        let (status, answer) = alice.call(Method::POST, "/api/webhooks", Some(body)).await;
        assert_eq!(status, 422, "{events}: {answer}");
    }
    let bad_secret = json!({"url": url, "events": ["debate.completed"], "secret": "plain"});
    let (status, _) = alice
        .call(Method::POST, "/api/webhooks", Some(bad_secret))
        .await;
    assert_eq!(status, 422);
    assert!(receiver.seen().is_empty());

    // At connect time the client's resolver refuses a name that resolves to
    // loopback, whatever was registered.
    let settings = agon::config::Settings::from_lookup(|_| None).unwrap();
    let cipher = agon::crypto::fields::FieldCipher::parse(&"cd".repeat(32)).unwrap();
    let sender = agon::webhooks::worker::Sender::new(
        Arc::new(settings.webhooks.clone()),
        cipher.clone(),
        agon::clock::Clock::default(),
    )
    .unwrap();
    let sealed = cipher.encrypt(&agon::webhooks::sign::new_secret());
    let named = format!("http://localhost:{port}/hook");
    let attempt = sender.send(&named, &sealed, "msg_1", "{}").await;
    assert_eq!(attempt.response_code, None);
    assert!(attempt.error.unwrap().contains("loopback"));
    assert!(receiver.seen().is_empty());
}
