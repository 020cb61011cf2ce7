//! The AI-provider layer: turns a debate's [`Turn`] into a [`Reply`] from
//! the agent it names — a demo agent, or a real provider reached with a
//! timeout, a retry, a per-agent circuit breaker and the OpenRouter fallback.

pub mod demo;
pub mod prompt;
pub mod stream;
pub mod turn;

mod anthropic;
mod breaker;
mod error;
mod fallback;
mod gemini;
mod names;
mod openai;
mod route;
mod transport;

#[cfg(test)]
mod server_tests;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;

pub use breaker::BreakerStatus;
pub use error::{AgentError, ResolveError};
pub use route::{Provider, Route};
pub use stream::{Chunk, OnText, Silent};
pub use turn::{Position, Reply, Task, Turn, Usage};

use breaker::{Breakers, Outcome};
use names::NamePattern;
use prompt::Prompt;
use stream::Emitter;
use transport::Parsed;

use crate::config::AgentSettings;

/// Pause before the one retry of a transient failure.
const RETRY_DELAY: Duration = Duration::from_millis(200);
/// How many pieces a demo agent writes its answer in.
const DEMO_PIECES: usize = 4;
/// Longest agent name kept in a metrics label: names are free text.
const LABEL_CAP: usize = 64;

/// One provider as the status API shows it.
#[derive(Clone, Debug, Serialize)]
pub struct ProviderStatus {
    pub provider: Provider,
    /// Whether agents of this provider can be called now.
    pub configured: bool,
    /// The variable that makes it configured (`None` for demo).
    pub variable: Option<&'static str>,
    pub default_model: String,
    /// Where calls go; empty for demo and an unset compatible server.
    pub base_url: String,
}

/// The agents registry: settings, one HTTP client and the breakers.
#[derive(Clone, Debug)]
pub struct Agents {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    settings: AgentSettings,
    http: reqwest::Client,
    breakers: Breakers,
    names: NamePattern,
}

/// A provider's answer and who actually gave it.
struct Answer {
    parsed: Parsed,
    provider: Provider,
    model: String,
    fallback: bool,
}

