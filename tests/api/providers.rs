//! Debates against a scripted fake AI provider (`support::provider`): both
//! wire formats, the OpenRouter fallback, the circuit breaker, timeouts,
//! failures, the pending queue, and crash-resume and SIGTERM of the binary.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::serve::{Spawned, spawn_with};
use crate::support::provider::{
    ANTHROPIC_KEY, ANTHROPIC_TOKENS, Behavior, Binary, FakeProvider, OPENAI_KEY, OPENAI_TOKENS,
    OPENROUTER_KEY, Wire, create_debate, echoed_model, get, metric, post_debate, quiet_limits,
    wait_debate, wait_finished,
};
use crate::support::{Kind, LoopbackServer, client, on_both_backends};

on_both_backends! {
    a_debate_runs_over_both_wire_formats => a_debate_runs_over_both_wire_formats;
    a_429_falls_back_to_openrouter => a_429_falls_back_to_openrouter;
    a_429_without_openrouter_fails_only_that_agent => a_429_without_openrouter_fails_only_that_agent;
    the_breaker_opens_half_opens_and_closes => the_breaker_opens_half_opens_and_closes;
    a_slow_agent_times_out => a_slow_agent_times_out;
    a_debate_whose_agents_all_fail_fails => a_debate_whose_agents_all_fail_fails;
    malformed_answers_fail_their_agent => malformed_answers_fail_their_agent;
    a_killed_binary_resumes_without_repeating_recorded_turns => a_killed_binary_resumes_without_repeating_recorded_turns;
    debates_over_the_limit_wait_pending_in_creation_order => debates_over_the_limit_wait_pending_in_creation_order;
    sigterm_lets_the_running_debate_finish => sigterm_lets_the_running_debate_finish;
    a_missing_key_is_named_and_demo_agents_still_work => a_missing_key_is_named_and_demo_agents_still_work;
}

/// The service in-process with `env`; on PostgreSQL with a NATS bus too.
async fn serve(kind: Kind, env: Vec<(String, String)>) -> (Spawned, Option<LoopbackServer>) {
    let nats = match kind {
        Kind::Postgres => Some(LoopbackServer::nats().await),
        Kind::Sqlite => None,
    };
    let mut vars = env;
    vars.extend(quiet_limits());
    if let Some(nats) = &nats {
        vars.push(("SERVICE_NATS_URL".into(), nats.url()));
    }
    let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    (spawn_with(kind, &refs).await, nats)
}

fn with(mut env: Vec<(String, String)>, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    env.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    env
}

fn list(value: &Value) -> &Vec<Value> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
}

/// `agent/round/phase` of every message in a debate detail.
fn message_turns(detail: &Value) -> Vec<String> {
    list(&detail["messages"])
        .iter()
        .map(|m| {
            format!(
                "{}/{}/{}",
                m["agent"].as_str().unwrap(),
                m["round"],
                m["phase"].as_str().unwrap()
            )
        })
        .collect()
}

