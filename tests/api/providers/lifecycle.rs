//! The provider layer over time and across processes: the circuit
//! breaker's cycle, the pending queue under the concurrency limit, and the
//! real binary killed mid-debate or stopped with SIGTERM.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chrono::Utc;
use serde_json::{Value, json};

use super::{failures, list, message_turns, serve, time, with};
use crate::support::binary::{Serve, Served};
use crate::support::provider::{
    Behavior, FakeProvider, create_debate, get, metric, post_debate, quiet_limits, wait_debate,
    wait_finished,
};
use crate::support::{Kind, LoopbackServer, client, on_both_backends};

on_both_backends! {
    the_breaker_opens_half_opens_and_closes => the_breaker_opens_half_opens_and_closes;
    a_killed_binary_resumes_without_repeating_recorded_turns => a_killed_binary_resumes_without_repeating_recorded_turns;
    debates_over_the_limit_wait_pending_in_creation_order => debates_over_the_limit_wait_pending_in_creation_order;
    sigterm_lets_the_running_debate_finish => sigterm_lets_the_running_debate_finish;
}

/// With `SERVICE_MAX_CONCURRENT_DEBATES=1` an idle service starts a new
/// debate inside the create request (the dispatcher holds no slot while idle).
mod a_free_slot_under_the_limit_starts_a_debate_at_once {
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite() {
        super::a_free_slot_starts_a_debate(crate::support::Kind::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        super::a_free_slot_starts_a_debate(crate::support::Kind::Postgres).await;
    }
}

async fn a_free_slot_starts_a_debate(kind: Kind) {
    let fake = FakeProvider::start().await;
    let env = with(fake.env(), &[("SERVICE_MAX_CONCURRENT_DEBATES", "1")]);
    let (app, _nats) = serve(kind, env).await;
    let c = client();
    let body = json!({"topic": "Alone", "agents": ["claude", "gpt-4o"], "rounds": 1});
    let (status, created) = post_debate(&c, &app.base, &body).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        created["status"], "running",
        "an idle service starts it at once: {created}"
    );
    app.stop.cancel();
}

async fn breaker_of(c: &reqwest::Client, base: &str, agent: &str) -> Value {
    let (_, body) = get(c, base, "/api/agents/circuit-breakers").await;
    list(&body["circuit_breakers"])
        .iter()
        .find(|b| b["agent"] == agent)
        .cloned()
        .unwrap_or(Value::Null)
}