impl Agents {
    pub fn new(settings: &AgentSettings) -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("agon/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "could not build the tuned HTTP client; using the default");
                reqwest::Client::new()
            });
        LABEL_NAMES.store(settings.max_breakers, Ordering::Relaxed);
        Self {
            inner: Arc::new(Inner {
                settings: settings.clone(),
                http,
                breakers: Breakers::new(
                    breaker::Policy {
                        failures_to_open: settings.breaker_failures,
                        recovery: settings.breaker_recovery,
                        successes_to_close: settings.breaker_successes,
                    },
                    settings.max_breakers,
                ),
                names: NamePattern::new(|provider| provider.configured(settings)),
            }),
        }
    }

    /// Checks that an agent name can be used now. Demo names always can.
    pub fn resolve(&self, name: &str) -> Result<Route, ResolveError> {
        route::resolve(name, &self.inner.settings)
    }

    /// Whether agent `name` answers in this process, with no provider call
    /// (demo agents): its answer is ready at once and costs nothing to redo.
    /// Not so when demo agents write with a pause (`SERVICE_DEMO_DELTA_DELAY_MS`).
    pub fn answers_locally(&self, name: &str) -> bool {
        self.inner.settings.demo_delta_delay.is_zero()
            && matches!(self.resolve(name), Ok(route) if route.provider == Provider::Demo)
    }

    /// Hands a locally made `reply` to `on_text` in the pieces a demo agent
    /// writes, at once.
    pub fn write_locally(reply: &Reply, on_text: &dyn OnText) {
        let emitter = Emitter::new(on_text);
        emitter.next_attempt();
        for piece in stream::pieces(&reply.content, DEMO_PIECES) {
            emitter.text(piece);
        }
    }

    /// Whether every agent of `names` [answers locally](Agents::answers_locally).
    pub fn all_answer_locally(&self, names: &[String]) -> bool {
        names.iter().all(|name| self.answers_locally(name))
    }

    /// The answer to `turn` of an agent that [answers
    /// locally](Agents::answers_locally); `None` for one that needs a provider.
    pub fn call_locally(&self, turn: &Turn) -> Option<Reply> {
        let started = Instant::now();
        self.answers_locally(&turn.agent)
            .then(|| local_reply(turn, started))
    }

    /// Calls the agent named `turn.agent`: demo names answer locally; real
    /// providers go through the breaker, the timeout, one retry of
    /// transient failures and the OpenRouter fallback. Never panics.
    pub async fn call(&self, turn: &Turn) -> Result<Reply, AgentError> {
        self.call_streaming(turn, &Silent).await
    }

    /// [`Agents::call`], handing the text to `on_text` as it is generated
    /// (each retry or fallback starts it afresh under a new attempt). Demo
    /// agents write theirs in a few pieces, `SERVICE_DEMO_DELTA_DELAY_MS` apart.
    pub async fn call_streaming(
        &self,
        turn: &Turn,
        on_text: &dyn OnText,
    ) -> Result<Reply, AgentError> {
        let started = Instant::now();
        let agent = turn.agent.as_str();
        let route = match self.resolve(agent) {
            Ok(route) => route,
            Err(e) => {
                let error = AgentError::NotConfigured {
                    agent: agent.to_owned(),
                    message: e.to_string(),
                };
                record_failure(agent, "none", &error);
                return Err(error);
            }
        };
        if route.provider == Provider::Demo {
            let delay = self.inner.settings.demo_delta_delay;
            let reply = demo::respond(turn);
            let emitter = Emitter::new(on_text);
            emitter.next_attempt();
            for piece in stream::pieces(&reply.content, DEMO_PIECES) {
                tokio::time::sleep(delay).await;
                emitter.text(piece);
            }
            return Ok(finish_local(turn, reply, started));
        }
        let emitter = Emitter::new(on_text);
        match self
            .inner
            .call_provider(agent, &route, turn, &emitter)
            .await
        {
            Ok(answer) => {
                let reply = Reply {
                    content: answer.parsed.text,
                    usage: Usage {
                        provider: answer.provider.as_str().to_owned(),
                        model: answer.model,
                        tokens_in: answer.parsed.tokens_in,
                        tokens_out: answer.parsed.tokens_out,
                        latency_ms: millis(started.elapsed()),
                        fallback: answer.fallback,
                    },
                };
                record_success(agent, &reply, started.elapsed());
                Ok(reply)
            }
            Err(error) => {
                tracing::warn!(agent, provider = %route.provider, code = error.code(), %error, "agent call failed");
                record_failure(agent, route.provider.as_str(), &error);
                Err(error)
            }
        }
    }

    /// Every breaker seen so far (one per agent name that made a call), sorted by agent.
    pub fn breakers(&self) -> Vec<BreakerStatus> {
        self.inner.breakers.statuses(Instant::now())
    }

    /// A regular expression for the agent names this deployment seats, in
    /// the spelling the HTTP API takes (see [`NamePattern`]).
    pub fn name_pattern(&self) -> &str {
        self.inner.names.as_str()
    }

    /// Whether `name`, as written, matches [`Agents::name_pattern`].
    pub fn spelled_as_documented(&self, name: &str) -> bool {
        self.inner.names.is_match(name)
    }

    /// Every provider, with whether it is configured and its default model.
    pub fn providers(&self) -> Vec<ProviderStatus> {
        let settings = &self.inner.settings;
        Provider::ALL
            .iter()
            .map(|&provider| ProviderStatus {
                provider,
                configured: provider.configured(settings),
                variable: provider.key_variable(),
                default_model: provider.default_model().to_owned(),
                base_url: provider
                    .settings(settings)
                    .map(|p| p.base_url.clone())
                    .unwrap_or_default(),
            })
            .collect()
    }
}

