//! The one HTTP exchange every wire format shares: post JSON, turn transport
//! failures and non-2xx answers into [`AgentError`]s, hand back the body.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::error::{self, AgentError};
use super::route::Provider;

/// What a provider answered, whatever its wire format.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Parsed {
    pub text: String,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// The model the provider says answered, when it says.
    pub model: Option<String>,
}

/// The sampling temperature every provider is asked for (the most tokens
/// is the deployment's: `ProviderSettings::max_tokens`).
pub(super) const TEMPERATURE: f64 = 0.7;

/// A header whose value is a key: marked sensitive so that no debug output
/// of the request shows it.
pub(super) fn secret_header(
    provider: Provider,
    name: &'static str,
    value: &str,
) -> Result<(HeaderName, HeaderValue), AgentError> {
    let mut value = HeaderValue::from_str(value).map_err(|_| AgentError::Network {
        provider,
        detail: format!("the key for {provider} contains characters a header cannot carry"),
    })?;
    value.set_sensitive(true);
    Ok((HeaderName::from_static(name), value))
}

/// Posts `body` to `url` and returns the 2xx body.
pub(super) async fn post(
    http: &reqwest::Client,
    provider: Provider,
    url: &str,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: &Value,
) -> Result<Vec<u8>, AgentError> {
    whole(provider, send(http, provider, url, headers, body).await?).await
}

/// Posts `body` to `url` and returns the 2xx response, its body unread (a
/// stream is read as it arrives); any other status is the provider's error.
pub(super) async fn send(
    http: &reqwest::Client,
    provider: Provider,
    url: &str,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: &Value,
) -> Result<reqwest::Response, AgentError> {
    let headers: HeaderMap = headers.into_iter().collect();
    let response = http
        .post(url)
        .headers(headers)
        .json(body)
        .send()
        .await
        .map_err(|e| network(provider, e))?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let bytes = response.bytes().await.map_err(|e| network(provider, e))?;
    let failure = error::from_status(provider, status.as_u16(), &bytes);
    tracing::warn!(%provider, status = status.as_u16(), error = %failure, "agent call refused");
    Err(failure)
}

/// Reads a 2xx answer whole.
pub(super) async fn whole(
    provider: Provider,
    response: reqwest::Response,
) -> Result<Vec<u8>, AgentError> {
    let bytes = response.bytes().await.map_err(|e| network(provider, e))?;
    Ok(bytes.to_vec())
}

/// reqwest's own message hides the cause ("error sending request"), so the
/// source chain is appended. The URL is dropped: a compatible server's
/// address may carry credentials, and the key never appears otherwise.
fn network(provider: Provider, e: reqwest::Error) -> AgentError {
    let e = e.without_url();
    let mut detail = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        detail.push_str(": ");
        detail.push_str(&cause.to_string());
        source = cause.source();
    }
    tracing::warn!(%provider, %detail, "agent call failed to reach its provider");
    AgentError::Network {
        provider,
        detail: error::cap(&detail),
    }
}

/// Parses a 2xx body as JSON.
pub(super) fn json(provider: Provider, body: &[u8]) -> Result<Value, AgentError> {
    serde_json::from_slice(body)
        .map_err(|e| AgentError::malformed(provider, format!("not JSON: {e}")))
}

/// A token count, 0 when absent (local servers often omit usage).
pub(super) fn count(value: Option<&Value>) -> u64 {
    value.and_then(Value::as_u64).unwrap_or(0)
}

/// The echoed model name, when present and non-empty.
pub(super) fn model(value: Option<&Value>) -> Option<String> {
    value
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .map(str::to_owned)
}
