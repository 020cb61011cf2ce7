//! The public NATS stream for outside subscribers, read by the shipped
//! example (`examples/subscribe.rs`, compiled in here as it is): every
//! debate's `debate.completed` arrives exactly once by id, across a restart
//! of the service that re-publishes everything it had published (its
//! checkpoint lost, as after a crash between publishing and saving it), and
//! across a restart of the subscriber.

#[allow(dead_code)]
#[path = "../../examples/subscribe.rs"]
mod subscribe;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::time::Duration;

use agon::store::{Db, EventLog};
use reqwest::Method;
use serde_json::{Value, json};

use crate::schemas::{Seen, conforms};
use crate::support::accounts::{admin_get, call};
use crate::support::binary::{Serve, Served};
use crate::support::{Kind, LoopbackServer, TEST_TOKEN, on_both_backends};
use subscribe::{Options, Outcome, follow};

const DEPLOYMENT: &str = "outside";
/// How long a subscriber waits for what it expects before the test fails.
const PATIENCE: Duration = Duration::from_secs(90);
/// How long NATS stays down in the outage test.
const OUTAGE: Duration = Duration::from_secs(12);

on_both_backends! {
    the_example_subscriber_gets_every_completion_once_across_restarts => the_example_subscriber_gets_every_completion_once_across_restarts;
    outcomes_of_a_nats_outage_are_published_when_it_is_back => outcomes_of_a_nats_outage_are_published_when_it_is_back;
    a_new_nats_server_gets_every_outcome_again => a_new_nats_server_gets_every_outcome_again;
}

async fn database(kind: Kind) -> Option<String> {
    match kind {
        Kind::Sqlite => None,
        Kind::Postgres => Some(crate::support::fresh_postgres_database().await),
    }
}

fn options(nats_url: &str) -> Options {
    Options {
        url: nats_url.to_owned(),
        deployment: DEPLOYMENT.to_owned(),
        stream: None,
        durable: "outside-test".to_owned(),
        only: None,
    }
}

/// Every message once by id; the stream holds exactly `received`.
async fn assert_once(nats_url: &str, received: &[Outcome]) {
    let mut by_id: BTreeMap<&str, usize> = BTreeMap::new();
    for outcome in received {
        *by_id.entry(outcome.id.as_str()).or_default() += 1;
    }
    assert!(by_id.values().all(|n| *n == 1), "{by_id:?}");
    let client = async_nats::connect(nats_url).await.unwrap();
    let stream = async_nats::jetstream::new(client)
        .get_stream(format!("AGON_{DEPLOYMENT}_PUBLIC"))
        .await
        .unwrap();
    assert_eq!(
        stream.cached_info().state.messages,
        received.len() as u64,
        "{:?}",
        stream.cached_info().state
    );
}

async fn start(database_url: Option<&str>, nats_url: &str, dir: &std::path::Path) -> Served {
    start_with(database_url, nats_url, dir, &[]).await
}

async fn start_with(
    database_url: Option<&str>,
    nats_url: &str,
    dir: &std::path::Path,
    vars: &[(&str, &str)],
) -> Served {
    let mut serve = Serve::on_free_ports()
        .envs(vars.iter().copied())
        .loopback()
        .data_dir(dir)
        .env("SERVICE_NATS_URL", nats_url)
        .env("SERVICE_DEPLOYMENT_ID", DEPLOYMENT)
        .env("SERVICE_API_TOKEN", TEST_TOKEN)
        .env("SERVICE_LOG_LEVEL", "WARNING")
        .env("SERVICE_IP_RATE_LIMIT", "1000000")
        .env("SERVICE_RATE_LIMIT_DEFAULT", "1000000")
        .env("SERVICE_RATE_LIMIT_DEBATE_CREATE", "1000000")
        .stderr(std::process::Stdio::null());
    if let Some(url) = database_url {
        serve = serve.env("DATABASE_URL", url);
    }
    serve.start().await
}

/// Creates demo debates; returns their ids.
async fn debates(base: &str, topics: &[&str]) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for topic in topics {
        let body = json!({"topic": topic, "agents": ["demo-a", "demo-b"], "rounds": 1});
        let url = format!("{base}/api/debates");
        let (status, created) = call(Method::POST, &url, Some(TEST_TOKEN), Some(body)).await;
        assert_eq!(status, 201, "{created}");
        ids.insert(created["id"].as_str().unwrap().to_owned());
    }
    ids
}

/// Runs the example's consumer until it has seen `debate.completed` for
/// every debate of `wanted`; returns every message it was handed.
async fn receive_completions(options: &Options, wanted: &BTreeSet<String>) -> Vec<Outcome> {
    let mut got = Vec::new();
    let mut missing = wanted.clone();
    let followed = tokio::time::timeout(
        PATIENCE,
        follow(options, |outcome| {
            if outcome.kind() == "debate.completed" {
                missing.remove(outcome.debate_id());
            }
            got.push(outcome);
            if missing.is_empty() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }),
    )
    .await;
    followed
        .unwrap_or_else(|_| panic!("no completion within {PATIENCE:?} for {missing:?}"))
        .unwrap();
    got
}

/// Forgets the publisher's checkpoint while the service is down, as a crash
/// after publishing and before saving it would.
async fn lose_checkpoint(database_url: Option<&str>, dir: &std::path::Path) {
    let db = match database_url {
        Some(url) => Db::connect_postgres(url, 2).await.unwrap(),
        None => Db::open_sqlite(dir).await.unwrap(),
    };
    let log = EventLog::new(db);
    let name = agon::projection::checkpoint_name(agon::outside::NAME);
    assert_ne!(
        log.load_checkpoint(&name).await.unwrap(),
        agon_projections::Cursor::START,
        "the publisher saved a checkpoint"
    );
    log.reset_checkpoint(&name).await.unwrap();
    log.db().close().await;
}

