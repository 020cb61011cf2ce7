//! The WebSocket push (spec §6.1, §4.3): the `/ws` upgrade (on the API
//! port and on `--ws-port`), the ticket a browser opens it with, its
//! public health and its statistics. The protocol is described once, in
//! [`PROTOCOL`], which the OpenAPI document and README repeat.
//!
//! Credentials: a single-use `ticket` from `POST /api/ws/ticket`, the SDK's
//! `token` query parameter, a `bearer.<token>` entry in
//! `Sec-WebSocket-Protocol`, or the usual headers. Query strings are never
//! logged (the request span holds the path only).

mod socket;

use std::net::SocketAddr;

use axum::Json;
use axum::Router;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::http::header::{COOKIE, HOST, ORIGIN, SEC_WEBSOCKET_PROTOCOL};
use axum::response::Response;
use axum::routing::get;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::ApiQuery;
use super::ratelimit::{Endpoint, PathLimit, Principal, Tier, Verdict};
use super::routes::{RouteSpec, Routes};
use super::state::ApiState;
use crate::auth::{Auth, Caller, Presented};
use crate::push::{Push, PushError, Start};

/// The subprotocol a browser offers beside `bearer.<token>`; the server
/// answers with it.
pub const SUBPROTOCOL: &str = "agon.v1";

/// The protocol, for the OpenAPI description of `/ws`.
pub const PROTOCOL: &str = include_str!("ws/protocol.md");

pub fn routes() -> Routes {
    Routes::new()
        // Public at the route: the handler authenticates, since the
        // credential may ride in the query or the subprotocol header.
        .add(routes!(ws_upgrade), RouteSpec::unversioned().public())
        .add(routes!(ws_ticket), RouteSpec::new())
        .add(
            routes!(ws_health),
            RouteSpec::new()
                .public()
                .limit(PathLimit::Endpoint(Endpoint::Health)),
        )
        .add(routes!(ws_stats), RouteSpec::new())
}

/// The router of `--ws-port`: `/ws` alone.
pub fn router(state: impl Into<ApiState>) -> Router {
    Router::new()
        .route("/ws", get(ws_upgrade))
        .with_state(state.into())
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WsQuery {
    /// A bearer token (access token, API key): what the Python SDK sends.
    pub token: Option<String>,
    /// A single-use ticket from `POST /api/ws/ticket` (browsers).
    pub ticket: Option<String>,
    /// Follow this debate from the start.
    pub debate_id: Option<String>,
    /// `true`: every debate the caller may read.
    pub all: Option<bool>,
    /// Replay every frame after this position from the log, then go live.
    #[param(minimum = 0)]
    pub since: Option<i64>,
    /// Comma-separated frame types to receive (default all).
    pub kinds: Option<String>,
    /// `json` (default) or `html`: the web UI's fragments (needs
    /// `debate_id` and `since`, no `kinds`).
    #[param(pattern = "^(json|html)$")]
    pub format: Option<String>,
}

/// Opens the WebSocket push (the protocol is in the description).
#[utoipa::path(get, path = "/ws", tag = "events", params(WsQuery),
    description = include_str!("ws/protocol.md"),
    responses(
        (status = 101, description = "Switching to the WebSocket protocol"),
        (status = 400, description = "Not a WebSocket upgrade, or a bad query"),
        (status = 401, description = "No valid credential"),
        (status = 403, description = "Origin not allowed"),
        (status = 429, description = "The tier's connection cap is reached (`Retry-After`: the heartbeat)"),
    ))]
async fn ws_upgrade(
    State(push): State<Push>,
    State(auth): State<Auth>,
    connect: Option<axum::Extension<ConnectInfo<SocketAddr>>>,
    principal: Option<axum::Extension<Principal>>,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<WsQuery>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let upgrade = upgrade.map_err(|rejection| ApiError::BadRequest {
        message: "A WebSocket upgrade request is required".to_owned(),
        details: json!({"reason": rejection.body_text()}),
    })?;
    if !origin_allowed(&headers, push.allowed_origins()) {
        return Err(ApiError::Forbidden(
            "Origin not allowed (SERVICE_ALLOWED_ORIGINS)".to_owned(),
        ));
    }
    if !push.available() {
        return Err(ApiError::Unavailable(
            "The WebSocket push is not running".to_owned(),
        ));
    }
    let html = html_mode(&push, &query)?;
    let caller = authenticate(&push, &auth, &query, &headers, connect.map(|c| (c.0).0)).await?;
    let tier = principal.and_then(|p| p.0.tier).unwrap_or(Tier::Free);
    let caps = push.settings().max_connections;
    let cap = match tier {
        Tier::Free => caps.free,
        Tier::Starter | Tier::Professional => caps.pro,
        Tier::Enterprise => caps.enterprise,
    };
    let slot = push.admit(&caller, cap).map_err(|error| match error {
        // A limit, not a permission: 429 in the rate-limit form. A socket
        // whose client vanished is closed by the next heartbeat, so that is
        // when to try again at the latest.
        PushError::TooManyConnections { cap } => ApiError::RateLimited(Verdict::capped(
            "ws_connections",
            cap,
            push.settings().heartbeat,
        )),
        PushError::Ended => ApiError::Unauthorized("The session has ended".to_owned()),
        other => ApiError::Internal(Box::new(other)),
    })?;
    let start = Start {
        debate_id: query.debate_id,
        all: query.all.unwrap_or(false),
        since: query.since,
        kinds: query.kinds.map(|kinds| {
            kinds
                .split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
                .collect()
        }),
        html,
    };
    let size = push.settings().max_message_size;
    let listening = push.listen();
    Ok(upgrade
        .protocols([SUBPROTOCOL])
        .max_message_size(size)
        .read_buffer_size(push.settings().read_buffer)
        .max_frame_size(size)
        .on_upgrade(move |ws| socket::serve(ws, push, caller, (start, listening), slot)))
}

