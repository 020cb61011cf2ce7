//! `GET /api/health`: public liveness and component status (§2.3, §4.3).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

use crate::app::App;
use crate::bus::Bus;

#[derive(Debug, Serialize)]
pub struct Health {
    pub status: &'static str,
    pub version: &'static str,
    /// Seconds since start.
    pub uptime: f64,
    pub components: Components,
}

#[derive(Debug, Serialize)]
pub struct Components {
    pub database: &'static str,
    /// No Redis is used yet: always `not_configured`.
    pub redis: &'static str,
    /// No AI provider is wired yet: always `not_configured`.
    pub agents: &'static str,
    pub event_bus: &'static str,
}

pub fn router() -> Router<App> {
    Router::new().route("/api/health", get(health))
}

async fn health(State(app): State<App>) -> impl IntoResponse {
    let database = if app.log.db().ping().await {
        "healthy"
    } else {
        "unhealthy"
    };
    let event_bus = match &app.bus {
        Bus::Local(_) => "healthy",
        Bus::Nats(nats) if nats.connected() => "healthy",
        // Commands still commit while NATS is away; the relay catches up.
        Bus::Nats(_) => "degraded",
    };
    let healthy = database == "healthy";
    let body = Health {
        status: if !healthy {
            "unhealthy"
        } else if event_bus == "healthy" {
            "healthy"
        } else {
            "degraded"
        },
        version: env!("CARGO_PKG_VERSION"),
        uptime: app.started.elapsed().as_secs_f64(),
        components: Components {
            database,
            redis: "not_configured",
            agents: "not_configured",
            event_bus,
        },
    };
    let status = if healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body))
}
