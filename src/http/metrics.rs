//! Prometheus metrics: one recorder per process (the `metrics` facade is
//! global), rendered at `/api/metrics` and `/metrics`. Each part registers
//! the `service_*` names it produces; the HTTP face records
//! `service_http_requests_total` and `service_http_request_duration_seconds`.

use std::sync::OnceLock;
use std::time::Duration;

use axum::http::header;
use axum::response::IntoResponse;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use utoipa_axum::routes;

use super::routes::{RouteSpec, Routes};
use crate::auth::rbac::Permission;

/// Latency buckets in seconds, from a fast read to a slow agent call.
const SECONDS_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The process's recorder, installed on first use.
pub fn handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), &SECONDS_BUCKETS)
                .unwrap_or_else(|_| PrometheusBuilder::new());
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("another metrics recorder is installed; /metrics will be empty");
            }
            describe();
            spawn_upkeep(handle.clone());
            handle
        })
        .clone()
}

/// How often histogram samples are folded into their buckets.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Folds recorded histogram samples into their buckets every
/// [`UPKEEP_EVERY`]. The recorder keeps every sample it is given until
/// upkeep runs, and only a scrape ran it: without scrapes each request's
/// latency samples (about 24 bytes a request) stayed for the life of the
/// process. A plain thread, so it needs no runtime; it lives as long as
/// the process.
fn spawn_upkeep(handle: PrometheusHandle) {
    let spawned = std::thread::Builder::new()
        .name("metrics-upkeep".to_owned())
        .spawn(move || {
            loop {
                std::thread::sleep(UPKEEP_EVERY);
                handle.run_upkeep();
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start metrics upkeep; histograms drain only on scrapes");
    }
}

fn describe() {
    crate::agents::describe_metrics();
    metrics::describe_counter!("service_debates_total", "Debates created");
    metrics::describe_counter!(
        "service_debates_completed",
        "Debates that completed with a consensus result"
    );
    metrics::describe_counter!(
        "service_debates_failed_total",
        "Debates that failed (every agent failed, or no vote)"
    );
    metrics::describe_counter!(
        "service_http_requests_total",
        "HTTP requests answered, by method, route and status"
    );
    metrics::describe_histogram!(
        "service_http_request_duration_seconds",
        metrics::Unit::Seconds,
        "Time to answer an HTTP request, by method, route and status"
    );
    metrics::describe_counter!(
        "service_rate_limit_rejections_total",
        "Requests refused by a rate limit, by bucket family"
    );
}

pub fn routes() -> Routes {
    Routes::new().add(
        routes!(prometheus),
        // Every route's traffic and every agent's calls: admins only.
        RouteSpec::new()
            .requires(Permission::Admin)
            .v2_at("/api/v2/system/metrics")
            .also_at("/metrics")
            .raw(),
    )
}

/// Prometheus text exposition format.
#[utoipa::path(get, path = "/api/metrics", tag = "system",
    responses((status = 200, description = "Metrics in the Prometheus text format", content_type = "text/plain", body = String)))]
async fn prometheus() -> impl IntoResponse {
    let handle = handle();
    handle.run_upkeep();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        handle.render(),
    )
}