/// Whether the socket asks for the HTML mode, which follows one debate from
/// a position, every frame of it (its fragments build on each other).
fn html_mode(push: &Push, query: &WsQuery) -> Result<bool, ApiError> {
    let bad = |message: &str| ApiError::BadRequest {
        message: message.to_owned(),
        details: json!({"parameter": "format"}),
    };
    match query.format.as_deref() {
        None | Some("json") => Ok(false),
        Some("html") if !push.renders_html() => Err(bad("The HTML mode is not served here")),
        Some("html") if query.debate_id.is_none() || query.since.is_none() => {
            Err(bad("format=html needs debate_id and since"))
        }
        Some("html") if query.kinds.is_some() || query.all == Some(true) => {
            Err(bad("format=html takes neither kinds nor all"))
        }
        Some("html") => Ok(true),
        Some(_) => Err(bad("format must be json or html")),
    }
}

/// The caller a ticket, a `token`, a `bearer.` subprotocol, the headers or
/// (from an allowed `Origin` only) the web UI's session cookie present, in
/// that order; 401 without one.
async fn authenticate(
    push: &Push,
    auth: &Auth,
    query: &WsQuery,
    headers: &HeaderMap,
    peer: Option<SocketAddr>,
) -> Result<Caller, ApiError> {
    if let Some(ticket) = &query.ticket {
        let refused = || ApiError::Unauthorized("Invalid or expired ticket".to_owned());
        let caller = push
            .redeem(ticket)
            .await
            .map_err(ticket_error)?
            .ok_or_else(refused)?;
        // The session or key may have ended since the ticket was issued.
        return match auth.still_valid(&caller).await {
            Ok(true) => Ok(caller),
            Ok(false) => Err(refused()),
            Err(error) => Err(ApiError::from(&error)),
        };
    }
    let mut by_cookie = false;
    let presented = match (&query.token, subprotocol_token(headers)) {
        (Some(token), _) if !token.trim().is_empty() => Presented::Bearer(token.trim().to_owned()),
        (_, Some(token)) => Presented::Bearer(token),
        _ => match (super::caller::presented(headers), session_cookie(headers)) {
            (Presented::Nothing, Some(token)) => {
                by_cookie = true;
                Presented::Bearer(token)
            }
            (presented, _) => presented,
        },
    };
    match auth.identify(presented, peer.map(|p| p.ip())).await {
        // The cookie stands for a signed-in browser only (as on the pages).
        Ok(Some(caller))
            if by_cookie
                && !matches!(caller.credential, crate::auth::Credential::Session { .. }) =>
        {
            Err(ApiError::Unauthorized("Authentication required".to_owned()))
        }
        Ok(Some(caller)) => Ok(caller),
        Ok(None) => Err(ApiError::Unauthorized("Authentication required".to_owned())),
        Err(error) => Err(ApiError::from(&error)),
    }
}

/// The token of a `bearer.<token>` entry in `Sec-WebSocket-Protocol`.
fn subprotocol_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .find_map(|entry| entry.trim().strip_prefix("bearer.").map(str::to_owned))
        .filter(|token| !token.is_empty())
}

