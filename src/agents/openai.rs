//! The Chat Completions wire (`POST {base}/chat/completions`), spoken by
//! OpenAI, OpenRouter, Mistral, xAI and OpenAI-compatible local servers
//! (Ollama, vLLM, llama.cpp); also the wire of the OpenRouter fallback.

use serde_json::{Value, json};

use super::error::{self, AgentError};
use super::prompt::Prompt;
use super::route::Provider;
use super::stream::{self, Emitter};
use super::transport::{self, Parsed, TEMPERATURE};
use crate::config::ProviderSettings;

/// One Chat Completions call to `provider`, streamed: the text goes to
/// `emitter` as it arrives. A server that answers whole is read whole.
pub(super) async fn complete(
    http: &reqwest::Client,
    provider: Provider,
    settings: &ProviderSettings,
    model: &str,
    prompt: &Prompt,
    emitter: &Emitter<'_>,
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
    let mut body = request(provider, model, prompt, settings.max_tokens);
    body["stream"] = json!(true);
    // OpenAI reports usage in a stream only when asked; the others either
    // always do or do not know the option.
    if provider == Provider::Openai {
        body["stream_options"] = json!({"include_usage": true});
    }
    let response = transport::send(http, provider, &url, headers, &body).await?;
    if !stream::is_event_stream(&response) {
        let parsed = parse(provider, &transport::whole(provider, response).await?)?;
        emitter.text(&parsed.text);
        return Ok(parsed);
    }
    let mut parsed = Parsed::default();
    let mut finish = None;
    stream::read_events(provider, response, |_, data| {
        streamed(provider, data, &mut parsed, &mut finish, emitter)
    })
    .await?;
    if parsed.text.trim().is_empty() {
        let reason = finish.as_deref().unwrap_or("none");
        return Err(AgentError::malformed(
            provider,
            format!("no text in the answer (finish_reason {reason})"),
        ));
    }
    Ok(parsed)
}

/// Folds one streamed chunk into `parsed`; true at `[DONE]`.
fn streamed(
    provider: Provider,
    data: &str,
    parsed: &mut Parsed,
    finish: &mut Option<String>,
    emitter: &Emitter<'_>,
) -> Result<bool, AgentError> {
    if data.trim() == "[DONE]" {
        return Ok(true);
    }
    let value = transport::json(provider, data.as_bytes())?;
    if value.get("error").is_some() {
        return Err(error_object(provider, &value, data.as_bytes()));
    }
    if let Some(model) = transport::model(value.get("model")) {
        parsed.model = Some(model);
    }
    if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
        parsed.tokens_in = transport::count(usage.get("prompt_tokens"));
        parsed.tokens_out = transport::count(usage.get("completion_tokens"));
    }
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first());
    if let Some(choice) = choice {
        let piece = text_of(choice.pointer("/delta/content"));
        emitter.text(&piece);
        parsed.text.push_str(&piece);
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            *finish = Some(reason.to_owned());
        }
    }
    Ok(false)
}

/// A message's or a delta's content: a string, or (some compatible
/// servers) a list of typed parts.
fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// OpenRouter reports some upstream failures as a 200 with an error object.
fn error_object(provider: Provider, value: &Value, body: &[u8]) -> AgentError {
    let status = value
        .pointer("/error/code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(502);
    error::from_status(provider, status, body)
}

/// OpenAI's reasoning models refuse a temperature other than the default.
fn is_reasoning_model(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    ["o1", "o3", "o4", "gpt-5"].iter().any(|p| m.starts_with(p))
}

fn request(provider: Provider, model: &str, prompt: &Prompt, max_tokens: u32) -> Value {
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
    body[limit] = json!(max_tokens);
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
        if value.get("error").is_some() {
            return Err(error_object(provider, &value, body));
        }
        return Err(AgentError::malformed(provider, "no choices in the answer"));
    };
    let text = text_of(choice.pointer("/message/content"));
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
        let body = request(Provider::Openai, "gpt-4o", &prompt(), 1024);
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
        let o3 = request(Provider::Openai, "o3-mini", &prompt(), 1024);
        assert!(o3.get("temperature").is_none());
        for provider in [
            Provider::Mistral,
            Provider::Xai,
            Provider::Openrouter,
            Provider::Compatible,
        ] {
            let body = request(provider, "m", &prompt(), 300);
            assert_eq!(body["max_tokens"], 300, "{provider}");
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
