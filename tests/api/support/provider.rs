//! A scripted fake AI provider on loopback: a real HTTP server speaking the
//! Anthropic Messages wire (`POST /v1/messages`) and the OpenAI Chat
//! Completions wire (`POST /v1/chat/completions`, also OpenRouter's), which
//! records every request and answers as the test's script says. Also the
//! HTTP helpers the provider tests share: debate creation and polling, and
//! metrics reading.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The keys the fake's environment hands the service, one per provider, so
/// that a test can tell which key reached which server.
pub const ANTHROPIC_KEY: &str = "sk-ant-fake-key";
pub const OPENAI_KEY: &str = "sk-openai-fake-key";
pub const OPENROUTER_KEY: &str = "sk-or-fake-key";
/// Token counts the fake reports, per wire.
pub const ANTHROPIC_TOKENS: (u64, u64) = (123, 45);
pub const OPENAI_TOKENS: (u64, u64) = (67, 89);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Anthropic,
    OpenAi,
}

/// One request as the fake received it.
#[derive(Debug, Clone)]
pub struct Call {
    /// Arrival order, from 0.
    pub n: usize,
    pub wire: Wire,
    pub path: String,
    /// `x-api-key` on the Anthropic wire, `authorization` on the OpenAI wire.
    pub key: String,
    pub anthropic_version: Option<String>,
    pub x_title: Option<String>,
    pub model: String,
    /// The user message.
    pub prompt: String,
    /// Recovered from the prompt: the agent ("You are <agent>, …"), the
    /// phase and round ("Round r of n. Phase: p.") and the topic.
    pub agent: String,
    pub phase: String,
    pub round: u32,
    pub topic: String,
    /// The request asked for a stream (`"stream": true`).
    pub stream: bool,
}

impl Call {
    /// `agent/round/phase`: the debate turn this call answers.
    pub fn turn(&self) -> String {
        format!("{}/{}/{}", self.agent, self.round, self.phase)
    }
}

/// How the fake answers one call.
#[derive(Debug, Clone)]
pub enum Behavior {
    /// A usable answer: SUMMARY/KEY POINTS for synthesis prompts,
    /// VOTE/CONFIDENCE/REASONS for vote prompts, prose otherwise.
    Answer,
    /// 200 with this text as the answer.
    Text(String),
    /// 429 with the provider's real rate-limit error body.
    RateLimited,
    /// 500 with the provider's real server-error body.
    ServerError,
    /// 200 with a body cut off mid-JSON.
    Malformed,
    /// A streamed answer that stops after its first piece, without its
    /// end event: the server closes mid-stream.
    CutOff,
    /// Sleeps, then behaves.
    Slow(Duration, Box<Behavior>),
    /// Waits until [`FakeProvider::release`], then behaves.
    Held(Box<Behavior>),
}

impl Behavior {
    pub fn slow(millis: u64) -> Self {
        Behavior::Slow(Duration::from_millis(millis), Box::new(Behavior::Answer))
    }
}

type Script = Arc<dyn Fn(&Call) -> Behavior + Send + Sync>;

struct Shared {
    script: Mutex<Script>,
    calls: Mutex<Vec<Call>>,
    gate: tokio::sync::watch::Sender<bool>,
}

