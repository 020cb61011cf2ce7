//! The outermost API middleware. For every request it settles the request
//! id, the API version and the route, runs the request inside a span that
//! carries the id, and on the way out renders errors in the version's form,
//! wraps v2 bodies, adds the version and deprecation headers, records the
//! request metrics and remembers errors for `/api/system/errors`.

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, to_bytes};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde_json::Value;
use tracing::Instrument;

use super::Platform;
use super::error::{ApiError, ErrorForm, ErrorReport};
use super::recent_errors::RecordedError;
use super::routes::{Mount, MountKind};
use super::version::{
    ApiVersion, ListLinks, Negotiated, envelope, is_api, negotiate, v1_deprecation,
};

/// The request's correlation id (`X-Request-ID`), also the errors' `trace_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(pub Arc<str>);

/// Largest body the v2 envelope buffers; bigger JSON goes out unwrapped.
const ENVELOPE_LIMIT: usize = 16 * 1024 * 1024;

pub async fn context(
    State(platform): State<Platform>,
    matched: Option<MatchedPath>,
    mut request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let request_id = RequestId(request_id(request.headers()).into());
    let mount = matched.and_then(|m| platform.routes.get(m.as_str(), request.method()).cloned());
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let span = tracing::info_span!(
        "request",
        request_id = %request_id.0,
        method = %method,
        path = %path,
    );
    async move {
        let negotiated = negotiate(&path, request.headers());
        let (form, response) = match negotiated {
            // No version could be chosen: an `/api` path still answers a
            // string `error` (the v1 form, the default version's).
            Err(error) if is_api(&path) => (ErrorForm::V1, error.into_response()),
            Err(error) => (ErrorForm::General, error.into_response()),
            Ok(negotiated) => {
                // Only v2 lists link to themselves; the others need no copy.
                let self_link = (negotiated.version == ApiVersion::V2).then(|| {
                    request
                        .uri()
                        .path_and_query()
                        .map_or_else(|| path.clone(), |pq| pq.as_str().to_owned())
                });
                request.extensions_mut().insert(negotiated);
                request.extensions_mut().insert(request_id.clone());
                if let Some(mount) = &mount {
                    request.extensions_mut().insert(mount.clone());
                }
                let limit = platform.http.max_header_bytes;
                let mut response = match oversized(&request, limit) {
                    Some(status) => status.into_response(),
                    None => {
                        let scope = crate::request::RequestScope {
                            request_id: request_id.0.clone(),
                        };
                        crate::request::within(scope, next.run(request)).await
                    }
                };
                if let Some(self_link) = self_link
                    && mount.as_ref().is_some_and(|m| m.enveloped)
                {
                    response = wrap_v2(response, &request_id.0, &self_link).await;
                }
                add_version_headers(&mut response, negotiated, mount.as_deref(), &path);
                (negotiated.error_form(&path), response)
            }
        };
        let mut response = render_error(response, form, &request_id.0, &platform, &method, &path);
        secure(response.headers_mut());
        if let Ok(value) = HeaderValue::from_str(&request_id.0) {
            response.headers_mut().insert("x-request-id", value);
        }
        let route = mount.as_ref().map_or("unmatched", |m| m.path.as_str());
        let status = response.status();
        let elapsed = started.elapsed();
        let labels = [
            ("method", method.to_string()),
            ("route", route.to_owned()),
            ("status", status.as_u16().to_string()),
        ];
        metrics::counter!("service_http_requests_total", &labels).increment(1);
        metrics::histogram!("service_http_request_duration_seconds", &labels)
            .record(elapsed.as_secs_f64());
        tracing::info!(
            status = status.as_u16(),
            route,
            latency_ms = elapsed.as_secs_f64() * 1000.0,
            "request finished"
        );
        response
    }
    .instrument(span)
    .await
}

/// 414 for a request target longer than `limit` bytes, 431 for a request
/// line and headers longer together: answered here, in the spec's form,
/// rather than by hyper's bare refusals (whose buffer is set above `limit`).
fn oversized(request: &Request, limit: usize) -> Option<StatusCode> {
    let target = request
        .uri()
        .path_and_query()
        .map_or(0, |pq| pq.as_str().len());
    if target > limit {
        return Some(StatusCode::URI_TOO_LONG);
    }
    let headers: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    (target + headers > limit).then_some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
}

