//! Turns the agent name a debate lists into the provider and model that
//! answer for it, so every other part of the service can stay name-agnostic.
//!
//! | Agent name                                          | Provider     | Model                          |
//! |-----------------------------------------------------|--------------|--------------------------------|
//! | `demo`, `demo-<anything>`                           | demo         | `demo` (no network, no key)    |
//! | `claude`, `anthropic`                               | anthropic    | `claude-sonnet-4-5`            |
//! | `claude-<rest>`                                     | anthropic    | the name itself                |
//! | `gpt`, `openai`, `chatgpt`                          | openai       | `gpt-4o`                       |
//! | `gpt-<rest>`, `o1…`, `o3…`, `o4…`                   | openai       | the name itself                |
//! | `mistral`                                           | mistral      | `mistral-large-latest`         |
//! | `mistral-<rest>`, `codestral…`, `magistral…`        | mistral      | the name itself                |
//! | `gemini`                                            | gemini       | `gemini-2.5-pro`               |
//! | `gemini-<rest>`                                     | gemini       | the name itself                |
//! | `grok`, `xai`                                       | xai          | `grok-4`                       |
//! | `grok-<rest>`                                       | xai          | the name itself                |
//! | `openrouter`                                        | openrouter   | `anthropic/claude-sonnet-4.5`  |
//! | `local`, `ollama`, `compatible`                     | compatible   | `llama3.1`                     |
//! | `<provider>:<model>`                                | `<provider>` | `<model>`                      |
//!
//! In the explicit `<provider>:<model>` form, `<provider>` is one of
//! `anthropic`, `openai`, `openrouter`, `mistral`, `gemini`, `xai`,
//! `compatible` (or its aliases `ollama`, `vllm`, `llamacpp`, `local`), and
//! the model is everything after the first `:` (so `ollama:llama3.1:8b`
//! works). Examples: `openai:gpt-4o-mini`,
//! `openrouter:meta-llama/llama-3.1-70b-instruct`, `ollama:llama3.1`.
//!
//! Prefixes match case-insensitively; the model keeps the case it was given.
//! Any other name is refused. A provider is usable only when its variable is
//! set: `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, `OPENROUTER_API_KEY`,
//! `MISTRAL_API_KEY`, `GEMINI_API_KEY`, `XAI_API_KEY`, and for `compatible`
//! the server address `SERVICE_OPENAI_COMPATIBLE_URL`.

use serde::Serialize;

use super::error::ResolveError;
use crate::config::{AgentSettings, ProviderSettings};

/// Who answers a call. `Openai` covers OpenAI itself; OpenRouter, Mistral,
/// xAI and `Compatible` (Ollama, vLLM, llama.cpp…) speak the same wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    Demo,
    Anthropic,
    Openai,
    Openrouter,
    Mistral,
    Gemini,
    Xai,
    Compatible,
}

