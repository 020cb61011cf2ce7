//! `agon debate --server`: creates the debate on a running service and
//! follows it until it ends, lightly: the pause between two looks grows from
//! a quarter second to two seconds, a `429`/`503` is waited out for as long
//! as its `Retry-After` says, and a service that does not answer for a while
//! (a restart) is looked at again before giving up.

use std::time::Duration;

use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{RequestBuilder, StatusCode};
use serde_json::Value;
use tokio::time::Instant;

use futures::StreamExt;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::debate::{AbortOnDrop, CliError, DebateRequest, Progress, conclude, show_delta};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The first pause between two looks at the debate.
const POLL_FIRST: Duration = Duration::from_millis(250);
/// The longest pause between two looks (30 a minute: half the default
/// per-user rate limit, so a second client of the same user still fits).
const POLL_MAX: Duration = Duration::from_secs(2);
/// A `429`/`503` without a usable `Retry-After` waits this long.
const BUSY_WAIT: Duration = Duration::from_secs(5);
/// The longest `Retry-After` followed as given (a larger one is cut to it).
const RETRY_AFTER_MAX: Duration = Duration::from_secs(300);
/// How long the service may stay unreachable (or `502`-`504`) while the
/// debate runs before the command gives up.
const DOWN_MAX: Duration = Duration::from_secs(60);

/// The next pause after `pause` with nothing to wait out.
fn grow(pause: Duration) -> Duration {
    (pause * 3 / 2).min(POLL_MAX)
}

/// The wait a `Retry-After` header asks for (seconds; dates are not sent by
/// this service and count as absent).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds: u64 = headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds).min(RETRY_AFTER_MAX))
}

/// The message of an error body in any of the service's error forms.
fn error_message(body: &Value) -> &str {
    body["error"]["message"]
        .as_str()
        .or(body["error"].as_str())
        .or(body["message"].as_str())
        .unwrap_or("")
}

/// One service at `base`, with an optional bearer credential.
struct Service<'a> {
    client: reqwest::Client,
    base: &'a str,
    token: Option<&'a str>,
}

impl Service<'_> {
    fn unreachable(&self, cause: impl std::fmt::Display) -> CliError {
        CliError::Unreachable {
            url: self.base.to_owned(),
            cause: cause.to_string(),
        }
    }

    /// Sends `request` and reads the JSON body (null when there is none).
    async fn send(
        &self,
        request: RequestBuilder,
    ) -> Result<(StatusCode, HeaderMap, Value), reqwest::Error> {
        let request = match self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let response = request.send().await?;
        let (status, headers) = (response.status(), response.headers().clone());
        let body = response.json().await.unwrap_or(Value::Null);
        Ok((status, headers, body))
    }

    /// Creates the debate; a `429` (nothing was created) is waited out and
    /// sent again. Returns its id.
    async fn create(&self, body: &Value) -> Result<String, CliError> {
        loop {
            let request = self
                .client
                .post(format!("{}/api/v1/debates", self.base))
                .json(body);
            let (status, headers, created) =
                self.send(request).await.map_err(|e| self.unreachable(e))?;
            if status == StatusCode::TOO_MANY_REQUESTS {
                let wait = retry_after(&headers).unwrap_or(BUSY_WAIT);
                eprintln!(
                    "  the service is busy (429); creating again in {}s",
                    wait.as_secs()
                );
                tokio::time::sleep(wait).await;
                continue;
            }
            if !status.is_success() {
                return Err(CliError::Refused(format!(
                    "the service refused the debate ({status}): {}",
                    error_message(&created)
                )));
            }
            return Ok(created["id"].as_str().unwrap_or_default().to_owned());
        }
    }

    /// Follows debate `id` until it completes, fails or pauses.
    async fn follow(&self, id: &str, json: bool) -> Result<(), CliError> {
        let url = format!("{}/api/v1/debates/{id}", self.base);
        let mut progress = Progress::default();
        let mut pause = POLL_FIRST;
        let mut down_since: Option<Instant> = None;
        loop {
            let wait = match self.send(self.client.get(&url)).await {
                Ok((StatusCode::OK, _, detail)) => {
                    down_since = None;
                    progress.show(&detail);
                    match detail["status"].as_str() {
                        Some("completed" | "failed") => return conclude(&detail, json),
                        Some("paused") => {
                            return Err(CliError::Failed("the debate was paused".to_owned()));
                        }
                        Some(_) => {}
                        None => {
                            return Err(CliError::Failed(format!("unexpected answer: {detail}")));
                        }
                    }
                    pause = grow(pause);
                    pause
                }
                Ok((StatusCode::TOO_MANY_REQUESTS, headers, _)) => {
                    // The service is up and the debate runs: follow it as
                    // slowly as the service asks, however long that takes.
                    down_since = None;
                    let wait = retry_after(&headers).unwrap_or(BUSY_WAIT);
                    eprintln!("  rate limited (429); looking again in {}s", wait.as_secs());
                    pause = POLL_MAX;
                    wait
                }
                Ok((status, headers, body)) if status.is_server_error() => {
                    let since = *down_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > DOWN_MAX {
                        return Err(self.unreachable(format!(
                            "{status} for over {}s: {}",
                            DOWN_MAX.as_secs(),
                            error_message(&body)
                        )));
                    }
                    let wait = retry_after(&headers).unwrap_or(pause).max(pause);
                    eprintln!(
                        "  the service answered {status}; looking again in {}s",
                        wait.as_secs_f32().ceil()
                    );
                    wait
                }
                Ok((status, _, body)) => {
                    return Err(CliError::Refused(format!(
                        "the service refused to show the debate ({status}): {}",
                        error_message(&body)
                    )));
                }
                Err(e) => {
                    let since = *down_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > DOWN_MAX {
                        return Err(self.unreachable(e));
                    }
                    pause = grow(pause);
                    pause
                }
            };
            tokio::time::sleep(wait).await;
        }
    }
}

