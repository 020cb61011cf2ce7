//! The OpenRouter fallback: when a provider throttles (429 or quota) and an
//! OpenRouter key is set, the same model is asked through OpenRouter so a
//! debate is not lost to one provider's rate limit.

use std::time::Instant;

use super::error::AgentError;
use super::openai;
use super::prompt::Prompt;
use super::route::Provider;
use super::stream::Emitter;
use super::transport::Parsed;
use crate::config::AgentSettings;

/// Whether `error` from `provider` may be retried through OpenRouter.
pub(super) fn applies(provider: Provider, error: &AgentError, settings: &AgentSettings) -> bool {
    error.is_throttle()
        && provider != Provider::Openrouter
        && provider != Provider::Demo
        && settings.openrouter.key.is_some()
}

/// The OpenRouter name of `model` as served by `provider`. Compatible
/// servers run models under their own names, so theirs goes unchanged.
pub(super) fn openrouter_model(provider: Provider, model: &str) -> String {
    let prefix = match provider {
        Provider::Anthropic => "anthropic/",
        Provider::Openai => "openai/",
        Provider::Mistral => "mistralai/",
        Provider::Gemini => "google/",
        Provider::Xai => "x-ai/",
        Provider::Compatible | Provider::Openrouter | Provider::Demo => "",
    };
    // A name that already carries its vendor (`openai:openai/gpt-4o`) is kept.
    if prefix.is_empty() || model.starts_with(prefix) {
        model.to_owned()
    } else {
        format!("{prefix}{model}")
    }
}

/// Asks OpenRouter instead of `original`, recording the fallback metrics.
pub(super) async fn call(
    http: &reqwest::Client,
    settings: &AgentSettings,
    original: Provider,
    model: &str,
    prompt: &Prompt,
    emitter: &Emitter<'_>,
) -> Result<(Parsed, String), AgentError> {
    let label = original.as_str();
    metrics::counter!("service_fallback_activations_total", "provider" => label).increment(1);
    let model = openrouter_model(original, model);
    tracing::warn!(provider = label, %model, "provider throttled; falling back to OpenRouter");
    let started = Instant::now();
    let result = openai::complete(
        http,
        Provider::Openrouter,
        &settings.openrouter,
        &model,
        prompt,
        emitter,
    )
    .await;
    metrics::histogram!("service_fallback_latency_seconds", "provider" => label)
        .record(started.elapsed().as_secs_f64());
    match result {
        Ok(parsed) => {
            metrics::counter!("service_fallback_success_total", "provider" => label).increment(1);
            Ok((parsed, model))
        }
        Err(e) => {
            tracing::warn!(provider = label, error = %e, "OpenRouter fallback failed");
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::route::tests::settings;

    #[test]
    fn models_get_their_openrouter_vendor_prefix() {
        let cases = [
            (
                Provider::Anthropic,
                "claude-sonnet-4-5",
                "anthropic/claude-sonnet-4-5",
            ),
            (Provider::Openai, "gpt-4o", "openai/gpt-4o"),
            (
                Provider::Mistral,
                "mistral-large-latest",
                "mistralai/mistral-large-latest",
            ),
            (Provider::Gemini, "gemini-2.5-pro", "google/gemini-2.5-pro"),
            (Provider::Xai, "grok-4", "x-ai/grok-4"),
            (
                Provider::Compatible,
                "meta-llama/llama-3.1-8b-instruct",
                "meta-llama/llama-3.1-8b-instruct",
            ),
            (Provider::Openai, "openai/gpt-4o", "openai/gpt-4o"),
        ];
        for (provider, model, expected) in cases {
            assert_eq!(openrouter_model(provider, model), expected);
        }
    }

    #[test]
    fn only_throttling_from_another_provider_with_a_key_falls_back() {
        let with_key = settings(true);
        let without = settings(false);
        let limited = AgentError::RateLimited {
            provider: Provider::Openai,
        };
        let quota = AgentError::Quota {
            provider: Provider::Openai,
        };
        let broken = AgentError::Status {
            provider: Provider::Openai,
            status: 500,
            message: String::new(),
        };
        assert!(applies(Provider::Openai, &limited, &with_key));
        assert!(applies(Provider::Openai, &quota, &with_key));
        assert!(!applies(Provider::Openai, &broken, &with_key));
        assert!(!applies(Provider::Openai, &limited, &without));
        assert!(!applies(Provider::Openrouter, &limited, &with_key));
    }
}