/// The running fake; stops when dropped.
pub struct FakeProvider {
    /// `http://127.0.0.1:<port>`: the Anthropic base URL.
    pub base: String,
    shared: Arc<Shared>,
    server: JoinHandle<()>,
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeProvider {
    /// Starts a fake that answers every call normally.
    pub async fn start() -> Self {
        let shared = Arc::new(Shared {
            script: Mutex::new(Arc::new(|_: &Call| Behavior::Answer)),
            calls: Mutex::default(),
            gate: tokio::sync::watch::channel(false).0,
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let router = Router::new().fallback(handle).with_state(shared.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self {
            base,
            shared,
            server,
        }
    }

    /// From now on, `script` decides how each call is answered.
    pub fn script(&self, script: impl Fn(&Call) -> Behavior + Send + Sync + 'static) {
        *self.shared.script.lock().unwrap() = Arc::new(script);
    }

    /// Lets every [`Behavior::Held`] call, waiting or to come, proceed.
    pub fn release(&self) {
        self.shared.gate.send_replace(true);
    }

    /// Every call so far, in arrival order.
    pub fn calls(&self) -> Vec<Call> {
        self.shared.calls.lock().unwrap().clone()
    }

    /// How many calls each turn (`agent/round/phase`) got.
    pub fn turn_counts(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for call in self.calls() {
            *counts.entry(call.turn()).or_insert(0) += 1;
        }
        counts
    }

    /// The OpenAI-style base URL (`…/v1`).
    pub fn v1(&self) -> String {
        format!("{}/v1", self.base)
    }

    /// Anthropic and OpenAI keys and base URLs pointing here.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("ANTHROPIC_API_KEY".into(), ANTHROPIC_KEY.into()),
            ("SERVICE_ANTHROPIC_BASE_URL".into(), self.base.clone()),
            ("OPENAI_API_KEY".into(), OPENAI_KEY.into()),
            ("SERVICE_OPENAI_BASE_URL".into(), self.v1()),
        ]
    }

    /// [`env`](Self::env) plus an OpenRouter key and base URL pointing here.
    pub fn env_with_openrouter(&self) -> Vec<(String, String)> {
        let mut env = self.env();
        env.push(("OPENROUTER_API_KEY".into(), OPENROUTER_KEY.into()));
        env.push(("SERVICE_OPENROUTER_BASE_URL".into(), self.v1()));
        env
    }
}

/// The model name the fake reports for a requested `model`.
pub fn echoed_model(wire: Wire, model: &str) -> String {
    match wire {
        Wire::Anthropic => format!("{model}-20250929"),
        Wire::OpenAi => format!("{model}-2024-08-06"),
    }
}

/// The text after `start` up to `end` in `text`.
fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    text.split_once(start)
        .and_then(|(_, rest)| rest.split_once(end).map(|(found, _)| found))
        .unwrap_or("")
}

fn read_call(n: usize, path: &str, headers: &HeaderMap, body: &Value) -> Call {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let anthropic = path.ends_with("/messages");
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let content = |role: &str| {
        messages
            .iter()
            .find(|m| m["role"] == role)
            .and_then(|m| m["content"].as_str())
            .unwrap_or("")
            .to_owned()
    };
    let system = if anthropic {
        body["system"].as_str().unwrap_or("").to_owned()
    } else {
        content("system")
    };
    let prompt = content("user");
    Call {
        n,
        wire: if anthropic {
            Wire::Anthropic
        } else {
            Wire::OpenAi
        },
        path: path.to_owned(),
        key: text(if anthropic {
            "x-api-key"
        } else {
            "authorization"
        })
        .unwrap_or_default(),
        anthropic_version: text("anthropic-version"),
        x_title: text("x-title"),
        model: body["model"].as_str().unwrap_or("").to_owned(),
        agent: between(&system, "You are ", ", one of several").to_owned(),
        phase: between(&prompt, "Phase: ", ".\n").to_owned(),
        round: between(&prompt, "Round ", " of").parse().unwrap_or(0),
        topic: between(&prompt, "Topic: ", "\n").to_owned(),
        stream: body["stream"] == json!(true),
        prompt,
    }
}

/// The answer text a well-behaved model gives to `call`.
pub fn answer_text(call: &Call) -> String {
    match call.phase.as_str() {
        "synthesis" => format!(
            "SUMMARY: The agents broadly agree on {}.\nKEY POINTS:\n- Shared point drafted by {}\n- A second shared point",
            call.topic, call.agent
        ),
        "vote" => format!(
            "VOTE: agree\nCONFIDENCE: 0.8\nREASONS:\n- It matches what {} argued",
            call.agent
        ),
        _ => format!(
            "[{}] {} argues in the {} phase of round {}.",
            call.turn(),
            call.agent,
            call.phase,
            call.round
        ),
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn success(call: &Call, text: &str) -> Response {
    if call.stream {
        return super::sse::event_stream(super::sse::stream_events(call, text, true));
    }
    let body = match call.wire {
        Wire::Anthropic => json!({
            "id": format!("msg_fake_{}", call.n),
            "type": "message",
            "role": "assistant",
            "model": echoed_model(Wire::Anthropic, &call.model),
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": null,
            "usage": {"input_tokens": ANTHROPIC_TOKENS.0, "output_tokens": ANTHROPIC_TOKENS.1},
        }),
        Wire::OpenAi => json!({
            "id": format!("chatcmpl-fake-{}", call.n),
            "object": "chat.completion",
            "created": 1_741_569_952,
            "model": echoed_model(Wire::OpenAi, &call.model),
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": null},
                "logprobs": null,
                "finish_reason": "stop",
            }],
            "usage": {
                "prompt_tokens": OPENAI_TOKENS.0,
                "completion_tokens": OPENAI_TOKENS.1,
                "total_tokens": OPENAI_TOKENS.0 + OPENAI_TOKENS.1,
            },
        }),
    };
    json_response(StatusCode::OK, &body)
}

fn rate_limited(call: &Call) -> Response {
    let body = match call.wire {
        Wire::Anthropic => json!({"type": "error", "error": {"type": "rate_limit_error",
            "message": "This request would exceed the rate limit for your organization of 50 requests per minute."}}),
        Wire::OpenAi => json!({"error": {"message": format!(
            "Rate limit reached for {} in organization org-fake on requests per min (RPM): Limit 500, Used 500, Requested 1.",
            call.model), "type": "requests", "param": null, "code": "rate_limit_exceeded"}}),
    };
    let mut response = json_response(StatusCode::TOO_MANY_REQUESTS, &body);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    response
}

fn server_error(call: &Call) -> Response {
    let body = match call.wire {
        Wire::Anthropic => {
            json!({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}})
        }
        Wire::OpenAi => {
            json!({"error": {"message": "The server had an error while processing your request. Sorry about that!",
            "type": "server_error", "param": null, "code": null}})
        }
    };
    json_response(StatusCode::INTERNAL_SERVER_ERROR, &body)
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let known = path == "/v1/messages" || path == "/v1/chat/completions";
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (call, script) = {
        let mut calls = shared.calls.lock().unwrap();
        let call = read_call(calls.len(), &path, &headers, &request);
        calls.push(call.clone());
        (call, shared.script.lock().unwrap().clone())
    };
    if !known || request.is_null() {
        let body = json!({"error": {"message": format!("fake provider: no route {path} or no JSON body")}});
        return json_response(StatusCode::NOT_FOUND, &body);
    }
    let mut behavior = script(&call);
    loop {
        behavior = match behavior {
            Behavior::Slow(pause, then) => {
                tokio::time::sleep(pause).await;
                *then
            }
            Behavior::Held(then) => {
                let mut gate = shared.gate.subscribe();
                let _ = gate.wait_for(|open| *open).await;
                *then
            }
            Behavior::Answer => return success(&call, &answer_text(&call)),
            Behavior::Text(text) => return success(&call, &text),
            Behavior::RateLimited => return rate_limited(&call),
            Behavior::ServerError => return server_error(&call),
            Behavior::CutOff => {
                let events = super::sse::stream_events(&call, &answer_text(&call), false);
                return super::sse::event_stream(events);
            }
            Behavior::Malformed => {
                let cut = r#"{"id":"msg_fake","type":"message","content":[{"type":"text","te"#;
                return (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "application/json")],
                    cut,
                )
                    .into_response();
            }
        };
    }
}

