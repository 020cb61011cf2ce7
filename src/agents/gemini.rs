//! Google's Gemini API (`POST {base}/models/{model}:generateContent`), the
//! wire the `gemini` agents speak.

use serde_json::{Value, json};

use super::error::AgentError;
use super::prompt::Prompt;
use super::route::Provider;
use super::stream::Emitter;
use super::transport::{self, Parsed, TEMPERATURE};
use crate::config::ProviderSettings;

const PROVIDER: Provider = Provider::Gemini;

/// One generateContent call. Not streamed: its text goes to `emitter`
/// whole, once it is read.
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
    // The key goes in a header, never in the `?key=` query string, so that
    // it cannot end up in an error message or a proxy log carrying the URL.
    let headers = vec![transport::secret_header(PROVIDER, "x-goog-api-key", key)?];
    let model = model.strip_prefix("models/").unwrap_or(model);
    let url = format!("{}/models/{model}:generateContent", settings.base_url);
    let body = transport::post(
        http,
        PROVIDER,
        &url,
        headers,
        &request(prompt, settings.max_tokens),
    )
    .await?;
    let parsed = parse(&body)?;
    emitter.text(&parsed.text);
    Ok(parsed)
}

fn request(prompt: &Prompt, max_tokens: u32) -> Value {
    let mut body = json!({
        "contents": [{"role": "user", "parts": [{"text": prompt.user}]}],
        "generationConfig": {"maxOutputTokens": max_tokens, "temperature": TEMPERATURE},
    });
    if !prompt.system.is_empty() {
        body["systemInstruction"] = json!({"parts": [{"text": prompt.system}]});
    }
    body
}

fn parse(body: &[u8]) -> Result<Parsed, AgentError> {
    let value = transport::json(PROVIDER, body)?;
    let Some(candidate) = value
        .get("candidates")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    else {
        let blocked = value
            .pointer("/promptFeedback/blockReason")
            .and_then(Value::as_str);
        let detail = match blocked {
            Some(reason) => format!("the prompt was blocked ({reason})"),
            None => "no candidates in the answer".to_owned(),
        };
        return Err(AgentError::malformed(PROVIDER, detail));
    };
    let text: String = candidate
        .pointer("/content/parts")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                // Thought summaries are the model's scratch work, not its answer.
                .filter(|p| p.get("thought").and_then(Value::as_bool) != Some(true))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if text.trim().is_empty() {
        let reason = candidate
            .get("finishReason")
            .and_then(Value::as_str)
            .unwrap_or("none");
        return Err(AgentError::malformed(
            PROVIDER,
            format!("no text in the answer (finishReason {reason})"),
        ));
    }
    let usage = value.get("usageMetadata");
    Ok(Parsed {
        text,
        tokens_in: transport::count(usage.and_then(|u| u.get("promptTokenCount"))),
        tokens_out: transport::count(usage.and_then(|u| u.get("candidatesTokenCount"))),
        model: transport::model(value.get("modelVersion")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_has_the_generate_content_shape() {
        let body = request(
            &Prompt {
                system: "sys".to_owned(),
                user: "usr".to_owned(),
            },
            1024,
        );
        assert_eq!(body["contents"][0]["role"], "user");
        assert_eq!(body["contents"][0]["parts"][0]["text"], "usr");
        assert_eq!(body["systemInstruction"]["parts"][0]["text"], "sys");
        assert_eq!(body["generationConfig"]["maxOutputTokens"], 1024);
        assert_eq!(body["generationConfig"]["temperature"], 0.7);
    }

    #[test]
    fn a_response_parses_into_text_usage_and_model() {
        let body = br#"{
          "candidates": [{
            "content": {"parts": [
              {"text": "thinking...", "thought": true},
              {"text": "AI learns patterns "},
              {"text": "from data."}
            ], "role": "model"},
            "finishReason": "STOP",
            "index": 0,
            "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}]
          }],
          "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 12, "totalTokenCount": 20,
                            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 8}]},
          "modelVersion": "gemini-2.5-pro",
          "responseId": "abc"
        }"#;
        assert_eq!(
            parse(body),
            Ok(Parsed {
                text: "AI learns patterns from data.".to_owned(),
                tokens_in: 8,
                tokens_out: 12,
                model: Some("gemini-2.5-pro".to_owned()),
            })
        );
    }

    #[test]
    fn blocked_empty_or_broken_answers_are_malformed() {
        for body in [
            &br#"{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":5}}"#[..],
            br#"{"candidates":[]}"#,
            br#"{"candidates":[{"finishReason":"MAX_TOKENS","index":0}],"usageMetadata":{"promptTokenCount":5,"totalTokenCount":1029}}"#,
            b"",
        ] {
            assert_eq!(parse(body).map_err(|e| e.code()), Err("malformed"));
        }
    }
}
