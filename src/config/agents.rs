//! AI provider and debate-runner settings (§1, §8.2): provider keys, base
//! URLs, timeouts, the circuit breaker and the concurrency limit.

use std::time::Duration;

use agon_aggregates::debate::Limits;

use super::values::{ConfigError, Secret, Vars};

/// One provider's key and address.
#[derive(Debug, Clone)]
pub struct ProviderSettings {
    /// The key; `None` leaves the provider unavailable.
    pub key: Option<Secret>,
    /// The base URL calls go to (no trailing slash).
    pub base_url: String,
    /// `SERVICE_AGENT_MAX_TOKENS`: the most tokens a call asks the
    /// provider to generate (`max_tokens`, `maxOutputTokens`). Default 1024.
    pub max_tokens: u32,
}

impl ProviderSettings {
    fn read<F: Fn(&str) -> Option<String>>(
        vars: &Vars<F>,
        key_var: &str,
        url_var: &str,
        default_url: &str,
        max_tokens: u32,
    ) -> Self {
        Self {
            max_tokens,
            key: vars.get(key_var).map(Secret::new),
            base_url: vars
                .get(url_var)
                .unwrap_or_else(|| default_url.to_owned())
                .trim_end_matches('/')
                .to_owned(),
        }
    }
}

/// How debates reach their agents and how many run at once.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    /// `ANTHROPIC_API_KEY`, `SERVICE_ANTHROPIC_BASE_URL` (default https://api.anthropic.com).
    pub anthropic: ProviderSettings,
    /// `OPENAI_API_KEY`, `SERVICE_OPENAI_BASE_URL` (default https://api.openai.com/v1).
    pub openai: ProviderSettings,
    /// `OPENROUTER_API_KEY`, `SERVICE_OPENROUTER_BASE_URL` (default https://openrouter.ai/api/v1).
    /// Also the fallback on a 429 or quota error from any other provider.
    pub openrouter: ProviderSettings,
    /// `MISTRAL_API_KEY`, `SERVICE_MISTRAL_BASE_URL` (default https://api.mistral.ai/v1).
    pub mistral: ProviderSettings,
    /// `GEMINI_API_KEY`, `SERVICE_GEMINI_BASE_URL` (default https://generativelanguage.googleapis.com/v1beta).
    pub gemini: ProviderSettings,
    /// `XAI_API_KEY`, `SERVICE_XAI_BASE_URL` (default https://api.x.ai/v1).
    pub xai: ProviderSettings,
    /// `SERVICE_OPENAI_COMPATIBLE_URL` (e.g. http://127.0.0.1:11434/v1 for
    /// Ollama) and optional `SERVICE_OPENAI_COMPATIBLE_KEY`: a local server
    /// speaking the Chat Completions API. Available when the URL is set.
    pub compatible: Option<ProviderSettings>,
    /// `SERVICE_AGENT_TIMEOUT_SECONDS`: longest one agent call may take. Default 90.
    pub agent_timeout: Duration,
    /// `SERVICE_CIRCUIT_BREAKER_RECOVERY_SECONDS`: how long an open breaker
    /// waits before letting a trial call through (half-open). Default 60.
    pub breaker_recovery: Duration,
    /// `SERVICE_CIRCUIT_BREAKER_FAILURES`: consecutive failures that open a
    /// closed breaker. Default 5.
    pub breaker_failures: u32,
    /// `SERVICE_CIRCUIT_BREAKER_SUCCESSES`: consecutive successes that
    /// close a half-open one. Default 2.
    pub breaker_successes: u32,
    /// `SERVICE_MAX_AGENT_BREAKERS`: circuit breakers kept, one per agent
    /// name called (past it resting ones are forgotten), and agent names
    /// with a metrics label of their own (later ones share `other`).
    /// Default 1024.
    pub max_breakers: usize,
    /// `SERVICE_MAX_CONCURRENT_DEBATES`: debates running at once on this
    /// replica; the rest wait as `pending`. Default 20.
    pub max_concurrent_debates: usize,
    /// `SERVICE_DEBATE_LEASE_SECONDS`: on PostgreSQL, how long a replica's
    /// claim on a running debate lasts without renewal before another replica
    /// (or the same one, restarted) may take it over. Default 30.
    pub debate_lease: Duration,
    /// `SERVICE_SHUTDOWN_GRACE_SECONDS`: on SIGTERM, how long running debates
    /// may take to finish before the service stops anyway (they resume at
    /// the next start). Default 120.
    pub shutdown_grace: Duration,
    /// `SERVICE_MAX_TOPIC_CHARS`: longest debate topic, in characters as
    /// sent. Default 2000.
    pub max_topic_chars: usize,
    /// `SERVICE_MAX_CONTEXT_CHARS`: longest debate context, in characters.
    /// Default 20000.
    pub max_context_chars: usize,
    /// `SERVICE_DEBATE_SEARCH_MAX_CHARS`: longest topic search (`q`) on the
    /// debates list, in characters. Default 200.
    pub max_search_chars: usize,
    /// `SERVICE_MAX_AGENTS`, `SERVICE_MAX_ROUNDS`, `SERVICE_MAX_PHASES`,
    /// `SERVICE_MAX_PHASE_CHARS`: how big one debate may be. Defaults 12,
    /// 12, 8, 40; at least what a request naming nothing gets
    /// ([`Limits::LEAST`]).
    pub debate_limits: Limits,
    /// `SERVICE_DEMO_DELTA_DELAY_MS`: the pause before each piece a demo
    /// agent writes (its answer comes in a few `agent.delta` frames, so the
    /// live view works without keys). 0 answers at once, in the append that
    /// records the stage before. Default 20.
    pub demo_delta_delay: Duration,
    /// `SERVICE_DELTA_BUFFER`: streamed text pieces (`agent.delta`) queued
    /// for publishing and kept for sockets that are briefly behind; past it
    /// pieces are dropped, never waited for. Default 1024.
    pub delta_buffer: usize,
}