async fn the_example_subscriber_gets_every_completion_once_across_restarts(kind: Kind) {
    let nats = LoopbackServer::nats().await;
    let nats_url = nats.url();
    let dir = tempfile::tempdir().unwrap();
    let database_url = database(kind).await;
    let options = options(&nats_url);

    let mut served = start(database_url.as_deref(), &nats_url, dir.path()).await;
    let first = debates(&served.base, &["One?", "Two?", "Three?"]).await;
    let mut received = receive_completions(&options, &first).await;
    assert!(served.terminate(Duration::from_secs(30)).await.success());

    lose_checkpoint(database_url.as_deref(), dir.path()).await;
    let served = start(database_url.as_deref(), &nats_url, dir.path()).await;
    let second = debates(&served.base, &["Four?", "Five?"]).await;
    // The subscriber starts again too, on its durable.
    received.extend(receive_completions(&options, &second).await);

    // Each message once, though the first three debates were published
    // twice: the stream dropped the re-publish as a duplicate.
    assert_once(&nats_url, &received).await;
    let completed: Vec<&str> = received
        .iter()
        .filter(|o| o.kind() == "debate.completed")
        .map(Outcome::debate_id)
        .collect();
    let all: BTreeSet<String> = first.union(&second).cloned().collect();
    assert_eq!(completed.len(), all.len(), "{completed:?}");
    assert_eq!(
        completed
            .iter()
            .map(|s| (*s).to_owned())
            .collect::<BTreeSet<_>>(),
        all
    );
    // Every body is the published webhook form, on its documented subject.
    for outcome in &received {
        let kind = outcome.kind();
        assert_eq!(outcome.subject, format!("agon.{DEPLOYMENT}.public.{kind}"));
        let path = format!(
            "{}/event-schemas/webhooks/{kind}.v1.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        conforms(&outcome.body, &schema, "body", "#", &mut Seen::default())
            .unwrap_or_else(|e| panic!("{path}: {e}\n{}", outcome.body));
    }

    served.stop(Duration::from_secs(30)).await;
}

/// Waits until every debate of `ids` has ended.
async fn until_ended(base: &str, ids: &BTreeSet<String>) {
    let deadline = std::time::Instant::now() + PATIENCE;
    for id in ids {
        loop {
            let debate = admin_get(base, &format!("/api/debates/{id}")).await;
            if debate["status"] == "completed" || debate["status"] == "failed" {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{debate}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn outcomes_of_a_nats_outage_are_published_when_it_is_back(kind: Kind) {
    let mut nats = LoopbackServer::nats().await;
    let nats_url = nats.url();
    let dir = tempfile::tempdir().unwrap();
    let database_url = database(kind).await;
    let options = options(&nats_url);
    // One attempt: a failure the publisher reported would be dead-lettered
    // (and its outcome never published) at once.
    let served = start_with(
        database_url.as_deref(),
        &nats_url,
        dir.path(),
        &[("SERVICE_CONSUMER_RETRY_ATTEMPTS", "1")],
    )
    .await;
    let before = debates(&served.base, &["Before?"]).await;
    let mut received = receive_completions(&options, &before).await;

    // The service commits and runs debates without NATS.
    nats.stop();
    let during = debates(&served.base, &["During one?", "During two?"]).await;
    until_ended(&served.base, &during).await;
    // Down for longer than the client holds a request for a server that
    // is away (10 s), so the publisher sees its publishes fail.
    tokio::time::sleep(OUTAGE).await;
    nats.restart().await;

    received.extend(receive_completions(&options, &during).await);
    // The server was killed, and it keeps its consumers' acks lazily: this
    // subscriber may be handed a message it had acked once more (seen in
    // one run of the whole suite). The id tells the copies apart, as the
    // example subscriber does; the stream must still hold each outcome once.
    let mut ids = BTreeSet::new();
    received.retain(|outcome| ids.insert(outcome.id.clone()));
    assert_once(&nats_url, &received).await;
    let completed: BTreeSet<&str> = received
        .iter()
        .filter(|o| o.kind() == "debate.completed")
        .map(Outcome::debate_id)
        .collect();
    assert_eq!(completed.len(), 3, "{completed:?}");
    let letters = admin_get(&served.base, "/api/admin/dead-letters").await;
    assert_eq!(letters["dead_letters"], json!([]), "{letters}");
    served.stop(Duration::from_secs(30)).await;
}

async fn a_new_nats_server_gets_every_outcome_again(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let database_url = database(kind).await;
    let old = LoopbackServer::nats().await;
    let mut served = start(database_url.as_deref(), &old.url(), dir.path()).await;
    let first = debates(&served.base, &["Old server?"]).await;
    receive_completions(&options(&old.url()), &first).await;
    assert!(served.terminate(Duration::from_secs(30)).await.success());

    // The same deployment moves to a server that has never seen it.
    let new = LoopbackServer::nats().await;
    let served = start(database_url.as_deref(), &new.url(), dir.path()).await;
    let second = debates(&served.base, &["New server?"]).await;
    let all: BTreeSet<String> = first.union(&second).cloned().collect();
    let received = receive_completions(&options(&new.url()), &all).await;
    assert_once(&new.url(), &received).await;
    served.stop(Duration::from_secs(30)).await;
}