/// The failures a detail lists, as (agent, code).
fn failures(detail: &Value) -> Vec<(String, String)> {
    list(&detail["failures"])
        .iter()
        .map(|f| {
            (
                f["agent"].as_str().unwrap().to_owned(),
                f["code"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn time(value: &Value) -> DateTime<Utc> {
    value
        .as_str()
        .unwrap_or_else(|| panic!("no time: {value}"))
        .parse()
        .unwrap()
}

async fn a_debate_runs_over_both_wire_formats(kind: Kind) {
    let fake = FakeProvider::start().await;
    let (app, _nats) = serve(kind, fake.env()).await;
    let c = client();
    let id = create_debate(&c, &app.base, &["claude", "gpt-4o"], 1).await;
    let detail = wait_finished(&c, &app.base, &id).await;
    assert_eq!(detail["status"], "completed", "{detail}");

    let messages = list(&detail["messages"]);
    assert_eq!(
        messages.len(),
        6,
        "opening, critique and revision for each: {detail}"
    );
    for m in messages {
        let (provider, model, tokens) = match m["agent"].as_str().unwrap() {
            "claude" => (
                "anthropic",
                echoed_model(Wire::Anthropic, "claude-sonnet-4-5"),
                ANTHROPIC_TOKENS,
            ),
            _ => (
                "openai",
                echoed_model(Wire::OpenAi, "gpt-4o"),
                OPENAI_TOKENS,
            ),
        };
        assert_eq!(
            (m["provider"].as_str(), m["model"].as_str()),
            (Some(provider), Some(model.as_str())),
            "{m}"
        );
        assert_eq!(
            (m["tokens_in"].as_u64(), m["tokens_out"].as_u64()),
            (Some(tokens.0), Some(tokens.1))
        );
        assert_eq!(m["fallback"], false);
        let turn = format!(
            "{}/{}/{}",
            m["agent"].as_str().unwrap(),
            m["round"],
            m["phase"].as_str().unwrap()
        );
        assert!(
            m["content"]
                .as_str()
                .unwrap()
                .starts_with(&format!("[{turn}]")),
            "{m}"
        );
    }
    // Synthesis by claude (the first agent) counts too.
    let (a, o) = (ANTHROPIC_TOKENS, OPENAI_TOKENS);
    assert_eq!(detail["tokens_in"].as_u64(), Some(4 * a.0 + 3 * o.0));
    assert_eq!(detail["tokens_out"].as_u64(), Some(4 * a.1 + 3 * o.1));

    let calls = fake.calls();
    assert_eq!(calls.len(), 9, "3 turns each, 1 synthesis, 2 votes");
    assert!(
        fake.turn_counts().values().all(|n| *n == 1),
        "{:?}",
        fake.turn_counts()
    );
    for call in &calls {
        match call.agent.as_str() {
            "claude" => {
                assert_eq!(
                    (call.wire, call.path.as_str()),
                    (Wire::Anthropic, "/v1/messages")
                );
                assert_eq!(
                    (call.key.as_str(), call.model.as_str()),
                    (ANTHROPIC_KEY, "claude-sonnet-4-5")
                );
                assert_eq!(call.anthropic_version.as_deref(), Some("2023-06-01"));
            }
            agent => {
                assert_eq!(agent, "gpt-4o");
                assert_eq!(
                    (call.wire, call.path.as_str()),
                    (Wire::OpenAi, "/v1/chat/completions")
                );
                assert_eq!(call.key, format!("Bearer {OPENAI_KEY}"));
                assert_eq!(call.model, "gpt-4o");
            }
        }
    }
    let critique = calls
        .iter()
        .find(|c| c.turn() == "claude/1/critique")
        .unwrap();
    assert!(
        critique.prompt.contains("### gpt-4o\n[gpt-4o/1/opening]"),
        "{}",
        critique.prompt
    );

    let (status, consensus) = get(&c, &app.base, &format!("/api/debates/{id}/consensus")).await;
    assert_eq!(status, 200, "{consensus}");
    assert_eq!(consensus["status"], "consensus_reached");
    let text = &consensus["consensus"];
    assert!(
        text["summary"]
            .as_str()
            .unwrap()
            .contains(detail["topic"].as_str().unwrap())
    );
    assert_eq!(
        text["key_points"],
        json!(["Shared point drafted by claude", "A second shared point"])
    );
    assert!((0.0..=1.0).contains(&text["confidence"].as_f64().unwrap()));
    assert!(text["disagreements"].is_array());
    assert_eq!(
        consensus["voting_summary"],
        json!({"agree": 2, "agree_with_modifications": 0, "disagree": 0})
    );
    assert_eq!(list(&consensus["votes"]).len(), 2);
    assert_eq!(consensus["failed_agents"], json!([]));
    app.stop.cancel();
}

async fn a_429_falls_back_to_openrouter(kind: Kind) {
    let fake = FakeProvider::start().await;
    fake.script(|c| {
        if c.wire == Wire::Anthropic {
            Behavior::RateLimited
        } else {
            Behavior::Answer
        }
    });
    let (app, _nats) = serve(kind, fake.env_with_openrouter()).await;
    let c = client();
    let id = create_debate(&c, &app.base, &["claude", "gpt-4o"], 1).await;
    let detail = wait_finished(&c, &app.base, &id).await;
    assert_eq!(detail["status"], "completed", "{detail}");
    assert_eq!(detail["failures"], json!([]));
    for m in list(&detail["messages"]) {
        if m["agent"] == "claude" {
            assert_eq!(
                (&m["provider"], &m["fallback"]),
                (&json!("openrouter"), &json!(true)),
                "{m}"
            );
            assert_eq!(
                m["model"],
                echoed_model(Wire::OpenAi, "anthropic/claude-sonnet-4-5")
            );
            assert_eq!(m["tokens_in"].as_u64(), Some(OPENAI_TOKENS.0));
        } else {
            assert_eq!(
                (&m["provider"], &m["fallback"]),
                (&json!("openai"), &json!(false)),
                "{m}"
            );
        }
    }
    let calls = fake.calls();
    let claude: Vec<_> = calls.iter().filter(|c| c.agent == "claude").collect();
    let direct = claude.iter().filter(|c| c.wire == Wire::Anthropic).count();
    let routed: Vec<_> = claude.iter().filter(|c| c.wire == Wire::OpenAi).collect();
    assert_eq!(
        (direct, routed.len()),
        (5, 5),
        "a 429 is not retried; each turn falls back once"
    );
    for call in routed {
        assert_eq!(call.key, format!("Bearer {OPENROUTER_KEY}"));
        assert_eq!(
            (call.model.as_str(), call.x_title.as_deref()),
            ("anthropic/claude-sonnet-4-5", Some("Agon"))
        );
    }
    let activations = metric(
        &c,
        &app.base,
        r#"service_fallback_activations_total{provider="anthropic"}"#,
    )
    .await;
    let successes = metric(
        &c,
        &app.base,
        r#"service_fallback_success_total{provider="anthropic"}"#,
    )
    .await;
    assert!(activations.unwrap_or(0.0) >= 5.0, "{activations:?}");
    assert!(successes.unwrap_or(0.0) >= 5.0, "{successes:?}");
    app.stop.cancel();
}

async fn a_429_without_openrouter_fails_only_that_agent(kind: Kind) {
    let fake = FakeProvider::start().await;
    fake.script(|c| {
        if c.wire == Wire::Anthropic {
            Behavior::RateLimited
        } else {
            Behavior::Answer
        }
    });
    let (app, _nats) = serve(kind, fake.env()).await;
    let c = client();
    let id = create_debate(
        &c,
        &app.base,
        &["claude", "gpt-4o", "openai:gpt-4o-mini"],
        1,
    )
    .await;
    let detail = wait_finished(&c, &app.base, &id).await;
    assert_eq!(detail["status"], "completed", "{detail}");
    assert_eq!(
        failures(&detail),
        [("claude".to_owned(), "rate_limited".to_owned())]
    );
    assert_eq!(
        (
            &detail["failures"][0]["phase"],
            &detail["failures"][0]["round"]
        ),
        (&json!("opening"), &json!(1))
    );
    assert!(
        list(&detail["messages"])
            .iter()
            .all(|m| m["agent"] != "claude")
    );
    assert_eq!(
        fake.calls().iter().filter(|c| c.agent == "claude").count(),
        1
    );
    let (status, consensus) = get(&c, &app.base, &format!("/api/debates/{id}/consensus")).await;
    assert_eq!(status, 200, "{consensus}");
    assert_eq!(consensus["failed_agents"], json!(["claude"]));
    assert_eq!(list(&consensus["votes"]).len(), 2);
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

async fn a_slow_agent_times_out(kind: Kind) {
    let fake = FakeProvider::start().await;
    fake.script(|c| match c.wire {
        Wire::Anthropic => Behavior::slow(3_000),
        Wire::OpenAi => Behavior::Answer,
    });
    let env = with(fake.env(), &[("SERVICE_AGENT_TIMEOUT_SECONDS", "1")]);
    let (app, _nats) = serve(kind, env).await;
    let c = client();
    let id = create_debate(
        &c,
        &app.base,
        &["claude", "gpt-4o", "openai:gpt-4o-mini"],
        1,
    )
    .await;
    let detail = wait_finished(&c, &app.base, &id).await;
    assert_eq!(detail["status"], "completed", "{detail}");
    assert_eq!(
        failures(&detail),
        [("claude".to_owned(), "timeout".to_owned())]
    );
    assert!(
        detail["failures"][0]["error"]
            .as_str()
            .unwrap()
            .contains("1 s"),
        "{detail}"
    );
    assert_eq!(
        fake.calls().iter().filter(|c| c.agent == "claude").count(),
        1
    );
    assert_eq!(list(&detail["consensus"]["votes"]).len(), 2, "{detail}");
    app.stop.cancel();
}

async fn a_debate_whose_agents_all_fail_fails(kind: Kind) {
    let fake = FakeProvider::start().await;
    fake.script(|_| Behavior::ServerError);
    let (app, _nats) = serve(kind, fake.env()).await;
    let c = client();
    let id = create_debate(&c, &app.base, &["claude", "gpt-4o"], 1).await;
    let detail = wait_finished(&c, &app.base, &id).await;
    assert_eq!(detail["status"], "failed", "{detail}");
    let reason = detail["error"].as_str().unwrap();
    assert!(
        reason.contains("claude") && reason.contains("gpt-4o"),
        "{reason}"
    );
    assert!(reason.contains("http_status"), "{reason}");
    let counts = fake.turn_counts();
    assert_eq!(counts.len(), 2, "{counts:?}");
    assert!(
        counts.values().all(|n| *n == 2),
        "one retry of a 500 each: {counts:?}"
    );
    let (status, body) = get(&c, &app.base, &format!("/api/debates/{id}/consensus")).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.to_string().contains("claude"), "{body}");
    app.stop.cancel();
}

async fn malformed_answers_fail_their_agent(kind: Kind) {
    let fake = FakeProvider::start().await;
    fake.script(|c| match c.model.as_str() {
        "claude-sonnet-4-5" => Behavior::Malformed,
        "gpt-4o-mini" => Behavior::Text("   ".to_owned()),
        _ => Behavior::Answer,
    });
    let (app, _nats) = serve(kind, fake.env()).await;
    let c = client();
    let id = create_debate(
        &c,
        &app.base,
        &["claude", "openai:gpt-4o-mini", "gpt-4o"],
        1,
    )
    .await;
    let detail = wait_finished(&c, &app.base, &id).await;
    assert_eq!(detail["status"], "completed", "{detail}");
    let mut failed = failures(&detail);
    failed.sort();
    assert_eq!(
        failed,
        [
            ("claude".to_owned(), "malformed".to_owned()),
            ("openai:gpt-4o-mini".to_owned(), "malformed".to_owned())
        ]
    );
    assert_eq!(
        fake.calls().iter().filter(|c| c.agent != "gpt-4o").count(),
        2,
        "not retried"
    );
    app.stop.cancel();
}

/// Binary environment: the fake, a data directory, and on PostgreSQL a
/// fresh database and a NATS server.
async fn binary_env(
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
    assert_eq!(statuses[1..], ["pending", "pending"]); // TEMP
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (_, pending) = get(&c, &app.base, "/api/debates?status=pending").await;
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

async fn a_missing_key_is_named_and_demo_agents_still_work(kind: Kind) {
    let (app, _nats) = serve(kind, Vec::new()).await;
    let c = client();
    for (agents, variable) in [
        (json!(["claude", "demo-a"]), "ANTHROPIC_API_KEY"),
        (json!(["demo-a", "gpt-4o"]), "OPENAI_API_KEY"),
    ] {
        let (status, body) =
            post_debate(&c, &app.base, &json!({"topic": "Keys", "agents": agents})).await;
        assert_eq!(status, 400, "{body}");
        assert!(body.to_string().contains(variable), "{body}");
    }
    let id = create_debate(&c, &app.base, &["demo-a", "demo-b"], 1).await;
    let detail = wait_finished(&c, &app.base, &id).await;
    assert_eq!(detail["status"], "completed", "{detail}");
    assert!(
        list(&detail["messages"])
            .iter()
            .all(|m| m["provider"] == "demo")
    );
    let (_, health) = get(&c, &app.base, "/api/agents/health").await;
    let anthropic = list(&health["providers"])
        .iter()
        .find(|p| p["provider"] == "anthropic")
        .unwrap()
        .clone();
    assert_eq!(
        (&anthropic["configured"], &anthropic["variable"]),
        (&json!(false), &json!("ANTHROPIC_API_KEY"))
    );
    app.stop.cancel();
}