impl AgentSettings {
    pub(super) fn read<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Self, ConfigError> {
        let max_tokens = vars.within_u32("SERVICE_AGENT_MAX_TOKENS", 1, 1_000_000, 1024)?;
        let compatible = vars
            .get("SERVICE_OPENAI_COMPATIBLE_URL")
            .map(|url| ProviderSettings {
                key: vars.get("SERVICE_OPENAI_COMPATIBLE_KEY").map(Secret::new),
                base_url: url.trim_end_matches('/').to_owned(),
                max_tokens,
            });
        Ok(Self {
            anthropic: ProviderSettings::read(
                vars,
                "ANTHROPIC_API_KEY",
                "SERVICE_ANTHROPIC_BASE_URL",
                "https://api.anthropic.com",
                max_tokens,
            ),
            openai: ProviderSettings::read(
                vars,
                "OPENAI_API_KEY",
                "SERVICE_OPENAI_BASE_URL",
                "https://api.openai.com/v1",
                max_tokens,
            ),
            openrouter: ProviderSettings::read(
                vars,
                "OPENROUTER_API_KEY",
                "SERVICE_OPENROUTER_BASE_URL",
                "https://openrouter.ai/api/v1",
                max_tokens,
            ),
            mistral: ProviderSettings::read(
                vars,
                "MISTRAL_API_KEY",
                "SERVICE_MISTRAL_BASE_URL",
                "https://api.mistral.ai/v1",
                max_tokens,
            ),
            gemini: ProviderSettings::read(
                vars,
                "GEMINI_API_KEY",
                "SERVICE_GEMINI_BASE_URL",
                "https://generativelanguage.googleapis.com/v1beta",
                max_tokens,
            ),
            xai: ProviderSettings::read(
                vars,
                "XAI_API_KEY",
                "SERVICE_XAI_BASE_URL",
                "https://api.x.ai/v1",
                max_tokens,
            ),
            compatible,
            agent_timeout: Duration::from_secs(
                vars.within_u32("SERVICE_AGENT_TIMEOUT_SECONDS", 1, 3_600, 90)?
                    .into(),
            ),
            breaker_recovery: Duration::from_secs(
                vars.within_u32("SERVICE_CIRCUIT_BREAKER_RECOVERY_SECONDS", 1, 86_400, 60)?
                    .into(),
            ),
            breaker_failures: vars.within_u32("SERVICE_CIRCUIT_BREAKER_FAILURES", 1, 1_000, 5)?,
            breaker_successes: vars.within_u32("SERVICE_CIRCUIT_BREAKER_SUCCESSES", 1, 1_000, 2)?,
            max_breakers: vars.within_u32("SERVICE_MAX_AGENT_BREAKERS", 1, 1_000_000, 1024)?
                as usize,
            max_concurrent_debates: vars.within_u32(
                "SERVICE_MAX_CONCURRENT_DEBATES",
                1,
                10_000,
                20,
            )? as usize,
            debate_lease: Duration::from_secs(
                vars.within_u32("SERVICE_DEBATE_LEASE_SECONDS", 1, 3_600, 30)?
                    .into(),
            ),
            shutdown_grace: Duration::from_secs(
                vars.within_u32("SERVICE_SHUTDOWN_GRACE_SECONDS", 1, 86_400, 120)?
                    .into(),
            ),
            max_topic_chars: vars.within_u32("SERVICE_MAX_TOPIC_CHARS", 1, 1_000_000, 2_000)?
                as usize,
            max_context_chars: vars.within_u32(
                "SERVICE_MAX_CONTEXT_CHARS",
                1,
                10_000_000,
                20_000,
            )? as usize,
            max_search_chars: vars.within_u32("SERVICE_DEBATE_SEARCH_MAX_CHARS", 1, 100_000, 200)?
                as usize,
            debate_limits: debate_limits(vars)?,
            demo_delta_delay: Duration::from_millis(
                vars.within_u32("SERVICE_DEMO_DELTA_DELAY_MS", 0, 10_000, 20)?
                    .into(),
            ),
            delta_buffer: vars.within_u32("SERVICE_DELTA_BUFFER", 1, 1_000_000, 1_024)? as usize,
        })
    }
}

/// How big one debate may be. Each bound starts at what a request that names
/// nothing gets ([`Limits::LEAST`]); the upper bounds keep one debate's
/// calls, plan and page within reach of one replica.
fn debate_limits<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Limits, ConfigError> {
    let (least, default) = (Limits::LEAST, Limits::DEFAULT);
    let count = |name, least: usize, most, default: usize| {
        vars.within_u32(name, as_u32(least), most, as_u32(default))
            .map(|n| n as usize)
    };
    Ok(Limits {
        agents: count("SERVICE_MAX_AGENTS", least.agents, 100, default.agents)?,
        rounds: vars.within_u32("SERVICE_MAX_ROUNDS", least.rounds, 1_000, default.rounds)?,
        phases: count("SERVICE_MAX_PHASES", least.phases, 64, default.phases)?,
        phase_chars: count(
            "SERVICE_MAX_PHASE_CHARS",
            least.phase_chars,
            200,
            default.phase_chars,
        )?,
    })
}

fn as_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