/// Headers every response carries: no MIME sniffing, no referrer, pages
/// that cannot be framed, and nothing cached unless a handler says so (most
/// bodies carry a token, a secret or someone's data).
fn secure(headers: &mut HeaderMap) {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    let html = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"));
    if html {
        // The gallery's embed card alone may be framed, by any site.
        let embeddable = headers
            .get(header::CONTENT_SECURITY_POLICY)
            .is_some_and(|v| v == crate::views::EMBED_POLICY);
        if !embeddable {
            headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        }
        // A page with needs of its own (Redoc's injected styles) sets its
        // own policy; every other page gets the one policy.
        if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
            headers.insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(crate::views::PAGE_POLICY),
            );
        }
    }
}

/// The caller's id when it is printable and of sane length, else a new one.
fn request_id(headers: &HeaderMap) -> String {
    headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|id| (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic()))
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned)
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

async fn wrap_v2(response: Response, request_id: &str, self_link: &str) -> Response {
    if !response.status().is_success() || !is_json(response.headers()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = match to_bytes(body, ENVELOPE_LIMIT).await {
        Ok(bytes) => bytes,
        Err(e) => return ApiError::Internal(Box::new(e)).into_response(),
    };
    let Ok(data) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let links = parts
        .extensions
        .get::<ListLinks>()
        .cloned()
        .or_else(|| ListLinks::from_page(&data, self_link));
    let wrapped = envelope(
        data,
        request_id,
        Utc::now(),
        links.as_ref().map(|l| (self_link, l)),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(wrapped.to_string()))
}

fn add_version_headers(
    response: &mut Response,
    negotiated: Negotiated,
    mount: Option<&Mount>,
    path: &str,
) {
    let headers = response.headers_mut();
    headers.insert(
        "x-api-version",
        HeaderValue::from_static(negotiated.version.number()),
    );
    let Some(mount) = mount.filter(|m| m.versioned) else {
        return;
    };
    // v1 asked for by name (`/api/v1/`, a version header) is past its
    // sunset and says so; aliases are deprecated whatever the version. An
    // unprefixed path with no version asked for is the supported legacy
    // face (§9: "remain supported"): it answers v1 bodies without claiming
    // to be gone, so that a new user following the README is not told so.
    let deprecated = mount.kind == MountKind::Alias
        || (negotiated.version == ApiVersion::V1
            && negotiated.explicit
            && mount.kind != MountKind::V2);
    if deprecated {
        let successor = mount.successor_for(path);
        v1_deprecation().apply(headers, successor.as_deref(), Utc::now());
    }
}

fn is_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"))
}

/// Gives every error response the body of `form`, logs internal causes and
/// records the error.
fn render_error(
    response: Response,
    form: ErrorForm,
    trace_id: &str,
    platform: &Platform,
    method: &axum::http::Method,
    path: &str,
) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let report = match response.extensions().get::<Arc<ErrorReport>>() {
        Some(report) => report.clone(),
        // Some layer answered without our error type (axum's 405, a timeout,
        // a length limit): replace its bare body. JSON bodies are meant.
        // A page opened from a mail's link explains the error itself.
        None if is_html(response.headers()) => return response,
        None if !is_json(response.headers()) => Arc::new(ErrorReport::for_status(status)),
        None => return response,
    };
    if let Some(cause) = &report.internal_cause {
        tracing::error!(cause = %cause, "request failed");
    }
    platform
        .http
        .recent_errors
        .record(RecordedError::new(trace_id, method, path, &report));
    let (mut parts, _) = response.into_parts();
    if status == StatusCode::UNAUTHORIZED {
        // RFC 6750: say which scheme, and whether the token itself was bad.
        let challenge = match report.message.as_str() {
            "Invalid token" | "Token expired" => "Bearer realm=\"agon\", error=\"invalid_token\"",
            _ => "Bearer realm=\"agon\"",
        };
        parts.headers.insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(challenge),
        );
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let body = report.body(form, trace_id).to_string();
    Response::from_parts(parts, Body::from(body))
}
