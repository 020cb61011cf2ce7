//! Debate leases across processes (PostgreSQL): a replica killed mid-debate
//! loses the debate to another within `SERVICE_DEBATE_LEASE_SECONDS` (the
//! README's bound), a restarted replica resumes its own debates at once, and
//! two live processes never drive a debate together under one name.

use std::time::Duration;

use tokio::time::Instant;

use super::lifecycle::{Binary, binary_env};
use super::{list, message_turns};
use crate::support::provider::{Behavior, FakeProvider, create_debate, wait_debate, wait_finished};
use crate::support::{Kind, client};

/// Three agents over three rounds, each call half a second: a debate of
/// several seconds, mid-way once two answers are recorded.
const AGENTS: [&str; 3] = ["claude", "gpt-4o", "openai:gpt-4o-mini"];

/// `env` with `pairs` set last (a later value of a variable wins).
fn and(env: &[(String, String)], pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut env = env.to_vec();
    env.extend(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    env
}

fn dir_of(dir: &tempfile::TempDir) -> &str {
    dir.path().to_str().unwrap()
}

/// How long until the fake sees a call beyond the first `seen` (60 s at most).
async fn until_new_call(fake: &FakeProvider, seen: usize, since: Instant) -> Duration {
    let deadline = since + Duration::from_secs(60);
    while fake.calls().len() <= seen {
        assert!(Instant::now() < deadline, "nobody resumed the debate");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    since.elapsed()
}

/// The debate completed, kept what was recorded before the kill, and no
/// turn recorded then was asked again.
fn assert_resumed(fake: &FakeProvider, detail: &serde_json::Value, recorded: &[String]) {
    assert_eq!(detail["status"], "completed", "{detail}");
    let turns = message_turns(detail);
    assert_eq!(
        turns[..recorded.len()],
        recorded[..],
        "what was recorded stays"
    );
    let counts = fake.turn_counts();
    for turn in recorded {
        assert_eq!(counts.get(turn), Some(&1), "{turn} asked again: {counts:?}");
    }
    assert_eq!(list(&detail["consensus"]["votes"]).len(), 3, "{detail}");
}

/// Replica A drives a debate and is killed with SIGKILL; replica B, which
/// found the debate claimed when it started, takes it over within the lease
/// period (3 s here), call to the provider included: the claim lapses 1.5 s
/// after its last renewal and B looks every 0.75 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_replicas_debate_is_taken_over_within_the_lease_period() {
    let fake = FakeProvider::start().await;
    fake.script(|_| Behavior::slow(500));
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (env, _nats) = binary_env(Kind::Postgres, &fake, &dir_a, &[]).await;
    let env = and(&env, &[("SERVICE_DEBATE_LEASE_SECONDS", "3")]);
    let c = client();
    let mut a = Binary::start(&env).await;
    let id = create_debate(&c, &a.base, &AGENTS, 3).await;
    wait_debate(&c, &a.base, &id, |d| !list(&d["messages"]).is_empty()).await;
    // B starts while A holds the debate: its start-up scan leaves it alone.
    let mut b = Binary::start(&and(&env, &[("SERVICE_DATA_DIR", dir_of(&dir_b))])).await;
    let before = wait_debate(&c, &b.base, &id, |d| list(&d["messages"]).len() >= 3).await;
    a.kill_hard().await;
    let killed = Instant::now();
    let seen = fake.calls().len();
    let recorded = message_turns(&before);
    assert!(recorded.len() < 21, "mid-way at the kill: {before}");

    let takeover = until_new_call(&fake, seen, killed).await;
    assert!(
        takeover <= Duration::from_secs(3),
        "taken over {takeover:?} after the kill; the README's bound is the 3 s lease period"
    );
    let detail = wait_finished(&c, &b.base, &id).await;
    assert_resumed(&fake, &detail, &recorded);
    assert!(b.terminate().await.success());
}

/// A replica killed mid-debate and started again (same data directory, so
/// the same name) resumes its debate at once, although its lease (30 s, the
/// default) has not lapsed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_replica_resumes_its_own_debate_at_once() {
    let fake = FakeProvider::start().await;
    fake.script(|_| Behavior::slow(500));
    let dir = tempfile::tempdir().unwrap();
    let (env, _nats) = binary_env(Kind::Postgres, &fake, &dir, &[]).await;
    let env = and(&env, &[("SERVICE_DEBATE_LEASE_SECONDS", "30")]);
    let c = client();
    let mut first = Binary::start(&env).await;
    let id = create_debate(&c, &first.base, &AGENTS, 3).await;
    let before = wait_debate(&c, &first.base, &id, |d| list(&d["messages"]).len() >= 3).await;
    first.kill_hard().await;
    let killed = Instant::now();
    let seen = fake.calls().len();

    let mut second = Binary::start(&env).await;
    let resumed = until_new_call(&fake, seen, killed).await;
    assert!(
        resumed < Duration::from_secs(10),
        "resumed {resumed:?} after the kill: the restarted replica waited for its own lease"
    );
    let detail = wait_finished(&c, &second.base, &id).await;
    assert_resumed(&fake, &detail, &message_turns(&before));
    assert!(second.terminate().await.success());
}

/// Two live processes configured with one `SERVICE_REPLICA_ID`: the second
/// takes a name of its own, so it does not drive the first one's debate
/// too (every turn is asked once).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_live_processes_with_one_replica_id_never_drive_one_debate() {
    two_live_processes_never_drive_one_debate(true).await;
}

/// Two live processes sharing one data directory: the second keeps a name
/// of its own there (`replica-id-2`), so it does not drive the first one's
/// debate too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_live_processes_sharing_a_data_directory_never_drive_one_debate() {
    two_live_processes_never_drive_one_debate(false).await;
}

async fn two_live_processes_never_drive_one_debate(one_replica_id: bool) {
    let fake = FakeProvider::start().await;
    fake.script(|_| Behavior::slow(300));
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (env, _nats) = binary_env(Kind::Postgres, &fake, &dir_a, &[]).await;
    let mut env = and(&env, &[("SERVICE_DEBATE_LEASE_SECONDS", "30")]);
    let env_b = if one_replica_id {
        env = and(&env, &[("SERVICE_REPLICA_ID", "replica-one")]);
        and(&env, &[("SERVICE_DATA_DIR", dir_of(&dir_b))])
    } else {
        env.clone()
    };
    let c = client();
    let mut a = Binary::start(&env).await;
    let id = create_debate(&c, &a.base, &AGENTS, 2).await;
    wait_debate(&c, &a.base, &id, |d| !list(&d["messages"]).is_empty()).await;
    let mut b = Binary::start(&env_b).await;
    let detail = wait_finished(&c, &b.base, &id).await;
    assert_eq!(detail["status"], "completed", "{detail}");
    let counts = fake.turn_counts();
    assert!(
        counts.values().all(|n| *n == 1),
        "a turn asked twice: {counts:?}"
    );
    if !one_replica_id {
        let first = std::fs::read_to_string(dir_a.path().join("replica-id")).unwrap();
        let second = std::fs::read_to_string(dir_a.path().join("replica-id-2")).unwrap();
        assert_ne!(first, second);
    }
    assert!(a.terminate().await.success());
    assert!(b.terminate().await.success());
}
