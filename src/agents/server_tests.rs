//! Calls through [`Agents`] against a throwaway local HTTP server, to check
//! what goes on the wire (paths, auth headers) and the retry, breaker,
//! timeout and fallback paths end to end.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use serde_json::Value;

use super::route::tests::settings;
use super::*;

/// One request the server saw.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    headers: HeaderMap,
    body: Value,
}

/// Answers from a queue (the last answer repeats) and records every request.
#[derive(Default)]
struct Mock {
    answers: Mutex<VecDeque<(u16, &'static str, Duration)>>,
    seen: Mutex<Vec<Seen>>,
}

impl Mock {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn answer(
    State(mock): State<Arc<Mock>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    mock.seen.lock().unwrap().push(Seen {
        path: uri.path().to_owned(),
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    let (status, text, delay) = {
        let mut answers = mock.answers.lock().unwrap();
        let next = *answers.front().unwrap();
        if answers.len() > 1 {
            answers.pop_front();
        }
        next
    };
    tokio::time::sleep(delay).await;
    (StatusCode::from_u16(status).unwrap(), text.to_owned())
}

/// Starts a server answering `answers` in turn; returns its base URL.
async fn serve(answers: &[(u16, &'static str)]) -> (String, Arc<Mock>) {
    serve_slow(answers, Duration::ZERO).await
}

async fn serve_slow(answers: &[(u16, &'static str)], delay: Duration) -> (String, Arc<Mock>) {
    let mock = Arc::new(Mock::default());
    mock.answers
        .lock()
        .unwrap()
        .extend(answers.iter().map(|(s, t)| (*s, *t, delay)));
    let app = axum::Router::new()
        .fallback(answer)
        .with_state(mock.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}"), mock)
}

fn turn(agent: &str) -> Turn {
    Turn {
        topic: "Is tea better than coffee?".to_owned(),
        context: None,
        agent: agent.to_owned(),
        round: 1,
        rounds: 2,
        task: Task::Opening,
    }
}

fn header<'a>(seen: &'a Seen, name: &str) -> Option<&'a str> {
    seen.headers.get(name).and_then(|v| v.to_str().ok())
}

const ANTHROPIC_OK: &str = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Tea."}],"stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":3}}"#;
const OPENAI_OK: &str = r#"{"id":"c","object":"chat.completion","model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"Coffee."},"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":4,"total_tokens":24}}"#;
const OPENROUTER_OK: &str = r#"{"id":"gen-1","model":"openai/gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Either."},"finish_reason":"stop"}],"usage":{"prompt_tokens":21,"completion_tokens":2}}"#;
const GEMINI_OK: &str = r#"{"candidates":[{"content":{"parts":[{"text":"Both."}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":2},"modelVersion":"gemini-2.5-pro"}"#;
const QUOTA: &str = r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;

#[tokio::test]
async fn anthropic_calls_send_the_key_and_version_and_parse() {
    let (url, mock) = serve(&[(200, ANTHROPIC_OK)]).await;
    let mut s = settings(true);
    s.anthropic.base_url = url;
    let reply = Agents::new(&s).call(&turn("claude")).await.unwrap();
    assert_eq!(reply.content, "Tea.");
    assert_eq!(
        (
            reply.usage.provider.as_str(),
            reply.usage.model.as_str(),
            reply.usage.tokens_in,
            reply.usage.tokens_out,
            reply.usage.fallback
        ),
        ("anthropic", "claude-sonnet-4-5-20250929", 12, 3, false)
    );
    let seen = &mock.seen()[0];
    assert_eq!(seen.path, "/v1/messages");
    assert_eq!(header(seen, "x-api-key"), Some("k"));
    assert_eq!(header(seen, "anthropic-version"), Some("2023-06-01"));
    assert_eq!(header(seen, "authorization"), None);
    assert_eq!(seen.body["model"], "claude-sonnet-4-5");
    assert!(seen.body["system"].as_str().unwrap().contains("claude"));
}

#[tokio::test]
async fn openai_style_calls_send_a_bearer_and_compatible_ones_only_if_keyed() {
    let (url, mock) = serve(&[(200, OPENAI_OK)]).await;
    let mut s = settings(true);
    s.openai.base_url = format!("{url}/v1");
    s.compatible = Some(crate::config::ProviderSettings {
        key: None,
        base_url: format!("{url}/local/v1"),
        max_tokens: 1024,
    });
    let agents = Agents::new(&s);
    let reply = agents.call(&turn("gpt-4o-mini")).await.unwrap();
    assert_eq!(
        (
            reply.content.as_str(),
            reply.usage.provider.as_str(),
            reply.usage.tokens_in
        ),
        ("Coffee.", "openai", 20)
    );
    agents.call(&turn("ollama:llama3.1")).await.unwrap();
    let seen = mock.seen();
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(header(&seen[0], "authorization"), Some("Bearer k"));
    assert_eq!(seen[0].body["model"], "gpt-4o-mini");
    assert_eq!(seen[1].path, "/local/v1/chat/completions");
    assert_eq!(header(&seen[1], "authorization"), None);
    assert_eq!(seen[1].body["model"], "llama3.1");
}

#[tokio::test]
async fn each_call_asks_for_the_deployment_s_most_tokens() {
    let (url, mock) = serve(&[(200, OPENAI_OK)]).await;
    let mut s = settings(true);
    s.openai.base_url = format!("{url}/v1");
    s.openai.max_tokens = 77;
    let agents = Agents::new(&s);
    agents.call(&turn("gpt-4o-mini")).await.unwrap();
    assert_eq!(mock.seen()[0].body["max_completion_tokens"], 77);
}

#[tokio::test]
async fn gemini_calls_put_the_key_in_a_header_and_the_model_in_the_path() {
    let (url, mock) = serve(&[(200, GEMINI_OK)]).await;
    let mut s = settings(true);
    s.gemini.base_url = format!("{url}/v1beta");
    let reply = Agents::new(&s).call(&turn("gemini")).await.unwrap();
    assert_eq!(
        (reply.content.as_str(), reply.usage.tokens_out),
        ("Both.", 2)
    );
    let seen = &mock.seen()[0];
    assert_eq!(seen.path, "/v1beta/models/gemini-2.5-pro:generateContent");
    assert_eq!(header(seen, "x-goog-api-key"), Some("k"));
}

#[tokio::test]
async fn a_quota_error_falls_back_to_openrouter_with_the_vendor_prefix() {
    let (openai_url, openai) = serve(&[(429, QUOTA)]).await;
    let (router_url, router) = serve(&[(200, OPENROUTER_OK)]).await;
    let mut s = settings(true);
    s.openai.base_url = openai_url;
    s.openrouter.base_url = router_url;
    let agents = Agents::new(&s);
    let reply = agents.call(&turn("gpt")).await.unwrap();
    assert_eq!(
        (reply.usage.provider.as_str(), reply.usage.fallback),
        ("openrouter", true)
    );
    assert_eq!(reply.content, "Either.");
    assert_eq!(openai.seen().len(), 1, "no retry on 429");
    assert_eq!(router.seen()[0].body["model"], "openai/gpt-4o");
    let status = &agents.breakers()[0];
    assert_eq!((status.total_successes, status.total_failures), (1, 0));

    // Without an OpenRouter key the throttle itself comes back, uncounted.
    s.openrouter.key = None;
    let agents = Agents::new(&s);
    let error = agents.call(&turn("gpt")).await.unwrap_err();
    assert_eq!(
        error,
        AgentError::Quota {
            provider: Provider::Openai
        }
    );
    assert_eq!(agents.breakers()[0].total_failures, 0);
}

#[tokio::test]
async fn a_503_is_retried_once_and_each_failure_counts() {
    let (url, mock) = serve(&[(503, "busy"), (200, OPENAI_OK)]).await;
    let mut s = settings(true);
    s.openai.base_url = url;
    let agents = Agents::new(&s);
    assert!(agents.call(&turn("gpt")).await.is_ok());
    assert_eq!(mock.seen().len(), 2);
    let status = &agents.breakers()[0];
    assert_eq!(
        (
            status.agent.as_str(),
            status.total_failures,
            status.total_successes
        ),
        ("gpt", 1, 1)
    );
}

#[tokio::test]
async fn five_failures_open_the_breaker_and_the_next_call_stays_local() {
    let (url, mock) = serve(&[(400, r#"{"error":{"message":"bad model"}}"#)]).await;
    let mut s = settings(true);
    s.mistral.base_url = url;
    let agents = Agents::new(&s);
    for _ in 0..5 {
        let error = agents.call(&turn("mistral")).await.unwrap_err();
        assert_eq!(error.to_string(), "mistral answered HTTP 400: bad model");
    }
    let error = agents.call(&turn("mistral")).await.unwrap_err();
    assert_eq!(error.code(), "circuit_open");
    assert_eq!(mock.seen().len(), 5);
    let status = &agents.breakers()[0];
    assert_eq!((status.state, status.retry_in_seconds), ("open", Some(60)));
}

#[tokio::test]
async fn a_slow_provider_times_out() {
    let (url, _mock) = serve_slow(&[(200, OPENAI_OK)], Duration::from_secs(3)).await;
    let mut s = settings(true);
    s.xai.base_url = url;
    s.agent_timeout = Duration::from_millis(300);
    let agents = Agents::new(&s);
    let error = agents.call(&turn("grok")).await.unwrap_err();
    assert_eq!(error, AgentError::Timeout { seconds: 1 });
    assert_eq!(agents.breakers()[0].total_failures, 1);
}

#[tokio::test]
async fn demo_and_unusable_names_need_no_network() {
    let agents = Agents::new(&settings(false));
    let reply = agents.call(&turn("demo-a")).await.unwrap();
    assert_eq!(reply.usage.provider, "demo");
    assert!(agents.breakers().is_empty());
    let error = agents.call(&turn("claude")).await.unwrap_err();
    assert_eq!(error.code(), "not_configured");
    assert!(error.to_string().contains("ANTHROPIC_API_KEY"));
    assert_eq!(
        agents.call(&turn("nobody")).await.unwrap_err().code(),
        "not_configured"
    );
    let providers = agents.providers();
    assert_eq!(providers.len(), 8);
    assert!(
        providers
            .iter()
            .all(|p| p.configured == (p.provider == Provider::Demo))
    );
}

#[tokio::test]
async fn a_refused_connection_is_a_network_error_retried_once() {
    // Port 1 on loopback: nothing listens there, so the connect fails fast.
    let agents = Agents::new(&settings(true));
    let error = agents.call(&turn("claude")).await.unwrap_err();
    assert_eq!(error.code(), "network");
    assert!(!error.to_string().contains("127.0.0.1"), "{error}");
    assert_eq!(agents.breakers()[0].total_failures, 2);
}
