//! Consumers that fail: a transient failure is retried and then succeeds, a
//! permanent one becomes a dead letter the consumer moves past, and an
//! admin's retry hands it over again (a test consumer over the real local
//! bus and store: the consumer contract is what is under test). A
//! projection that meets an event it cannot decode stops there and health
//! says so, while the other projections keep going. Admins see dead
//! letters and ask for retries over HTTP (who may is the authz matrix's).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agon::bus::{Bus, Consumer, ConsumerError, LocalBus, RetryPolicy};
use agon::store::{EventLog, StoreError};
use agon_projections::{Cursor, EventRecord};
use async_trait::async_trait;
use cqrs_es::persist::SerializedEvent;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::serve::spawn_with;
use crate::support::accounts::{admin_get, call};
use crate::support::{Kind, TEST_TOKEN, fill_stream, fresh, on_both_backends};

on_both_backends! {
    failures_are_retried_dead_lettered_and_redelivered => failures_are_retried_dead_lettered_and_redelivered;
    an_undecodable_event_stalls_only_the_projections_that_read_it => an_undecodable_event_stalls;
    admins_list_dead_letters_and_ask_for_retries => admins_list_dead_letters_and_ask_for_retries;
}

/// Fails the event of sequence 2 twice (transient), the one of sequence 4
/// always (permanent) and the one of sequence 5 always (transient) until
/// healed; records what it handled.
struct Flaky {
    log: EventLog,
    tries: Mutex<HashMap<i64, u32>>,
    handled: Mutex<Vec<i64>>,
    retried: Mutex<Vec<i64>>,
    healed: AtomicBool,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Failure(&'static str);

impl Flaky {
    const NAME: &'static str = "flaky";

    fn outcome(&self, event: &EventRecord) -> Result<(), ConsumerError> {
        let tries = {
            let mut tries = self.tries.lock().unwrap();
            let n = tries.entry(event.sequence).or_default();
            *n += 1;
            *n
        };
        match event.sequence {
            2 if tries <= 2 => Err(ConsumerError::transient(event, Failure("upstream busy"))),
            4 if !self.healed.load(Ordering::SeqCst) => {
                Err(ConsumerError::permanent(event, Failure("poison event")))
            }
            5 if !self.healed.load(Ordering::SeqCst) => {
                Err(ConsumerError::transient(event, Failure("upstream down")))
            }
            _ => Ok(()),
        }
    }

    fn tries(&self, sequence: i64) -> u32 {
        self.tries
            .lock()
            .unwrap()
            .get(&sequence)
            .copied()
            .unwrap_or(0)
    }
}

#[async_trait]
impl Consumer for Flaky {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn checkpoint(&self) -> Result<Cursor, StoreError> {
        self.log.load_checkpoint(Self::NAME).await
    }

    async fn handle(&self, batch: &[EventRecord]) -> Result<(), ConsumerError> {
        let mut done: Option<Cursor> = None;
        for event in batch {
            if let Err(e) = self.outcome(event) {
                // The events before the failing one are done, checkpoint included.
                if let Some(cursor) = done {
                    self.log.save_checkpoint(Self::NAME, cursor).await?;
                }
                return Err(e);
            }
            self.handled.lock().unwrap().push(event.sequence);
            done = Some(event.cursor);
        }
        if let Some(cursor) = done {
            self.log.save_checkpoint(Self::NAME, cursor).await?;
        }
        Ok(())
    }

    async fn pass(&self, event: &EventRecord) -> Result<(), StoreError> {
        self.log.save_checkpoint(Self::NAME, event.cursor).await
    }

    async fn retry(&self, event: &EventRecord) -> Result<(), ConsumerError> {
        self.outcome(event)?;
        self.retried.lock().unwrap().push(event.sequence);
        Ok(())
    }
}

async fn eventually(what: &str, mut done: impl AsyncFnMut() -> bool) {
    // Generous: the whole suite shares one store thread on two cores.
    let deadline = Instant::now() + Duration::from_secs(45);
    while !done().await {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn failures_are_retried_dead_lettered_and_redelivered(kind: Kind) {
    let store = fresh(kind).await;
    let log = &store.log;
    let policy = RetryPolicy {
        attempts: 4,
        first_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(40),
    };
    let bus = Bus::Local(LocalBus::with_retry(log.backend(), policy));
    let flaky = Arc::new(Flaky {
        log: log.clone(),
        tries: Mutex::default(),
        handled: Mutex::default(),
        retried: Mutex::default(),
        healed: AtomicBool::new(false),
    });
    let stop = CancellationToken::new();
    bus.spawn_relay(log, &stop);
    bus.spawn_consumer(log, flaky.clone(), &stop);
    fill_stream(log, "tally", "t", 6).await;

    eventually("the consumer reaches the last event", async || {
        flaky.handled.lock().unwrap().contains(&6)
    })
    .await;
    let handled = flaky.handled.lock().unwrap().clone();
    // Transient: retried with back-off, then handled once, in order.
    assert_eq!(flaky.tries(2), 3, "two failures, then success");
    assert_eq!(
        handled,
        vec![1, 2, 3, 6],
        "4 and 5 are skipped, nothing twice"
    );
    // Permanent: a dead letter at once; transient past the bound: a dead
    // letter after every attempt; the consumer moved past both.
    let letters = log.dead_letters().await.unwrap();
    assert_eq!(letters.len(), 2, "{letters:?}");
    let (letter, exhausted) = (&letters[0], &letters[1]);
    assert_eq!(flaky.tries(5), 4);
    assert_eq!(exhausted.attempts, 4);
    assert!(exhausted.reason.contains("upstream down"), "{exhausted:?}");
    let feed = log.read_feed(Cursor::START, 10).await.unwrap();
    let fourth = feed.iter().find(|e| e.sequence == 4).unwrap();
    assert_eq!(
        (letter.consumer.as_str(), letter.event_id.as_str()),
        (Flaky::NAME, fourth.event_id.as_str())
    );
    assert_eq!(letter.cursor(), fourth.cursor());
    assert_eq!(letter.attempts, 1);
    assert!(letter.reason.contains("poison event"), "{}", letter.reason);
    assert!(letter.retry_requested_at.is_none());
    let last = feed.last().unwrap().cursor();
    eventually("the checkpoint passes the dead letter", async || {
        log.load_checkpoint(Flaky::NAME).await.unwrap() == last
    })
    .await;

    // A retry that fails again keeps the dead letter, one attempt more.
    let delivery = bus.delivery();
    assert!(
        delivery
            .retry_dead_letter(log, &letter.id)
            .await
            .unwrap()
            .is_some()
    );
    eventually("the failed retry is recorded", async || {
        let letters = log.dead_letters().await.unwrap();
        letters.len() == 2 && letters[0].attempts == 2 && letters[0].retry_requested_at.is_none()
    })
    .await;
    // Fixed: the retries hand the events over again and the dead letters go.
    flaky.healed.store(true, Ordering::SeqCst);
    delivery.retry_dead_letter(log, &letter.id).await.unwrap();
    delivery
        .retry_dead_letter(log, &exhausted.id)
        .await
        .unwrap();
    eventually("the retried events are handled", async || {
        log.dead_letters().await.unwrap().is_empty()
    })
    .await;
    assert_eq!(flaky.retried.lock().unwrap().clone(), vec![4, 5]);
    assert_eq!(log.load_checkpoint(Flaky::NAME).await.unwrap(), last);
    assert!(
        delivery
            .retry_dead_letter(log, "no-such-id")
            .await
            .unwrap()
            .is_none()
    );
    stop.cancel();
}

/// A syntactically valid account event no code knows.
fn unknown_account_event() -> SerializedEvent {
    SerializedEvent {
        aggregate_id: "ghost".to_owned(),
        sequence: 1,
        aggregate_type: "account".to_owned(),
        event_type: "Teleported".to_owned(),
        event_version: "1".to_owned(),
        payload: json!({"Teleported": {"to": "mars"}}),
        metadata: json!({"actor": "test"}),
    }
}

fn projection<'a>(health: &'a Value, name: &str) -> &'a Value {
    health["projections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap()
}

async fn an_undecodable_event_stalls(kind: Kind) {
    let app = spawn_with(kind, &crate::auth::ROOMY).await;
    let base = &app.base;
    let log = &app.app.log;
    // Read once before: what that pass found caught up must not hide the
    // event that comes after.
    admin_get(base, "/api/health/detailed").await;
    log.append(&[unknown_account_event()]).await.unwrap();
    // On PostgreSQL the feed shows it once older transactions settle.
    let mut bad = None;
    eventually("the feed shows the event", async || {
        let feed = log.read_feed(Cursor::START, 1_000).await.unwrap();
        bad = feed
            .iter()
            .find(|e| e.event_type == "Teleported")
            .map(|e| e.cursor());
        bad.is_some()
    })
    .await;
    let bad = bad.unwrap();

    // The projections reading account payloads stop there and say where.
    let mut health = Value::Null;
    eventually("health reports the stall", async || {
        health = admin_get(base, "/api/health/detailed").await;
        ["accounts", "sessions", "api_keys"]
            .iter()
            .all(|name| !projection(&health, name)["stalled"].is_null())
    })
    .await;
    for name in ["accounts", "sessions", "api_keys"] {
        let stalled = &projection(&health, name)["stalled"];
        assert_eq!(stalled["position"], bad.position, "{name}: {stalled}");
        assert_eq!(stalled["event_type"], "Teleported");
        assert_eq!(stalled["event_version"], "1");
        assert!(
            stalled["error"].as_str().unwrap().contains("does not fit"),
            "{stalled}"
        );
        let checkpoint = projection(&health, name)["checkpoint_position"].as_i64();
        assert!(
            checkpoint.is_none_or(|c| c < bad.position),
            "{name}: {health}"
        );
    }
    let text = reqwest::Client::new()
        .get(format!("{base}/api/metrics"))
        .bearer_auth(TEST_TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("service_projections_stalled"), "{text}");

    // The others keep going: a debate is created, run and read.
    let body = json!({"topic": "Stalls", "agents": ["demo-a", "demo-b"], "rounds": 1});
    let url = format!("{base}/api/debates");
    let (status, created) = call(Method::POST, &url, Some(TEST_TOKEN), Some(body)).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    eventually("the debate completes", async || {
        let url = format!("{base}/api/debates/{id}");
        let (_, debate) = call(Method::GET, &url, Some(TEST_TOKEN), None).await;
        debate["status"] == "completed"
    })
    .await;
    eventually("admin stats counts past the bad event", async || {
        let health = admin_get(base, "/api/health/detailed").await;
        let stats = projection(&health, "admin_stats");
        stats["stalled"].is_null()
            && stats["checkpoint_position"]
                .as_i64()
                .is_some_and(|c| c > bad.position)
    })
    .await;
    // Stalled is not unready: every replica would stall alike.
    eventually(
        "the replica is ready, naming the stalled projections",
        async || {
            let (status, ready) = call(Method::GET, &format!("{base}/readyz"), None, None).await;
            status == 200 && ready["stalled"] == json!(["accounts", "sessions", "api_keys"])
        },
    )
    .await;
    let health = admin_get(base, "/api/health/detailed").await;
    for name in ["debates", "organizations", "leaderboard"] {
        assert!(projection(&health, name)["stalled"].is_null(), "{health}");
    }
    assert_eq!(
        projection(&health, "accounts")["stalled"]["position"],
        bad.position
    );
    // Each stalled one has the event it stopped at left to apply.
    for name in ["accounts", "sessions", "api_keys"] {
        assert_eq!(
            projection(&health, name)["behind"],
            true,
            "{name}: {health}"
        );
    }

    // A replay stops at the same event rather than skip it.
    let replayed = agon::projection::rebuild(log, "accounts").await;
    match replayed {
        Err(ConsumerError::Undecodable { cursor, .. }) => assert_eq!(cursor, bad),
        other => panic!("replay went past an undecodable event: {other:?}"),
    }
    app.stop.cancel();
}

async fn admins_list_dead_letters_and_ask_for_retries(kind: Kind) {
    let app = spawn_with(kind, &crate::auth::ROOMY).await;
    let base = &app.base;
    let log = &app.app.log;
    fill_stream(log, "tally", "dead", 1).await;
    let mut event = None;
    eventually("the feed shows the event", async || {
        let feed = log.read_feed(Cursor::START, 1_000).await.unwrap();
        event = feed.into_iter().find(|e| e.aggregate_id == "dead");
        event.is_some()
    })
    .await;
    let event = event.unwrap().into_record().unwrap();
    // A consumer that does not run here, so the retry stays requested.
    log.dead_letter("elsewhere", &event, "mailbox full", 3)
        .await
        .unwrap();

    let listed = admin_get(base, "/api/admin/dead-letters").await;
    let letters = listed["dead_letters"].as_array().unwrap();
    assert_eq!(letters.len(), 1, "{listed}");
    let letter = &letters[0];
    assert_eq!(letter["consumer"], "elsewhere");
    assert_eq!(letter["event_id"], event.event_id.as_str());
    assert_eq!(letter["position"], event.cursor.position);
    assert_eq!(letter["reason"], "mailbox full");
    assert_eq!(letter["attempts"], 3);
    assert!(letter["retry_requested_at"].is_null());

    let id = letter["id"].as_str().unwrap();
    let url = format!("{base}/api/admin/dead-letters/{id}/retry");
    let (status, retried) = call(Method::POST, &url, Some(TEST_TOKEN), None).await;
    assert_eq!(status, 202, "{retried}");
    assert!(retried["retry_requested_at"].is_string(), "{retried}");
    let listed = admin_get(base, "/api/admin/dead-letters").await;
    assert!(
        listed["dead_letters"][0]["retry_requested_at"].is_string(),
        "{listed}"
    );

    let url = format!("{base}/api/admin/dead-letters/no-such-id/retry");
    let (status, body) = call(Method::POST, &url, Some(TEST_TOKEN), None).await;
    assert_eq!(status, 404, "{body}");
    app.stop.cancel();
}
