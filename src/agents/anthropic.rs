//! Anthropic's Messages API (`POST {base}/v1/messages`), the wire the
//! `claude` agents speak.

use serde_json::{Value, json};

use super::error::{self, AgentError};
use super::prompt::Prompt;
use super::route::Provider;
use super::stream::{self, Emitter};
use super::transport::{self, Parsed, TEMPERATURE};
use crate::config::ProviderSettings;

const PROVIDER: Provider = Provider::Anthropic;
const VERSION: &str = "2023-06-01";

/// One Messages API call, streamed: the text goes to `emitter` as it
/// arrives. A server that answers whole is read whole.
pub(super) async fn complete(
    http: &reqwest::Client,
    settings: &ProviderSettings,
    model: &str,
    prompt: &Prompt,
    emitter: &Emitter<'_>,
) -> Result<Parsed, AgentError> {
    let key = settings
        .key
        .as_ref()
        .map(|k| k.expose())
        .unwrap_or_default();
    let headers = vec![
        transport::secret_header(PROVIDER, "x-api-key", key)?,
        (
            reqwest::header::HeaderName::from_static("anthropic-version"),
            reqwest::header::HeaderValue::from_static(VERSION),
        ),
    ];
    let url = format!("{}/v1/messages", settings.base_url);
    let mut body = request(model, prompt, settings.max_tokens);
    body["stream"] = Value::Bool(true);
    let response = transport::send(http, PROVIDER, &url, headers, &body).await?;
    if !stream::is_event_stream(&response) {
        let parsed = parse(&transport::whole(PROVIDER, response).await?)?;
        emitter.text(&parsed.text);
        return Ok(parsed);
    }
    let mut parsed = Parsed::default();
    stream::read_events(PROVIDER, response, |event, data| {
        streamed(event, data, &mut parsed, emitter)
    })
    .await?;
    if parsed.text.trim().is_empty() {
        return Err(AgentError::malformed(PROVIDER, "no text in the answer"));
    }
    Ok(parsed)
}

/// Folds one streamed event into `parsed`; true at `message_stop`.
fn streamed(
    event: &str,
    data: &str,
    parsed: &mut Parsed,
    emitter: &Emitter<'_>,
) -> Result<bool, AgentError> {
    let value = transport::json(PROVIDER, data.as_bytes())?;
    let kind = value.get("type").and_then(Value::as_str).unwrap_or(event);
    match kind {
        "message_start" => {
            let message = value.get("message");
            parsed.model = transport::model(message.and_then(|m| m.get("model")));
            let usage = message.and_then(|m| m.get("usage"));
            parsed.tokens_in = transport::count(usage.and_then(|u| u.get("input_tokens")));
        }
        "content_block_delta" if value.pointer("/delta/type") == Some(&json!("text_delta")) => {
            let piece = value
                .pointer("/delta/text")
                .and_then(Value::as_str)
                .unwrap_or("");
            emitter.text(piece);
            parsed.text.push_str(piece);
        }
        "message_delta" => {
            let usage = value.get("usage");
            parsed.tokens_out = transport::count(usage.and_then(|u| u.get("output_tokens")));
        }
        "message_stop" => return Ok(true),
        "error" => {
            let status = match value.pointer("/error/type").and_then(Value::as_str) {
                Some("overloaded_error") => 529,
                Some("rate_limit_error") => 429,
                _ => 500,
            };
            return Err(error::from_status(PROVIDER, status, data.as_bytes()));
        }
        // ping, content_block_start/stop, thinking deltas.
        _ => {}
    }
    Ok(false)
}

fn request(model: &str, prompt: &Prompt, max_tokens: u32) -> Value {
    let mut body = json!({
        "model": model,
        "max_tokens": max_tokens,
        "temperature": TEMPERATURE,
        "messages": [{"role": "user", "content": prompt.user}],
    });
    // An empty system string is refused by the API; leaving it out is not.
    if !prompt.system.is_empty() {
        body["system"] = Value::String(prompt.system.clone());
    }
    body
}

fn parse(body: &[u8]) -> Result<Parsed, AgentError> {
    let value = transport::json(PROVIDER, body)?;
    let blocks = value
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| AgentError::malformed(PROVIDER, "no content array"))?;
    let text: String = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    if text.trim().is_empty() {
        return Err(AgentError::malformed(PROVIDER, "no text in the answer"));
    }
    let usage = value.get("usage");
    Ok(Parsed {
        text,
        tokens_in: transport::count(usage.and_then(|u| u.get("input_tokens"))),
        tokens_out: transport::count(usage.and_then(|u| u.get("output_tokens"))),
        model: transport::model(value.get("model")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_has_the_messages_shape() {
        let prompt = Prompt {
            system: "be brief".to_owned(),
            user: "hello".to_owned(),
        };
        let body = request("claude-sonnet-4-5", &prompt, 1024);
        assert_eq!(body["model"], "claude-sonnet-4-5");
        assert_eq!(body["max_tokens"], 1024);
        assert_eq!(body["temperature"], 0.7);
        assert_eq!(body["system"], "be brief");
        assert_eq!(body["messages"][0]["role"], "user");
        assert_eq!(body["messages"][0]["content"], "hello");
        let bare = request(
            "m",
            &Prompt {
                system: String::new(),
                user: "u".to_owned(),
            },
            7,
        );
        assert!(bare.get("system").is_none());
        assert_eq!(bare["max_tokens"], 7);
    }

    #[test]
    fn a_message_parses_into_text_usage_and_model() {
        let body = br#"{
          "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
          "type": "message",
          "role": "assistant",
          "model": "claude-sonnet-4-5-20250929",
          "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "x"},
            {"type": "text", "text": "Hi! My name is Claude."},
            {"type": "text", "text": " Second block."}
          ],
          "stop_reason": "end_turn",
          "stop_sequence": null,
          "usage": {"input_tokens": 2095, "output_tokens": 503, "cache_read_input_tokens": 0}
        }"#;
        assert_eq!(
            parse(body),
            Ok(Parsed {
                text: "Hi! My name is Claude. Second block.".to_owned(),
                tokens_in: 2095,
                tokens_out: 503,
                model: Some("claude-sonnet-4-5-20250929".to_owned()),
            })
        );
    }

    #[test]
    fn empty_or_broken_answers_are_malformed() {
        for body in [
            &br#"{"type":"message","content":[],"usage":{"input_tokens":1,"output_tokens":0}}"#[..],
            br#"{"type":"message","content":[{"type":"tool_use","id":"t","name":"x","input":{}}]}"#,
            br#"{"type":"message"}"#,
            b"{not json",
        ] {
            assert_eq!(parse(body).map_err(|e| e.code()), Err("malformed"));
        }
    }
}