/// A socket on the service's `/ws` receiving the streamed text of every
/// debate the caller may read; `None` (progress only) when it cannot be
/// opened: an older service, `https` (this client speaks `ws://` only).
async fn text_socket(base: &str, token: Option<&str>) -> Option<Socket> {
    let url = format!(
        "{}/ws?all=true&kinds=agent.delta",
        base.strip_prefix("http").map(|rest| format!("ws{rest}"))?
    );
    let mut request = url.into_client_request().ok()?;
    if let Some(token) = token {
        let value = format!("Bearer {token}").parse().ok()?;
        request
            .headers_mut()
            .insert(reqwest::header::AUTHORIZATION, value);
    }
    let connect = tokio_tungstenite::connect_async(request);
    match tokio::time::timeout(Duration::from_secs(5), connect).await {
        Ok(Ok((socket, _))) => Some(socket),
        _ => None,
    }
}

/// Prints the streamed text of debate `id` from `socket` until it closes.
async fn print_text(mut socket: Socket, id: String) {
    while let Some(Ok(message)) = socket.next().await {
        let Message::Text(text) = message else {
            continue;
        };
        let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else {
            continue;
        };
        if frame["type"] == "agent.delta" && frame["debate_id"] == id.as_str() {
            show_delta(&frame["data"]);
        }
    }
}

/// Runs the debate on a running service at `server`, with `token` as its bearer credential.
pub async fn run_remote(
    server: &str,
    token: Option<&str>,
    request: DebateRequest,
) -> Result<(), CliError> {
    let service = Service {
        client: reqwest::Client::new(),
        base: server.trim_end_matches('/'),
        token,
    };
    let mut body = serde_json::json!({"topic": request.topic, "agents": request.agents});
    for (key, value) in [
        ("rounds", request.rounds.map(Value::from)),
        ("context", request.context.clone().map(Value::from)),
        ("consensus", request.consensus.clone().map(Value::from)),
    ] {
        if let Some(value) = value {
            body[key] = value;
        }
    }
    if let Some(threshold) = request.threshold {
        body["protocol"] = serde_json::json!({"consensus_threshold": threshold});
    }
    // Open before the debate exists, so that its first words are not missed.
    let socket = text_socket(service.base, token).await;
    let id = service.create(&body).await?;
    eprintln!("debate {id} on {server}");
    let _streaming = socket.map(|socket| AbortOnDrop(tokio::spawn(print_text(socket, id.clone()))));
    service.follow(&id, request.json).await
}