impl Provider {
    /// Every provider, in the order status listings show them.
    pub const ALL: [Provider; 8] = [
        Provider::Demo,
        Provider::Anthropic,
        Provider::Openai,
        Provider::Openrouter,
        Provider::Mistral,
        Provider::Gemini,
        Provider::Xai,
        Provider::Compatible,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Demo => "demo",
            Provider::Anthropic => "anthropic",
            Provider::Openai => "openai",
            Provider::Openrouter => "openrouter",
            Provider::Mistral => "mistral",
            Provider::Gemini => "gemini",
            Provider::Xai => "xai",
            Provider::Compatible => "compatible",
        }
    }

    /// The variable that must be set for this provider to be usable: its
    /// key, or for `Compatible` the server address (its key is optional).
    pub fn key_variable(self) -> Option<&'static str> {
        match self {
            Provider::Demo => None,
            Provider::Anthropic => Some("ANTHROPIC_API_KEY"),
            Provider::Openai => Some("OPENAI_API_KEY"),
            Provider::Openrouter => Some("OPENROUTER_API_KEY"),
            Provider::Mistral => Some("MISTRAL_API_KEY"),
            Provider::Gemini => Some("GEMINI_API_KEY"),
            Provider::Xai => Some("XAI_API_KEY"),
            Provider::Compatible => Some("SERVICE_OPENAI_COMPATIBLE_URL"),
        }
    }

    /// The model a bare alias (`claude`, `gpt`, …) stands for.
    pub fn default_model(self) -> &'static str {
        match self {
            Provider::Demo => "demo",
            Provider::Anthropic => "claude-sonnet-4-5",
            Provider::Openai => "gpt-4o",
            Provider::Openrouter => "anthropic/claude-sonnet-4.5",
            Provider::Mistral => "mistral-large-latest",
            Provider::Gemini => "gemini-2.5-pro",
            Provider::Xai => "grok-4",
            Provider::Compatible => "llama3.1",
        }
    }

    /// This provider's key and address, `None` for demo and for an unset
    /// compatible server.
    pub(super) fn settings(self, settings: &AgentSettings) -> Option<&ProviderSettings> {
        match self {
            Provider::Demo => None,
            Provider::Anthropic => Some(&settings.anthropic),
            Provider::Openai => Some(&settings.openai),
            Provider::Openrouter => Some(&settings.openrouter),
            Provider::Mistral => Some(&settings.mistral),
            Provider::Gemini => Some(&settings.gemini),
            Provider::Xai => Some(&settings.xai),
            Provider::Compatible => settings.compatible.as_ref(),
        }
    }

    /// Whether a call could be made now.
    pub(super) fn configured(self, settings: &AgentSettings) -> bool {
        match self {
            Provider::Demo => true,
            Provider::Compatible => settings.compatible.is_some(),
            other => other.settings(settings).is_some_and(|p| p.key.is_some()),
        }
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where an agent's calls go.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Route {
    pub provider: Provider,
    pub model: String,
}

impl Route {
    fn new(provider: Provider, model: impl Into<String>) -> Self {
        Self {
            provider,
            model: model.into(),
        }
    }
}

/// Bare aliases: the provider's default model.
pub(super) const ALIASES: [(&[&str], Provider); 7] = [
    (&["claude", "anthropic"], Provider::Anthropic),
    (&["gpt", "openai", "chatgpt"], Provider::Openai),
    (&["mistral"], Provider::Mistral),
    (&["gemini"], Provider::Gemini),
    (&["grok", "xai"], Provider::Xai),
    (&["openrouter"], Provider::Openrouter),
    (&["local", "ollama", "compatible"], Provider::Compatible),
];

/// Model-name prefixes (names without `:`): the name is the model.
pub(super) const FAMILIES: [(&[&str], Provider); 5] = [
    (&["claude-"], Provider::Anthropic),
    (&["gpt-", "o1", "o3", "o4"], Provider::Openai),
    (&["mistral-", "codestral", "magistral"], Provider::Mistral),
    (&["gemini-"], Provider::Gemini),
    (&["grok-"], Provider::Xai),
];

/// The `<provider>` of the explicit `<provider>:<model>` form.
pub(super) const EXPLICIT: [(&[&str], Provider); 7] = [
    (&["anthropic"], Provider::Anthropic),
    (&["openai"], Provider::Openai),
    (&["openrouter"], Provider::Openrouter),
    (&["mistral"], Provider::Mistral),
    (&["gemini"], Provider::Gemini),
    (&["xai"], Provider::Xai),
    (
        &["compatible", "ollama", "vllm", "llamacpp", "local"],
        Provider::Compatible,
    ),
];

/// The provider of the first `table` row with a word `matches` accepts.
fn lookup(table: &[(&[&str], Provider)], matches: impl Fn(&str) -> bool) -> Option<Provider> {
    table
        .iter()
        .find(|(words, _)| words.iter().any(|w| matches(w)))
        .map(|(_, provider)| *provider)
}

