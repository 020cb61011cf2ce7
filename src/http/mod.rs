//! The HTTP face. Each spec area exports `routes()`; [`with_platform`] mounts
//! them (see [`routes`]) inside the layers every request passes through,
//! outermost first: CORS; [`context`] (request id, version, span, error
//! form, v2 envelope, deprecation headers, metrics); the body-size limit and
//! timeout; [`access::identify`] (reads the credential); [`limits`] (rate
//! limits, after routing so it knows the route); [`access::guard`] (401/403
//! by the route's access rule).

pub mod access;
pub mod accounts;
pub mod admin;
pub mod agents;
pub mod as_of;
pub mod audit;
pub mod backups;
pub mod caller;
pub mod code_review;
pub mod context;
pub mod dead_letters;
pub mod debates;
pub mod docs;
pub mod dr;
pub mod error;
pub mod etag;
pub mod extract;
pub mod gallery;
pub mod health;
pub mod metrics;
pub mod paging;
pub mod privacy;
pub mod ratelimit;
pub mod receipts;
pub mod recent_errors;
pub mod routes;
pub mod scm;
pub mod serve;
pub mod shared;
pub mod sso;
pub mod state;
pub mod system;
pub mod version;
pub mod webhooks;
pub mod whole;
pub mod ws;

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use self::docs::ApiDocs;
use self::routes::{RouteTable, Routes};
use self::state::{ApiState, HttpState};
use crate::auth::Auth;

/// What the platform middleware shares.
#[derive(Debug, Clone)]
pub struct Platform {
    pub auth: Auth,
    pub http: HttpState,
    pub routes: Arc<RouteTable>,
}

/// Every area's routes.
pub fn routes() -> Routes {
    Routes::new()
        .merge(health::routes())
        .merge(metrics::routes())
        .merge(system::routes())
        .merge(admin::routes())
        .merge(dead_letters::routes())
        .merge(docs::routes())
        .merge(accounts::routes())
        .merge(debates::routes())
        .merge(agents::routes())
        .merge(ws::routes())
        .merge(webhooks::routes())
        .merge(scm::routes())
        .merge(code_review::routes())
        .merge(privacy::routes())
        .merge(receipts::routes())
        .merge(backups::routes())
        .merge(dr::routes())
        .merge(audit::routes())
        .merge(gallery::routes())
        .merge(sso::routes())
}

/// The full API router.
pub fn router(state: impl Into<ApiState>) -> Router {
    with_platform(state, routes())
}

/// The API's router with another face's `pages` (the web UI) inside the
/// same platform layers: request id, span, metrics, security headers, body
/// and time limits, the address's rate limits. The pages are not in the
/// route table or the OpenAPI document and judge their own credentials.
/// A browser (`Accept: text/html`) asking for an unknown path outside
/// `/api` gets `not_found_page`; everyone else the API's 404.
pub fn router_with_pages(
    state: impl Into<ApiState>,
    pages: Router,
    not_found_page: fn() -> Response,
) -> Router {
    platform(state.into(), routes(), pages, Some(not_found_page))
}

/// `routes` inside the platform layers, documented and limited like the
/// rest of the API.
pub fn with_platform(state: impl Into<ApiState>, routes: Routes) -> Router {
    platform(state.into(), routes, Router::new(), None)
}

fn platform(
    app: ApiState,
    routes: Routes,
    pages: Router,
    not_found_page: Option<fn() -> Response>,
) -> Router {
    let (router, table, paths, schemas) = routes.into_parts();
    let table = Arc::new(table);
    let mut document = docs::document(paths, schemas, &table);
    debates::fit_create_schema(
        &mut document,
        app.agents.name_pattern(),
        app.debates.limits(),
    );
    let paging = paging::Paging::new(app.settings.http.pages);
    let errors = app.http.recent_errors.capacity() as u64;
    let stated = [
        paging.stated().as_slice(),
        &[("SERVICE_RECENT_ERRORS", errors)],
    ]
    .concat();
    paging::fit_limits(&mut document, &stated);
    paging.fit_batch(&mut document);
    webhooks::fit_schema(
        &mut document,
        app.webhooks.url_max_chars(),
        app.webhooks.description_max_chars(),
    );
    let docs = Arc::new(ApiDocs::new(&document));
    let platform = Platform {
        auth: app.auth.clone(),
        http: app.http.clone(),
        routes: table.clone(),
    };
    let http = app.settings.http.clone();
    router
        .with_state(app)
        .merge(pages)
        .fallback(
            move |method: Method, uri: Uri, headers: HeaderMap| async move {
                match not_found_page {
                    Some(page) if !version::is_api(uri.path()) && accepts_html(&headers) => page(),
                    _ => error::not_found(method, uri).await.into_response(),
                }
            },
        )
        .layer(axum::middleware::from_fn(access::guard))
        .layer(from_fn_with_state(
            platform.clone(),
            ratelimit::middleware::limits,
        ))
        .layer(from_fn_with_state(platform.clone(), access::identify))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            http.request_timeout,
        ))
        .layer(RequestBodyLimitLayer::new(http.max_body_bytes))
        .layer(Extension(docs))
        .layer(Extension(table))
        .layer(from_fn_with_state(platform, context::context))
        .layer(cors(&http.allowed_origins))
}

fn accepts_html(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/html"))
}

fn cors(origins: &[String]) -> CorsLayer {
    let origins: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o).ok())
        .collect();
    let name = HeaderName::from_static;
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins))
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
            Method::OPTIONS,
        ])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            header::ACCEPT,
            name("x-request-id"),
            name("x-api-version"),
        ])
        .expose_headers([
            name("x-request-id"),
            name("x-api-version"),
            name("x-ratelimit-limit"),
            name("x-ratelimit-remaining"),
            name("x-ratelimit-reset"),
            name("x-ratelimit-action"),
            header::RETRY_AFTER,
            name("deprecation"),
            name("sunset"),
            header::LINK,
            name("x-deprecation-level"),
            name("x-api-deprecated"),
        ])
        .max_age(std::time::Duration::from_secs(600))
}