/// The web UI's session cookie, only from a browser page of an allowed
/// origin (checked before, [`origin_allowed`]): a request without `Origin`
/// never sends it, and a page of another origin was refused already.
fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers.get(ORIGIN)?;
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|line| line.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == crate::views::SESSION_COOKIE)
        .map(|(_, value)| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

/// A browser's `Origin` must be listed in `SERVICE_ALLOWED_ORIGINS` or be
/// the service's own; clients without one (the SDK, servers) pass.
fn origin_allowed(headers: &HeaderMap, allowed: &[String]) -> bool {
    let Some(origin) = headers.get(ORIGIN) else {
        return true;
    };
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    if allowed.iter().any(|a| a == origin) {
        return true;
    }
    let host = headers.get(HOST).and_then(|h| h.to_str().ok());
    let own = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    own.is_some() && own == host
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WsTicket {
    /// Pass as `?ticket=` when opening `/ws`; valid once.
    pub ticket: String,
    /// Seconds the ticket stays valid.
    pub expires_in: u64,
}

/// The answer to a ticket that cannot be issued or read: 401 for an ended
/// credential, the store's form when the database is away.
fn ticket_error(error: PushError) -> ApiError {
    match error {
        PushError::Ended => ApiError::Unauthorized("The session has ended".to_owned()),
        PushError::Store(error) => ApiError::from(error),
        other => ApiError::Internal(Box::new(other)),
    }
}

/// A single-use ticket to open `/ws` without a credential in the URL.
#[utoipa::path(post, path = "/api/ws/ticket", tag = "events",
    responses((status = 200, body = WsTicket), (status = 401, description = "No valid credential")))]
async fn ws_ticket(State(push): State<Push>, caller: Caller) -> Result<Json<WsTicket>, ApiError> {
    let (ticket, ttl) = push.issue_ticket(caller).await.map_err(ticket_error)?;
    Ok(Json(WsTicket {
        ticket,
        expires_in: ttl.as_secs(),
    }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WsHealth {
    /// `healthy` or `unavailable`.
    pub status: &'static str,
    /// Sockets open on this replica.
    pub clients: i64,
    /// Why, when unavailable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<&'static str>,
}

/// WebSocket health (public).
#[utoipa::path(get, path = "/api/health/ws", tag = "system",
    responses((status = 200, body = WsHealth)))]
async fn ws_health(State(push): State<Push>) -> Json<WsHealth> {
    let available = push.available();
    Json(WsHealth {
        status: if available { "healthy" } else { "unavailable" },
        clients: push.stats().connections,
        message: (!available)
            .then_some("the push does not follow the event bus (starting or stopping)"),
    })
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WsStats {
    /// Sockets open on this replica.
    pub connections: i64,
    /// Debates followed, counting an all-debates subscription once.
    pub subscriptions: i64,
    /// Frames written since start.
    pub messages_sent: u64,
    /// Clients closed as slow consumers (4008) since start.
    pub dropped_slow_clients: u64,
    /// Streamed-text frames (`agent.delta`) a client did not get since
    /// start: its send buffer was half full, or it fell behind the ring of
    /// pieces (`SERVICE_DELTA_BUFFER`). The recorded message follows them.
    pub dropped_deltas: u64,
    pub heartbeat_seconds: u64,
    pub max_message_size: usize,
    pub send_buffer: usize,
}

/// WebSocket connection statistics of this replica.
#[utoipa::path(get, path = "/api/ws/stats", tag = "system",
    responses((status = 200, body = WsStats), (status = 401, description = "No valid credential")))]
async fn ws_stats(State(push): State<Push>) -> Json<WsStats> {
    let stats = push.stats();
    let settings = push.settings();
    Json(WsStats {
        connections: stats.connections,
        subscriptions: stats.subscriptions,
        messages_sent: stats.messages_sent,
        dropped_slow_clients: stats.dropped_slow_clients,
        dropped_deltas: stats.dropped_deltas,
        heartbeat_seconds: settings.heartbeat.as_secs(),
        max_message_size: settings.max_message_size,
        send_buffer: settings.send_buffer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn only_listed_or_own_origins_open_sockets() {
        let allowed = ["https://app.example".to_owned()];
        assert!(origin_allowed(&headers(&[]), &allowed));
        assert!(origin_allowed(
            &headers(&[("origin", "https://app.example")]),
            &allowed
        ));
        let own = headers(&[
            ("origin", "http://127.0.0.1:8080"),
            ("host", "127.0.0.1:8080"),
        ]);
        assert!(origin_allowed(&own, &allowed));
        assert!(!origin_allowed(
            &headers(&[("origin", "https://evil.example")]),
            &allowed
        ));
    }

    #[test]
    fn the_session_cookie_counts_only_from_a_page() {
        let cookie = ("cookie", "a=1; __Host-agon_session=tok.en; b=2");
        assert_eq!(session_cookie(&headers(&[cookie])), None);
        let page = headers(&[cookie, ("origin", "http://127.0.0.1:8080")]);
        assert_eq!(session_cookie(&page).as_deref(), Some("tok.en"));
        let other = headers(&[("cookie", "__Host-agon_refresh=x"), ("origin", "http://h")]);
        assert_eq!(session_cookie(&other), None);
    }

    #[test]
    fn the_subprotocol_carries_a_bearer() {
        let map = headers(&[("sec-websocket-protocol", "agon.v1, bearer.abc.def")]);
        assert_eq!(subprotocol_token(&map).as_deref(), Some("abc.def"));
        assert_eq!(
            subprotocol_token(&headers(&[("sec-websocket-protocol", "agon.v1")])),
            None
        );
    }
}