impl Inner {
    async fn call_provider(
        &self,
        agent: &str,
        route: &Route,
        turn: &Turn,
        emitter: &Emitter<'_>,
    ) -> Result<Answer, AgentError> {
        if let Err(wait) = self.breakers.admit(agent, Instant::now()) {
            return Err(AgentError::CircuitOpen {
                agent: agent.to_owned(),
                retry_in_seconds: breaker::whole_seconds(wait).max(1),
            });
        }
        let prompt = prompt::render(turn);
        let limit = self.settings.agent_timeout;
        match tokio::time::timeout(limit, self.attempts(agent, route, &prompt, emitter)).await {
            Ok(result) => result,
            Err(_) => {
                // Attempts record their own outcome; the one cut short did not.
                self.breakers
                    .record(agent, Outcome::Failure, Instant::now());
                Err(AgentError::Timeout {
                    seconds: breaker::whole_seconds(limit),
                })
            }
        }
    }

    /// The provider, once more on a transient failure, then OpenRouter on
    /// throttling. Every attempt counts for the breaker as it ends.
    async fn attempts(
        &self,
        agent: &str,
        route: &Route,
        prompt: &Prompt,
        emitter: &Emitter<'_>,
    ) -> Result<Answer, AgentError> {
        emitter.next_attempt();
        let mut result = self.once(agent, route, prompt, emitter).await;
        self.breakers
            .record(agent, outcome(&result), Instant::now());
        if matches!(&result, Err(e) if e.is_retryable()) {
            tokio::time::sleep(RETRY_DELAY).await;
            emitter.next_attempt();
            result = self.once(agent, route, prompt, emitter).await;
            self.breakers
                .record(agent, outcome(&result), Instant::now());
        }
        match result {
            Ok(parsed) => Ok(Answer {
                model: parsed.model.clone().unwrap_or_else(|| route.model.clone()),
                parsed,
                provider: route.provider,
                fallback: false,
            }),
            Err(e) if fallback::applies(route.provider, &e, &self.settings) => {
                emitter.next_attempt();
                let result = fallback::call(
                    &self.http,
                    &self.settings,
                    route.provider,
                    &route.model,
                    prompt,
                    emitter,
                )
                .await;
                let outcome = match &result {
                    Ok(_) => Outcome::Success,
                    Err(_) => Outcome::Failure,
                };
                self.breakers.record(agent, outcome, Instant::now());
                result.map(|(parsed, model)| Answer {
                    model: parsed.model.clone().unwrap_or(model),
                    parsed,
                    provider: Provider::Openrouter,
                    fallback: true,
                })
            }
            Err(e) => Err(e),
        }
    }

    async fn once(
        &self,
        agent: &str,
        route: &Route,
        prompt: &Prompt,
        emitter: &Emitter<'_>,
    ) -> Result<Parsed, AgentError> {
        let provider = route.provider;
        let Some(settings) = provider.settings(&self.settings) else {
            return Err(AgentError::NotConfigured {
                agent: agent.to_owned(),
                message: format!("provider {provider} is not configured"),
            });
        };
        let model = route.model.as_str();
        match provider {
            Provider::Anthropic => {
                anthropic::complete(&self.http, settings, model, prompt, emitter).await
            }
            Provider::Gemini => {
                gemini::complete(&self.http, settings, model, prompt, emitter).await
            }
            Provider::Openai
            | Provider::Openrouter
            | Provider::Mistral
            | Provider::Xai
            | Provider::Compatible => {
                openai::complete(&self.http, provider, settings, model, prompt, emitter).await
            }
            Provider::Demo => Err(AgentError::NotConfigured {
                agent: agent.to_owned(),
                message: "demo agents make no provider calls".to_owned(),
            }),
        }
    }
}