async fn wait_breaker(
    c: &reqwest::Client,
    base: &str,
    agent: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let breaker = breaker_of(c, base, agent).await;
        if done(&breaker) {
            return breaker;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "breaker never got there: {breaker}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn the_breaker_opens_half_opens_and_closes(kind: Kind) {
    // Metrics are process-wide: a name of its own keeps this run's gauge apart.
    let agent = format!(
        "claude-breaker-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let gauge = format!("service_circuit_breaker_state{{agent=\"{agent}\"}}");
    let fake = FakeProvider::start().await;
    let failing = agent.clone();
    fake.script(move |c| {
        if c.agent == failing {
            Behavior::ServerError
        } else {
            Behavior::Answer
        }
    });
    let env = with(
        fake.env(),
        &[("SERVICE_CIRCUIT_BREAKER_RECOVERY_SECONDS", "1")],
    );
    let (app, _nats) = serve(kind, env).await;
    let c = client();
    // Each debate costs the agent one call of two attempts (the retry), then it drops out.
    for _ in 0..3 {
        let id = create_debate(&c, &app.base, &[&agent, "demo-a"], 1).await;
        let detail = wait_finished(&c, &app.base, &id).await;
        assert_eq!(detail["status"], "completed", "{detail}");
        assert_eq!(
            failures(&detail),
            [(agent.clone(), "http_status".to_owned())]
        );
    }
    assert_eq!(fake.calls().iter().filter(|c| c.agent == agent).count(), 6);
    let open = breaker_of(&c, &app.base, &agent).await;
    assert_eq!(open["state"], "open", "{open}");
    assert_eq!(open["total_failures"], 6);
    let (_, all) = get(&c, &app.base, "/api/agents/circuit-breakers").await;
    assert!(list(&all["open"]).contains(&json!(agent)), "{all}");
    assert_eq!(metric(&c, &app.base, &gauge).await, Some(2.0));

    // The provider recovers: the first trial call answers at once, later ones wait.
    let seen = Arc::new(AtomicUsize::new(0));
    let (name, count) = (agent.clone(), seen.clone());
    fake.script(
        move |c| match c.agent == name && count.fetch_add(1, Ordering::SeqCst) > 0 {
            true => Behavior::Held(Box::new(Behavior::Answer)),
            false => Behavior::Answer,
        },
    );
    wait_breaker(&c, &app.base, &agent, |b| b["retry_in_seconds"] == 0).await;
    let id = create_debate(&c, &app.base, &[&agent, "demo-a"], 1).await;
    let half = wait_breaker(&c, &app.base, &agent, |b| b["consecutive_successes"] == 1).await;
    assert_eq!(half["state"], "half_open", "{half}");
    assert_eq!(metric(&c, &app.base, &gauge).await, Some(1.0));
    fake.release();
    let closed = wait_breaker(&c, &app.base, &agent, |b| b["state"] != "half_open").await;
    assert_eq!(closed["state"], "closed", "{closed}");
    assert_eq!(metric(&c, &app.base, &gauge).await, Some(0.0));
    let detail = wait_finished(&c, &app.base, &id).await;
    assert_eq!(
        (&detail["status"], &detail["failures"]),
        (&json!("completed"), &json!([])),
        "{detail}"
    );
    app.stop.cancel();
}

/// `agon serve` as a child process on a free port.
pub struct Binary {
    pub base: String,
    served: Served,
}

impl Binary {
    /// Starts the binary with only `env` (plus PATH) and the static token.
    pub async fn start(env: &[(String, String)]) -> Self {
        let served = Serve::on_free_ports()
            .loopback()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("SERVICE_API_TOKEN", crate::support::TEST_TOKEN)
            .env("SERVICE_LOG_LEVEL", "WARN")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .start()
            .await;
        Self {
            base: served.base.clone(),
            served,
        }
    }

    /// SIGKILL, and reap it.
    pub async fn kill_hard(&mut self) {
        self.served.kill_hard().await;
    }

    /// SIGTERM; returns how it exited (at most 60 s later).
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        self.served.terminate(Duration::from_secs(60)).await
    }
}

/// Binary environment: the fake, a data directory, and on PostgreSQL a
/// fresh database and a NATS server.
pub(super) async fn binary_env(
    kind: Kind,
    fake: &FakeProvider,
    dir: &tempfile::TempDir,
    extra: &[(&str, &str)],
) -> (Vec<(String, String)>, Option<LoopbackServer>) {
    let mut env = with(fake.env(), extra);
    env.extend(quiet_limits());
    env.push((
        "SERVICE_DATA_DIR".into(),
        dir.path().to_str().unwrap().to_owned(),
    ));
    env.push(("SERVICE_DEBATE_LEASE_SECONDS".into(), "2".into()));
    let nats = match kind {
        Kind::Sqlite => None,
        Kind::Postgres => {
            env.push((
                "DATABASE_URL".into(),
                crate::support::fresh_postgres_database().await,
            ));
            Some(LoopbackServer::nats().await)
        }
    };
    if let Some(nats) = &nats {
        env.push(("SERVICE_NATS_URL".into(), nats.url()));
    }
    (env, nats)
}

async fn a_killed_binary_resumes_without_repeating_recorded_turns(kind: Kind) {
    let fake = FakeProvider::start().await;
    fake.script(|_| Behavior::slow(400));
    let dir = tempfile::tempdir().unwrap();
    let (env, _nats) = binary_env(kind, &fake, &dir, &[]).await;
    let c = client();
    let mut first = Binary::start(&env).await;
    let agents = ["claude", "gpt-4o", "openai:gpt-4o-mini"];
    let id = create_debate(&c, &first.base, &agents, 2).await;
    let before = wait_debate(&c, &first.base, &id, |d| list(&d["messages"]).len() >= 3).await;
    first.kill_hard().await;
    let recorded = message_turns(&before);
    assert!(
        recorded.len() < 15,
        "the debate was mid-way at the kill: {before}"
    );
    let calls_before = fake.calls().len();

    let mut second = Binary::start(&env).await;
    let detail = wait_finished(&c, &second.base, &id).await;
    assert_eq!(detail["status"], "completed", "{detail}");
    assert!(
        fake.calls().len() > calls_before,
        "the restarted service resumed the debate"
    );
    let counts = fake.turn_counts();
    for turn in &recorded {
        assert_eq!(
            counts.get(turn),
            Some(&1),
            "{turn} was recorded before the kill and asked again: {counts:?}"
        );
    }
    // The plan: 3 openings, 3 critiques and 3 revisions in each of 2 rounds, a synthesis, 3 votes.
    let turns = message_turns(&detail);
    assert_eq!(turns.len(), 15, "{detail}");
    assert_eq!(
        turns.iter().collect::<HashSet<_>>().len(),
        15,
        "no turn recorded twice"
    );
    assert_eq!(
        turns[..recorded.len()],
        recorded[..],
        "what was recorded stays"
    );
    assert_eq!(detail["synthesis"]["agent"], "claude");
    assert_eq!(list(&detail["consensus"]["votes"]).len(), 3);
    let mut expected: HashSet<String> = turns.into_iter().collect();
    expected.insert("claude/2/synthesis".into());
    expected.extend(agents.iter().map(|a| format!("{a}/2/vote")));
    assert_eq!(
        counts.keys().cloned().collect::<HashSet<_>>(),
        expected,
        "every call is a planned turn"
    );
    assert!(second.terminate().await.success());
}

async fn debates_over_the_limit_wait_pending_in_creation_order(kind: Kind) {
    let fake = FakeProvider::start().await;
    fake.script(|_| Behavior::slow(250));
    let env = with(fake.env(), &[("SERVICE_MAX_CONCURRENT_DEBATES", "1")]);
    let (app, _nats) = serve(kind, env).await;
    let c = client();
    let mut ids = Vec::new();
    let mut statuses = Vec::new();
    for n in 0..3 {
        let body = json!({"topic": format!("Queued debate {n}"), "agents": ["claude", "gpt-4o"], "rounds": 1});
        let (status, created) = post_debate(&c, &app.base, &body).await;
        assert_eq!(status, 201, "{created}");
        ids.push(created["id"].as_str().unwrap().to_owned());
        statuses.push(created["status"].as_str().unwrap().to_owned());
    }
    assert_eq!(statuses, ["running", "pending", "pending"]);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (_, pending) = get(&c, &app.base, "/api/debates?status=pending").await;
        assert!(pending["debates"].is_array(), "{pending}");
        let listed: HashSet<&str> = list(&pending["debates"])
            .iter()
            .filter_map(|d| d["id"].as_str())
            .collect();
        if listed == HashSet::from([ids[1].as_str(), ids[2].as_str()]) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never listed both as pending: {pending}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let mut details = Vec::new();
    for id in &ids {
        details.push(wait_finished(&c, &app.base, id).await);
    }
    for pair in details.windows(2) {
        assert_eq!(pair[0]["status"], "completed", "{}", pair[0]);
        assert!(
            time(&pair[1]["started_at"]) >= time(&pair[0]["completed_at"]),
            "one at a time, in order"
        );
    }
    // The provider saw the debates strictly one after the other.
    let order: Vec<usize> = fake
        .calls()
        .iter()
        .map(|c| {
            c.topic
                .trim_start_matches("Queued debate ")
                .parse()
                .unwrap()
        })
        .collect();
    assert!(order.windows(2).all(|w| w[0] <= w[1]), "{order:?}");
    assert_eq!(order.iter().filter(|n| **n == 2).count(), 9);
    app.stop.cancel();
}

async fn sigterm_lets_the_running_debate_finish(kind: Kind) {
    let fake = FakeProvider::start().await;
    fake.script(|_| Behavior::slow(300));
    let dir = tempfile::tempdir().unwrap();
    let (env, _nats) = binary_env(
        kind,
        &fake,
        &dir,
        &[("SERVICE_SHUTDOWN_GRACE_SECONDS", "30")],
    )
    .await;
    let c = client();
    let mut first = Binary::start(&env).await;
    let id = create_debate(&c, &first.base, &["claude", "gpt-4o"], 1).await;
    let running = wait_debate(&c, &first.base, &id, |d| !list(&d["messages"]).is_empty()).await;
    assert_eq!(running["status"], "running");
    let exit = first.terminate().await;
    assert!(exit.success(), "{exit:?}");
    let stopped_at = Utc::now();
    let calls_at_exit = fake.calls().len();
    let counts: HashMap<String, usize> = fake.turn_counts();
    assert!(
        counts.contains_key("claude/1/vote") && counts.contains_key("gpt-4o/1/vote"),
        "{counts:?}"
    );

    let mut second = Binary::start(&env).await;
    let detail = wait_finished(&c, &second.base, &id).await;
    assert_eq!(detail["status"], "completed", "{detail}");
    assert!(
        time(&detail["completed_at"]) <= stopped_at,
        "completed before the first process exited"
    );
    assert_eq!(list(&detail["messages"]).len(), 6);
    assert_eq!(
        fake.calls().len(),
        calls_at_exit,
        "nothing was left to resume"
    );
    assert!(second.terminate().await.success());
}
