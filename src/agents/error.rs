//! Why an agent could not be named or could not answer, in a form the
//! runner can record, the breaker can judge and the API can show.

use serde_json::Value;

use super::route::Provider;

/// Longest provider message kept in an error.
const MESSAGE_CAP: usize = 200;

/// Why an agent name cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error(
        "unknown agent '{name}': use demo or demo-<name>, an alias (claude, gpt, chatgpt, \
         mistral, gemini, grok, openrouter, local, ollama), a model name (claude-…, gpt-…, \
         o1…, o3…, o4…, mistral-…, codestral…, magistral…, gemini-…, grok-…) or \
         provider:model with provider one of anthropic, openai, openrouter, mistral, gemini, \
         xai, compatible, ollama, vllm, llamacpp"
    )]
    Unknown { name: String },
    #[error(
        "agent '{name}' needs {variable}, which is not set (demo agents need no key: use demo-<name>)"
    )]
    MissingKey {
        name: String,
        variable: &'static str,
    },
}

/// Why a call to an agent failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    #[error("the agent did not answer within {seconds} s")]
    Timeout { seconds: u64 },
    #[error("{provider} is rate limiting requests")]
    RateLimited { provider: Provider },
    #[error("{provider} reports the account's quota or credit is exhausted")]
    Quota { provider: Provider },
    #[error("{provider} answered HTTP {status}: {message}")]
    Status {
        provider: Provider,
        status: u16,
        message: String,
    },
    #[error("{provider} sent an answer that could not be read: {detail}")]
    Malformed { provider: Provider, detail: String },
    #[error("could not reach {provider}: {detail}")]
    Network { provider: Provider, detail: String },
    #[error(
        "agent '{agent}' failed repeatedly; its circuit breaker is open for {retry_in_seconds} more s"
    )]
    CircuitOpen {
        agent: String,
        retry_in_seconds: u64,
    },
    /// The name is unknown or its provider lacks its variable; `message` is
    /// the [`ResolveError`] text.
    #[error("{message}")]
    NotConfigured { agent: String, message: String },
}

impl AgentError {
    /// A short stable name for metrics labels and API error bodies.
    pub fn code(&self) -> &'static str {
        match self {
            AgentError::Timeout { .. } => "timeout",
            AgentError::RateLimited { .. } => "rate_limited",
            AgentError::Quota { .. } => "quota",
            AgentError::Status { .. } => "http_status",
            AgentError::Malformed { .. } => "malformed",
            AgentError::Network { .. } => "network",
            AgentError::CircuitOpen { .. } => "circuit_open",
            AgentError::NotConfigured { .. } => "not_configured",
        }
    }

    /// Transient server trouble worth one more try.
    pub(super) fn is_retryable(&self) -> bool {
        match self {
            AgentError::Network { .. } => true,
            AgentError::Status { status, .. } => matches!(status, 500 | 502 | 503 | 504 | 529),
            _ => false,
        }
    }

    /// The provider refused for volume, not because it is broken: the
    /// OpenRouter fallback may answer instead and the breaker ignores it.
    pub(super) fn is_throttle(&self) -> bool {
        matches!(
            self,
            AgentError::RateLimited { .. } | AgentError::Quota { .. }
        )
    }

    pub(super) fn malformed(provider: Provider, detail: impl Into<String>) -> Self {
        AgentError::Malformed {
            provider,
            detail: cap(&detail.into()),
        }
    }
}

/// Reads a non-2xx answer. Every provider here puts a human message at
/// `error.message`; the quota case is told apart from plain rate limiting
/// because waiting does not help it.
pub(super) fn from_status(provider: Provider, status: u16, body: &[u8]) -> AgentError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error = parsed.as_ref().and_then(|v| {
        // Gemini sometimes wraps its error object in a one-element array.
        v.get("error")
            .or_else(|| v.get(0).and_then(|first| first.get("error")))
    });
    let field = |name: &str| error.and_then(|e| e.get(name)).and_then(Value::as_str);
    let quota = [field("code"), field("type")]
        .into_iter()
        .flatten()
        .any(|v| v == "insufficient_quota");
    match status {
        402 => AgentError::Quota { provider },
        429 if quota => AgentError::Quota { provider },
        429 => AgentError::RateLimited { provider },
        _ => AgentError::Status {
            provider,
            status,
            message: field("message")
                .map(cap)
                .unwrap_or_else(|| reason(status).to_owned()),
        },
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        529 => "Overloaded",
        _ => reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("unexpected status"),
    }
}

/// At most [`MESSAGE_CAP`] characters, on a character boundary.
pub(super) fn cap(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MESSAGE_CAP) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_insufficient_quota_is_quota() {
        let body = br#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
        assert_eq!(
            from_status(Provider::Openai, 429, body),
            AgentError::Quota {
                provider: Provider::Openai
            }
        );
    }

    #[test]
    fn a_plain_429_is_rate_limited() {
        let anthropic = br#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#;
        let e = from_status(Provider::Anthropic, 429, anthropic);
        assert_eq!(e.code(), "rate_limited");
        assert!(e.is_throttle() && !e.is_retryable());
        let openai = br#"{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#;
        assert_eq!(
            from_status(Provider::Openai, 429, openai).code(),
            "rate_limited"
        );
        assert_eq!(
            from_status(Provider::Gemini, 429, b"<html>").code(),
            "rate_limited"
        );
    }

    #[test]
    fn any_402_is_quota() {
        let body = br#"{"error":{"message":"Insufficient credits","code":402}}"#;
        assert_eq!(from_status(Provider::Openrouter, 402, body).code(), "quota");
    }

    #[test]
    fn anthropic_overloaded_529_is_a_retryable_status() {
        let body =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let e = from_status(Provider::Anthropic, 529, body);
        assert_eq!(
            e,
            AgentError::Status {
                provider: Provider::Anthropic,
                status: 529,
                message: "Overloaded".to_owned()
            }
        );
        assert!(e.is_retryable());
        assert_eq!(e.code(), "http_status");
    }

    #[test]
    fn status_messages_come_from_the_body_capped_or_from_the_status() {
        let gemini = br#"[{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}]"#;
        match from_status(Provider::Gemini, 400, gemini) {
            AgentError::Status { message, .. } => assert!(message.starts_with("API key not valid")),
            other => panic!("{other:?}"),
        }
        let long = format!(r#"{{"error":{{"message":"{}"}}}}"#, "é".repeat(500));
        match from_status(Provider::Openai, 400, long.as_bytes()) {
            AgentError::Status { message, .. } => assert_eq!(message.chars().count(), 201),
            other => panic!("{other:?}"),
        }
        match from_status(Provider::Openai, 503, b"<html>busy</html>") {
            AgentError::Status { message, .. } => assert_eq!(message, "Service Unavailable"),
            other => panic!("{other:?}"),
        }
        assert!(!from_status(Provider::Openai, 401, b"{}").is_retryable());
        assert!(from_status(Provider::Openai, 502, b"{}").is_retryable());
    }
}
