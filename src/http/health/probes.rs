//! `/healthz` and `/readyz` for orchestrators: liveness says the process
//! answers; readiness says it can serve reads that are current (the store
//! answers, the bus is connected, no projection has events left to apply).
//! A projection stalled at an event it cannot decode does not make a replica
//! unready: every replica stalls on the same event and a restart does not
//! help, so leaving the rotation would only turn a stale read model into an
//! outage; it is named in `stalled` (and in the detailed health, the log and
//! `service_projections_stalled`).
//! Both are public and small: they say what is wrong, never figures.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use super::{Probe, projection_details};
use crate::http::state::HttpState;
use crate::ops::Ops;

/// `ok` while the process answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct Liveness {
    pub status: &'static str,
}

/// Whether this replica should receive traffic, and if not, why.
#[derive(Debug, Serialize, ToSchema)]
pub struct Readiness {
    /// `ready` or `not_ready`.
    pub status: &'static str,
    /// The store answers a query.
    pub store: bool,
    /// The event bus is connected (the in-process bus always is).
    pub bus: bool,
    /// No projection has an event left to apply.
    pub projections: bool,
    /// Projections still applying events, by name.
    pub behind: Vec<&'static str>,
    /// Projections stopped at an event they cannot decode, by name; absent
    /// when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stalled: Vec<&'static str>,
}

/// Liveness: answers 200 while the process serves requests.
#[utoipa::path(get, path = "/healthz", tag = "system", security(()),
    responses((status = 200, description = "The process answers", body = Liveness)))]
pub(super) async fn healthz() -> Json<Liveness> {
    Json(Liveness { status: "ok" })
}

/// Readiness: 200 when the store answers, the bus is connected and every
/// projection has caught up with the log; else 503 naming what is not.
#[utoipa::path(get, path = "/readyz", tag = "system", security(()),
    responses(
        (status = 200, description = "Ready for traffic", body = Readiness),
        (status = 503, description = "Not ready; the body says why", body = Readiness),
    ))]
pub(super) async fn readyz(
    State(ops): State<Ops>,
    State(http): State<HttpState>,
) -> (StatusCode, Json<Readiness>) {
    let probe = Probe::run(&ops, &http).await;
    let store = probe.database == "healthy";
    let bus = probe.event_bus == "healthy";
    let (projections, behind, stalled) = if store {
        let (head, checkpoints) = tokio::join!(ops.log().feed_head(), ops.log().load_checkpoints());
        let (stalled, applying): (Vec<_>, Vec<_>) =
            projection_details(&ops, &http.lag, head.ok(), checkpoints.ok())
                .await
                .into_iter()
                .partition(|p| p.stalled.is_some());
        let behind: Vec<&'static str> = applying
            .into_iter()
            // Unknown (the head or a checkpoint unreadable) is not ready.
            .filter(|p| p.behind != Some(false))
            .map(|p| p.name)
            .collect();
        let stalled = stalled.into_iter().map(|p| p.name).collect();
        (behind.is_empty(), behind, stalled)
    } else {
        (false, Vec::new(), Vec::new())
    };
    let ready = store && bus && projections;
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = Readiness {
        status: if ready { "ready" } else { "not_ready" },
        store,
        bus,
        projections,
        behind,
        stalled,
    };
    (status, Json(body))
}