// ---------------------------------------------------------------------------
// Shared helpers of the provider tests.

/// Environment every provider test's service gets: generous rate limits so
/// polling never trips them.
pub fn quiet_limits() -> Vec<(String, String)> {
    [
        "SERVICE_IP_RATE_LIMIT",
        "SERVICE_RATE_LIMIT",
        "SERVICE_RATE_LIMIT_DEBATE_CREATE",
    ]
    .iter()
    .map(|k| ((*k).to_owned(), "100000".to_owned()))
    .collect()
}

/// `POST /api/debates`; returns the status and body.
pub async fn post_debate(client: &reqwest::Client, base: &str, body: &Value) -> (u16, Value) {
    let response = client
        .post(format!("{base}/api/debates"))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Creates a debate and returns its id, asserting 201.
pub async fn create_debate(
    client: &reqwest::Client,
    base: &str,
    agents: &[&str],
    rounds: u32,
) -> String {
    let body = json!({"topic": format!("Topic {}", uuid::Uuid::new_v4().simple()), "agents": agents, "rounds": rounds});
    let (status, created) = post_debate(client, base, &body).await;
    assert_eq!(status, 201, "{created}");
    created["id"].as_str().unwrap().to_owned()
}

/// GETs `path` and parses the JSON body, with the status.
pub async fn get(client: &reqwest::Client, base: &str, path: &str) -> (u16, Value) {
    let response = client.get(format!("{base}{path}")).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Polls the detail of debate `id` until `done` holds of it (30 s at most).
pub async fn wait_debate(
    client: &reqwest::Client,
    base: &str,
    id: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, detail) = get(client, base, &format!("/api/debates/{id}")).await;
        if status == 200 && done(&detail) {
            return detail;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "debate {id} never got there: {detail}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls until the debate is completed or failed.
pub async fn wait_finished(client: &reqwest::Client, base: &str, id: &str) -> Value {
    wait_debate(client, base, id, |d| {
        d["status"] == "completed" || d["status"] == "failed"
    })
    .await
}

/// The value of the sample `series` (name and labels exactly as rendered) in
/// the Prometheus text of `GET /api/metrics`.
pub async fn metric(client: &reqwest::Client, base: &str, series: &str) -> Option<f64> {
    let text = client
        .get(format!("{base}/api/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}