/// The name's route, whether or not its provider is configured.
pub fn parse(name: &str) -> Result<Route, ResolveError> {
    let unknown = || ResolveError::Unknown {
        name: name.to_owned(),
    };
    if super::demo::is_demo(name) {
        return Ok(Route::new(Provider::Demo, "demo"));
    }
    if let Some((prefix, model)) = name.split_once(':') {
        let provider = lookup(&EXPLICIT, |w| w.eq_ignore_ascii_case(prefix)).ok_or_else(unknown)?;
        if model.trim().is_empty() {
            return Err(unknown());
        }
        return Ok(Route::new(provider, model));
    }
    let lower = name.to_ascii_lowercase();
    if let Some(provider) = lookup(&ALIASES, |w| w == lower) {
        return Ok(Route::new(provider, provider.default_model()));
    }
    lookup(&FAMILIES, |w| lower.starts_with(w))
        .map(|provider| Route::new(provider, name))
        .ok_or_else(unknown)
}

/// The name's route, if its provider can be called with these settings.
pub fn resolve(name: &str, settings: &AgentSettings) -> Result<Route, ResolveError> {
    let route = parse(name)?;
    match route.provider.key_variable() {
        Some(variable) if !route.provider.configured(settings) => Err(ResolveError::MissingKey {
            name: name.to_owned(),
            variable,
        }),
        _ => Ok(route),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::Secret;

    fn provider(key: Option<&str>) -> ProviderSettings {
        ProviderSettings {
            key: key.map(Secret::new),
            base_url: "http://127.0.0.1:1".to_owned(),
            max_tokens: 1024,
        }
    }

    /// Settings with every key set (`keys`) or none, and the compatible server set or not.
    pub(in crate::agents) fn settings(keys: bool) -> AgentSettings {
        let key = keys.then_some("k");
        AgentSettings {
            anthropic: provider(key),
            openai: provider(key),
            openrouter: provider(key),
            mistral: provider(key),
            gemini: provider(key),
            xai: provider(key),
            compatible: keys.then(|| provider(None)),
            agent_timeout: Duration::from_secs(5),
            breaker_recovery: Duration::from_secs(60),
            breaker_failures: 5,
            breaker_successes: 2,
            max_breakers: 1024,
            max_concurrent_debates: 1,
            debate_lease: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(1),
            max_topic_chars: 2_000,
            max_context_chars: 20_000,
            max_search_chars: 200,
            debate_limits: agon_aggregates::debate::Limits::DEFAULT,
            demo_delta_delay: Duration::ZERO,
            delta_buffer: 64,
        }
    }

    fn route(name: &str) -> (Provider, String) {
        match parse(name) {
            Ok(r) => (r.provider, r.model),
            Err(e) => panic!("{name}: {e}"),
        }
    }

    #[test]
    fn the_table_maps_every_form() {
        use Provider::*;
        let cases: &[(&str, Provider, &str)] = &[
            ("demo", Demo, "demo"),
            ("demo-a", Demo, "demo"),
            ("Demo-Skeptic", Demo, "demo"),
            ("claude", Anthropic, "claude-sonnet-4-5"),
            ("anthropic", Anthropic, "claude-sonnet-4-5"),
            ("claude-opus-4-1", Anthropic, "claude-opus-4-1"),
            ("gpt", Openai, "gpt-4o"),
            ("openai", Openai, "gpt-4o"),
            ("chatgpt", Openai, "gpt-4o"),
            ("gpt-4o-mini", Openai, "gpt-4o-mini"),
            ("o1-preview", Openai, "o1-preview"),
            ("o3", Openai, "o3"),
            ("o4-mini", Openai, "o4-mini"),
            ("mistral", Mistral, "mistral-large-latest"),
            ("mistral-small-latest", Mistral, "mistral-small-latest"),
            ("codestral-latest", Mistral, "codestral-latest"),
            ("magistral-medium", Mistral, "magistral-medium"),
            ("gemini", Gemini, "gemini-2.5-pro"),
            ("gemini-2.5-flash", Gemini, "gemini-2.5-flash"),
            ("grok", Xai, "grok-4"),
            ("xai", Xai, "grok-4"),
            ("grok-3-mini", Xai, "grok-3-mini"),
            ("openrouter", Openrouter, "anthropic/claude-sonnet-4.5"),
            ("local", Compatible, "llama3.1"),
            ("ollama", Compatible, "llama3.1"),
            ("compatible", Compatible, "llama3.1"),
            ("openai:gpt-4o-mini", Openai, "gpt-4o-mini"),
            (
                "openrouter:meta-llama/llama-3.1-70b-instruct",
                Openrouter,
                "meta-llama/llama-3.1-70b-instruct",
            ),
            ("ollama:llama3.1:8b", Compatible, "llama3.1:8b"),
            ("vllm:Qwen/Qwen2.5-7B", Compatible, "Qwen/Qwen2.5-7B"),
            ("llamacpp:any", Compatible, "any"),
            (
                "anthropic:claude-3-5-haiku-latest",
                Anthropic,
                "claude-3-5-haiku-latest",
            ),
            ("mistral:open-mixtral", Mistral, "open-mixtral"),
            ("gemini:gemini-2.0-flash", Gemini, "gemini-2.0-flash"),
            ("xai:grok-2", Xai, "grok-2"),
            ("compatible:phi3", Compatible, "phi3"),
        ];
        for (name, provider, model) in cases {
            assert_eq!(route(name), (*provider, (*model).to_owned()), "{name}");
        }
    }

    #[test]
    fn prefixes_ignore_case_and_models_keep_it() {
        assert_eq!(
            route("CLAUDE"),
            (Provider::Anthropic, "claude-sonnet-4-5".to_owned())
        );
        assert_eq!(
            route("Claude-Opus-4"),
            (Provider::Anthropic, "Claude-Opus-4".to_owned())
        );
        assert_eq!(route("GPT-4o"), (Provider::Openai, "GPT-4o".to_owned()));
        assert_eq!(
            route("OpenAI:GPT-4o"),
            (Provider::Openai, "GPT-4o".to_owned())
        );
        assert_eq!(
            route("Ollama:Llama3"),
            (Provider::Compatible, "Llama3".to_owned())
        );
    }

    #[test]
    fn other_names_are_unknown_and_the_message_lists_the_forms() {
        for name in [
            "", "bob", "llama", "claud", "openai:", "foo:bar", "demo:x", "gpt4",
        ] {
            match parse(name) {
                Err(e @ ResolveError::Unknown { .. }) => {
                    let text = e.to_string();
                    assert!(text.contains("demo-<name>"), "{text}");
                    assert!(text.contains("provider:model"), "{text}");
                }
                other => panic!("{name}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_missing_key_names_its_variable() {
        let none = settings(false);
        let cases = [
            ("claude", "ANTHROPIC_API_KEY"),
            ("gpt-4o", "OPENAI_API_KEY"),
            ("openrouter", "OPENROUTER_API_KEY"),
            ("mistral", "MISTRAL_API_KEY"),
            ("gemini", "GEMINI_API_KEY"),
            ("grok", "XAI_API_KEY"),
            ("ollama:llama3", "SERVICE_OPENAI_COMPATIBLE_URL"),
        ];
        for (name, variable) in cases {
            match resolve(name, &none) {
                Err(e @ ResolveError::MissingKey { .. }) => {
                    let text = e.to_string();
                    assert!(text.contains(variable), "{text}");
                    assert!(text.contains(&format!("'{name}'")), "{text}");
                    assert!(text.contains("demo-<name>"), "{text}");
                }
                other => panic!("{name}: {other:?}"),
            }
        }
        assert!(resolve("demo-x", &none).is_ok());
        let all = settings(true);
        for (name, _) in cases {
            assert!(resolve(name, &all).is_ok(), "{name}");
        }
    }
}