fn outcome<T>(result: &Result<T, AgentError>) -> Outcome {
    match result {
        Ok(_) => Outcome::Success,
        Err(e) if e.is_throttle() => Outcome::Neutral,
        Err(_) => Outcome::Failure,
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// An agent name fit for a metrics label: bounded, on a char boundary, and
/// `other` once `SERVICE_MAX_AGENT_BREAKERS` names have labels of their own
/// (names are the caller's, and each label set lives as long as the process).
pub(crate) fn label(agent: &str) -> String {
    LABELS.label(agent, LABEL_NAMES.load(Ordering::Relaxed))
}

/// Agent names given a label of their own, at most a limit of them.
struct Labels(Mutex<BTreeSet<String>>);

static LABELS: Labels = Labels(Mutex::new(BTreeSet::new()));
static LABEL_NAMES: AtomicUsize = AtomicUsize::new(1024);
/// The label shared by names past the limit.
const OTHER_LABEL: &str = "other";

impl Labels {
    fn label(&self, agent: &str, limit: usize) -> String {
        let name = match agent.char_indices().nth(LABEL_CAP) {
            Some((cut, _)) => agent[..cut].to_owned(),
            None => agent.to_owned(),
        };
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.contains(&name) {
            return name;
        }
        if seen.len() >= limit {
            return OTHER_LABEL.to_owned();
        }
        seen.insert(name.clone());
        name
    }
}

/// A demo agent's answer to `turn`, counted like a provider's.
fn local_reply(turn: &Turn, started: Instant) -> Reply {
    finish_local(turn, demo::respond(turn), started)
}

fn finish_local(turn: &Turn, mut reply: Reply, started: Instant) -> Reply {
    reply.usage.latency_ms = millis(started.elapsed());
    record_success(&turn.agent, &reply, started.elapsed());
    reply
}

fn record_success(agent: &str, reply: &Reply, elapsed: Duration) {
    let agent = label(agent);
    let provider = reply.usage.provider.clone();
    metrics::counter!("service_agent_calls_total", "agent" => agent.clone(), "provider" => provider.clone(), "outcome" => "success").increment(1);
    metrics::counter!("service_agent_tokens_total", "agent" => agent.clone(), "provider" => provider.clone(), "direction" => "in").increment(reply.usage.tokens_in);
    metrics::counter!("service_agent_tokens_total", "agent" => agent.clone(), "provider" => provider.clone(), "direction" => "out").increment(reply.usage.tokens_out);
    metrics::histogram!("service_agent_latency_seconds", "agent" => agent, "provider" => provider)
        .record(elapsed.as_secs_f64());
}

fn record_failure(agent: &str, provider: &str, error: &AgentError) {
    metrics::counter!("service_agent_calls_total", "agent" => label(agent), "provider" => provider.to_owned(), "outcome" => error.code()).increment(1);
}

/// Registers help text for the metrics this layer produces; call once after
/// the recorder is installed.
pub fn describe_metrics() {
    metrics::describe_counter!(
        "service_agent_calls_total",
        "Agent calls, by agent, provider and outcome (success or an error code)"
    );
    metrics::describe_counter!(
        "service_agent_tokens_total",
        "Tokens sent (in) and received (out), by agent and provider"
    );
    metrics::describe_histogram!(
        "service_agent_latency_seconds",
        metrics::Unit::Seconds,
        "Duration of successful agent calls, by agent and provider"
    );
    metrics::describe_gauge!(
        "service_circuit_breaker_state",
        "Per-agent circuit breaker: 0 closed, 1 half-open, 2 open"
    );
    metrics::describe_counter!(
        "service_fallback_activations_total",
        "OpenRouter fallbacks started after a 429 or quota error, by original provider"
    );
    metrics::describe_counter!(
        "service_fallback_success_total",
        "OpenRouter fallbacks that answered, by original provider"
    );
    metrics::describe_histogram!(
        "service_fallback_latency_seconds",
        metrics::Unit::Seconds,
        "Duration of OpenRouter fallback calls, by original provider"
    );
}
