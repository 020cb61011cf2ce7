//! The rate-limit middleware: runs after routing (it needs the route's
//! limits) and after authentication (it counts per user when it can), and
//! reports the bucket closest to its limit in the `X-RateLimit-*` headers.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{Action, Facts, Principal, Verdict, client_ip};
use crate::http::Platform;
use crate::http::error::ApiError;
use crate::http::routes::Mount;

pub async fn limits(State(platform): State<Platform>, request: Request, next: Next) -> Response {
    let limiter = &platform.http.limiter;
    let connect = request.extensions().get::<ConnectInfo<SocketAddr>>();
    let peer = connect.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
    let ip = client_ip(peer, request.headers(), &limiter.settings().trusted_proxies);
    let mount = request.extensions().get::<Arc<Mount>>().cloned();
    let principal = request.extensions().get::<Principal>().cloned();
    let facts = Facts {
        ip,
        route: mount.as_ref().map(|m| m.canonical.as_str()),
        path_limit: mount.as_ref().and_then(|m| m.limit),
        action: mount.as_ref().map_or(Action::Default, |m| m.action),
        principal: principal.as_ref(),
    };
    match limiter.admit(facts).await {
        Err(refused) => {
            let mut response = ApiError::RateLimited(refused.clone()).into_response();
            set_headers(response.headers_mut(), &refused);
            response
        }
        Ok(tightest) => {
            let action = facts.action;
            let mut response = next.run(request).await;
            let status = response.status();
            // A refused create made no debate: it does not use up the
            // user's `debate_create` allowance (the address bucket keeps it).
            if action == Action::DebateCreate
                && status.is_client_error()
                && status != StatusCode::TOO_MANY_REQUESTS
                && let Some(principal) = &principal
            {
                limiter.refund(principal, action).await;
            }
            if let Some(verdict) = tightest {
                set_headers(response.headers_mut(), &verdict);
            }
            response
        }
    }
}

fn set_headers(headers: &mut HeaderMap, verdict: &Verdict) {
    let mut set = |name: &'static str, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    };
    set("x-ratelimit-limit", verdict.limit.to_string());
    set("x-ratelimit-remaining", verdict.remaining.to_string());
    set("x-ratelimit-reset", verdict.reset_unix().to_string());
    if !verdict.allowed {
        set("retry-after", verdict.retry_after_secs().to_string());
    }
    if let Some(action) = verdict.action {
        set("x-ratelimit-action", action.name().to_owned());
    }
}
