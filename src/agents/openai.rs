//! The Chat Completions wire (`POST {base}/chat/completions`), spoken by
//! OpenAI, OpenRouter, Mistral, xAI and OpenAI-compatible local servers
//! (Ollama, vLLM, llama.cpp); also the wire of the OpenRouter fallback.

use serde_json::{Value, json};

use super::error::{self, AgentError};
use super::prompt::Prompt;
use super::route::Provider;
use super::transport::{self, MAX_TOKENS, Parsed, TEMPERATURE};
use crate::config::ProviderSettings;

/// One Chat Completions call to `provider`.
pub(super) async fn complete(
    http: &reqwest::Client,
    provider: Provider,
    settings: &ProviderSettings,
    model: &str,
    prompt: &Prompt,
) -> Result<Parsed, AgentError> {
    let mut headers = Vec::new();
    // A compatible server may run without a key; everyone else needs one.
    if let Some(key) = &settings.key {
        let bearer = format!("Bearer {}", key.expose());
        headers.push(transport::secret_header(
            provider,
            "authorization",
            &bearer,
        )?);
    }
    if provider == Provider::Openrouter {
        headers.push((
            reqwest::header::HeaderName::from_static("x-title"),
            reqwest::header::HeaderValue::from_static("Agon"),
        ));
    }
    let url = format!("{}/chat/completions", settings.base_url);
    let body = request(provider, model, prompt);
    let answer = transport::post(http, provider, &url, headers, &body).await?;
    parse(provider, &answer)
}

/// OpenAI's reasoning models refuse a temperature other than the default.
fn is_reasoning_model(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    ["o1", "o3", "o4", "gpt-5"].iter().any(|p| m.starts_with(p))
}

fn request(provider: Provider, model: &str, prompt: &Prompt) -> Value {
    let mut messages = Vec::with_capacity(2);
    if !prompt.system.is_empty() {
        messages.push(json!({"role": "system", "content": prompt.system}));
    }
    messages.push(json!({"role": "user", "content": prompt.user}));
    let mut body = json!({"model": model, "messages": messages});
    // OpenAI itself deprecated `max_tokens` (its reasoning models refuse
    // it); the other servers only know `max_tokens`.
    let limit = match provider {
        Provider::Openai => "max_completion_tokens",
        _ => "max_tokens",
    };
    body[limit] = json!(MAX_TOKENS);
    if !(provider == Provider::Openai && is_reasoning_model(model)) {
        body["temperature"] = json!(TEMPERATURE);
    }
    body
}

fn parse(provider: Provider, body: &[u8]) -> Result<Parsed, AgentError> {
    let value = transport::json(provider, body)?;
    let Some(choice) = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    else {
        // OpenRouter reports some upstream failures as a 200 with an error object.
        if value.get("error").is_some() {
            let status = value
                .pointer("/error/code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .filter(|c| *c >= 400)
                .unwrap_or(502);
            return Err(error::from_status(provider, status, body));
        }
        return Err(AgentError::malformed(provider, "no choices in the answer"));
    };
    let content = choice.pointer("/message/content");
    let text = match content {
        Some(Value::String(s)) => s.clone(),
        // Some compatible servers send content as a list of typed parts.
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    };
    if text.trim().is_empty() {
        let reason = choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .unwrap_or("none");
        return Err(AgentError::malformed(
            provider,
            format!("no text in the answer (finish_reason {reason})"),
        ));
    }
    let usage = value.get("usage");
    Ok(Parsed {
        text,
        tokens_in: transport::count(usage.and_then(|u| u.get("prompt_tokens"))),
        tokens_out: transport::count(usage.and_then(|u| u.get("completion_tokens"))),
        model: transport::model(value.get("model")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt() -> Prompt {
        Prompt {
            system: "sys".to_owned(),
            user: "usr".to_owned(),
        }
    }

    #[test]
    fn the_request_has_the_chat_shape_with_each_servers_limit_field() {
        let body = request(Provider::Openai, "gpt-4o", &prompt());
        assert_eq!(body["model"], "gpt-4o");
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "sys"})
        );
        assert_eq!(
            body["messages"][1],
            json!({"role": "user", "content": "usr"})
        );
        assert_eq!(body["max_completion_tokens"], 1024);
        assert_eq!(body["temperature"], 0.7);
        let o3 = request(Provider::Openai, "o3-mini", &prompt());
        assert!(o3.get("temperature").is_none());
        for provider in [
            Provider::Mistral,
            Provider::Xai,
            Provider::Openrouter,
            Provider::Compatible,
        ] {
            let body = request(provider, "m", &prompt());
            assert_eq!(body["max_tokens"], 1024, "{provider}");
            assert_eq!(body["temperature"], 0.7, "{provider}");
        }
    }

    #[test]
    fn a_completion_parses_into_text_usage_and_model() {
        let body = br#"{
          "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
          "object": "chat.completion",
          "created": 1741569952,
          "model": "gpt-4o-2024-08-06",
          "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": "Hello! How can I assist you today?", "refusal": null, "annotations": []},
            "logprobs": null,
            "finish_reason": "stop"
          }],
          "usage": {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29,
                    "prompt_tokens_details": {"cached_tokens": 0}},
          "service_tier": "default",
          "system_fingerprint": "fp_123"
        }"#;
        assert_eq!(
            parse(Provider::Openai, body),
            Ok(Parsed {
                text: "Hello! How can I assist you today?".to_owned(),
                tokens_in: 19,
                tokens_out: 10,
                model: Some("gpt-4o-2024-08-06".to_owned()),
            })
        );
    }

    #[test]
    fn a_local_server_without_usage_still_parses() {
        let body = br#"{"model":"llama3.1","choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"hi"}]},"finish_reason":"stop"}]}"#;
        let parsed = parse(Provider::Compatible, body);
        assert_eq!(
            parsed.map(|p| (p.text, p.tokens_in)),
            Ok(("hi".to_owned(), 0))
        );
    }

    #[test]
    fn empty_choices_null_content_and_bad_json_are_malformed() {
        for body in [
            &br#"{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":0}}"#[..],
            br#"{"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"no"},"finish_reason":"stop"}]}"#,
            br#"{"choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"length"}]}"#,
            b"<html>502</html>",
        ] {
            assert_eq!(parse(Provider::Openai, body).map_err(|e| e.code()), Err("malformed"));
        }
    }

    #[test]
    fn an_error_object_in_a_200_is_read_as_that_error() {
        let body =
            br#"{"error":{"message":"Rate limit exceeded: free-models-per-day","code":429}}"#;
        assert_eq!(
            parse(Provider::Openrouter, body),
            Err(AgentError::RateLimited {
                provider: Provider::Openrouter
            })
        );
        let body = br#"{"error":{"message":"upstream failed"}}"#;
        assert_eq!(
            parse(Provider::Openrouter, body).map_err(|e| e.code()),
            Err("http_status")
        );
    }
}
