//! Debates against a scripted fake AI provider (`support::provider`): both
//! wire formats, the OpenRouter fallback, timeouts, failures and missing
//! keys; `lifecycle` holds the breaker, the pending queue, and crash-resume
//! and SIGTERM of the real binary.

mod leases;
mod lifecycle;
mod remote_cli;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::serve::{Spawned, spawn_with};
use crate::support::provider::{
    ANTHROPIC_KEY, ANTHROPIC_TOKENS, Behavior, FakeProvider, OPENAI_KEY, OPENAI_TOKENS,
    OPENROUTER_KEY, Wire, create_debate, echoed_model, get, metric, post_debate, quiet_limits,
    wait_finished,
};
use crate::support::{Kind, LoopbackServer, client, on_both_backends};

on_both_backends! {
    a_debate_runs_over_both_wire_formats => a_debate_runs_over_both_wire_formats;
    a_429_falls_back_to_openrouter => a_429_falls_back_to_openrouter;
    a_429_without_openrouter_fails_only_that_agent => a_429_without_openrouter_fails_only_that_agent;
    a_slow_agent_times_out => a_slow_agent_times_out;
    a_debate_whose_agents_all_fail_fails => a_debate_whose_agents_all_fail_fails;
    malformed_answers_fail_their_agent => malformed_answers_fail_their_agent;
    a_missing_key_is_named_and_demo_agents_still_work => a_missing_key_is_named_and_demo_agents_still_work;
    local_agents_finish_after_a_provider_agent_fails => local_agents_finish_after_a_provider_agent_fails;
}

/// The service in-process with `env`; on PostgreSQL with a NATS bus too.
pub(crate) async fn serve(
    kind: Kind,
    env: Vec<(String, String)>,
) -> (Spawned, Option<LoopbackServer>) {
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

pub(crate) fn with(
    mut env: Vec<(String, String)>,
    extra: &[(&str, &str)],
) -> Vec<(String, String)> {
    env.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    env
}

pub(crate) fn list(value: &Value) -> &Vec<Value> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
}

/// `agent/round/phase` of every message in a debate detail.
pub(crate) fn message_turns(detail: &Value) -> Vec<String> {
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
pub(crate) fn failures(detail: &Value) -> Vec<(String, String)> {
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

pub(crate) fn time(value: &Value) -> DateTime<Utc> {
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

/// Once the only provider agent has failed, the demo agents left answer
/// locally: the rest of the debate is recorded without waiting on anything,
/// every remaining turn exactly once and in order.
async fn local_agents_finish_after_a_provider_agent_fails(kind: Kind) {
    let fake = FakeProvider::start().await;
    fake.script(|_| Behavior::RateLimited);
    let (app, _nats) = serve(kind, fake.env()).await;
    let c = client();
    let id = create_debate(&c, &app.base, &["demo-a", "claude", "demo-b"], 2).await;
    let detail = wait_finished(&c, &app.base, &id).await;
    assert_eq!(detail["status"], "completed", "{detail}");
    assert_eq!(
        failures(&detail),
        [("claude".to_owned(), "rate_limited".to_owned())]
    );
    let expected: Vec<String> = [
        "1/opening",
        "1/critique",
        "1/revision",
        "2/critique",
        "2/revision",
    ]
    .iter()
    .flat_map(|turn| {
        let (round, phase) = turn.split_once('/').unwrap();
        ["demo-a", "demo-b"].map(|agent| format!("{agent}/{round}/{phase}"))
    })
    .collect();
    // The two agents of a phase answer at once and are recorded as they
    // finish: within a phase, in either order.
    let mut turns = message_turns(&detail);
    turns.chunks_mut(2).for_each(<[String]>::sort);
    assert_eq!(turns, expected, "{detail}");
    assert_eq!(
        fake.calls().len(),
        1,
        "only claude's opening reached the provider"
    );
    let (status, consensus) = get(&c, &app.base, &format!("/api/debates/{id}/consensus")).await;
    assert_eq!(status, 200, "{consensus}");
    assert_eq!(consensus["failed_agents"], json!(["claude"]));
    let voters: Vec<&Value> = list(&consensus["votes"])
        .iter()
        .map(|v| &v["agent"])
        .collect();
    assert_eq!(voters, [&json!("demo-a"), &json!("demo-b")]);
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
