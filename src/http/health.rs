//! The health family (§2.3, §4.3): `GET /api/health` (public, both
//! documented forms in one body) and the detailed report served at
//! `/api/health/detailed` and `/api/metrics/health`. Every figure is read
//! from the running parts; a part that is not built says `not_configured`.
//! `/healthz` and `/readyz` ([`probes`]) serve orchestrators.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use agon_projections::Cursor;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::ratelimit::{Backend, Endpoint, PathLimit};
use super::routes::{RouteSpec, Routes};
use crate::auth::rbac::Permission;
use crate::bus::Bus;
use crate::http::state::HttpState;
use crate::ops::Ops;
use crate::projection;

mod lag;
mod probes;

pub use lag::Memo as LagMemo;

pub fn routes() -> Routes {
    Routes::new()
        .add(
            routes!(health),
            RouteSpec::new()
                .public()
                .v2_at("/api/v2/system/health")
                .limit(PathLimit::Endpoint(Endpoint::Health)),
        )
        .add(
            routes!(probes::healthz),
            RouteSpec::unversioned()
                .public()
                .limit(PathLimit::Endpoint(Endpoint::Health)),
        )
        .add(
            routes!(probes::readyz),
            RouteSpec::unversioned()
                .public()
                .limit(PathLimit::Endpoint(Endpoint::Health)),
        )
        .add(
            routes!(detailed),
            // Operations data (database latency, projection positions): admins only.
            RouteSpec::new()
                .requires(Permission::Admin)
                .also_at("/api/metrics/health"),
        )
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `healthy`, `degraded` (working, a shared part missing) or `unhealthy`.
    pub status: &'static str,
    pub version: &'static str,
    /// Seconds since start.
    pub uptime: f64,
    pub components: Components,
    /// The second documented form: `checks.<part>.status`.
    pub checks: BTreeMap<&'static str, Check>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Components {
    pub database: &'static str,
    /// `not_configured`, `healthy`, or `unavailable` (rate limits fall back).
    pub redis: &'static str,
    /// `healthy` (every circuit breaker closed or half-open; demo agents are
    /// always there) or `degraded` while an agent's breaker is open.
    pub agents: &'static str,
    pub event_bus: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Check {
    pub status: &'static str,
}

/// What every health answer is computed from.
struct Probe {
    database: &'static str,
    database_latency_ms: f64,
    redis: &'static str,
    event_bus: &'static str,
}

impl Probe {
    async fn run(ops: &Ops, http: &HttpState) -> Self {
        let started = Instant::now();
        let database = if ops.log().db().ping().await {
            "healthy"
        } else {
            "unhealthy"
        };
        let database_latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        let redis = http.limiter.redis_status();
        let event_bus = match ops.bus() {
            Bus::Local(_) => "healthy",
            Bus::Nats(nats) if nats.connected() => "healthy",
            // Commands still commit while NATS is away; the relay catches up.
            Bus::Nats(_) => "degraded",
        };
        Self {
            database,
            database_latency_ms,
            redis,
            event_bus,
        }
    }

    fn status(&self) -> &'static str {
        if self.database != "healthy" {
            "unhealthy"
        } else if self.event_bus != "healthy" || self.redis == "unavailable" {
            "degraded"
        } else {
            "healthy"
        }
    }

    fn http_status(&self) -> StatusCode {
        if self.database == "healthy" {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        }
    }

    fn health(&self, ops: &Ops) -> Health {
        Health {
            status: self.status(),
            version: env!("CARGO_PKG_VERSION"),
            uptime: ops.uptime().as_secs_f64(),
            components: Components {
                database: self.database,
                redis: self.redis,
                agents: if ops.agents().breakers().iter().any(|b| b.state == "open") {
                    "degraded"
                } else {
                    "healthy"
                },
                event_bus: self.event_bus,
            },
            checks: BTreeMap::from([
                (
                    "database",
                    Check {
                        status: self.database,
                    },
                ),
                ("redis", Check { status: self.redis }),
                (
                    "event_bus",
                    Check {
                        status: self.event_bus,
                    },
                ),
            ]),
        }
    }
}

/// Liveness and component status.
#[utoipa::path(get, path = "/api/health", tag = "system", security(()),
    responses(
        (status = 200, description = "Working (possibly degraded)", body = Health),
        (status = 503, description = "The database is unreachable", body = Health),
    ))]
async fn health(
    State(ops): State<Ops>,
    State(http): State<HttpState>,
) -> (StatusCode, Json<Health>) {
    let probe = Probe::run(&ops, &http).await;
    (probe.http_status(), Json(probe.health(&ops)))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DetailedHealth {
    #[serde(flatten)]
    pub summary: Health,
    pub timestamp: DateTime<Utc>,
    pub database: DatabaseDetail,
    pub event_bus: BusDetail,
    pub rate_limits: RateLimitDetail,
    pub projections: Vec<ProjectionDetail>,
    pub seals: SealDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DatabaseDetail {
    pub status: &'static str,
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    pub latency_ms: f64,
    /// Position of the newest event the feed serves.
    pub head_position: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BusDetail {
    pub status: &'static str,
    /// `in-process` or `nats-jetstream`.
    pub kind: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RateLimitDetail {
    pub backend: Backend,
    pub redis: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ProjectionDetail {
    pub name: &'static str,
    /// Position of the last event applied.
    pub checkpoint_position: Option<i64>,
    /// True while an event the projection applies waits past its
    /// checkpoint. Events it ignores do not count: a projection saves its
    /// checkpoint over them at most once a second, so an idle one may sit
    /// below the head while having nothing left to do.
    pub behind: Option<bool>,
    /// Set while the projection is stopped at an event it cannot decode
    /// (in this process): it will not pass it until fixed.
    pub stalled: Option<StalledDetail>,
}

/// The event a stalled projection stopped at, and why.
#[derive(Debug, Serialize, ToSchema)]
pub struct StalledDetail {
    pub position: i64,
    pub txid: i64,
    pub event_id: String,
    pub event_type: String,
    pub event_version: String,
    /// The decode error.
    pub error: String,
}

/// Each projection's checkpoint, whether it has events left to apply, and
/// where it is stalled, from the feed `head` and every consumer's
/// checkpoint (`None`: unreadable, the database status says why).
async fn projection_details(
    ops: &Ops,
    memo: &lag::Memo,
    head: Option<Cursor>,
    checkpoints: Option<HashMap<String, Cursor>>,
) -> Vec<ProjectionDetail> {
    let checkpoints: Option<Vec<(&str, Cursor)>> = checkpoints.map(|stored| {
        projection::registry::names()
            .map(|name| {
                let at = stored.get(&projection::checkpoint_name(name)).copied();
                (name, at.unwrap_or(Cursor::START))
            })
            .collect()
    });
    let behind = match (head, &checkpoints) {
        (Some(head), Some(checkpoints)) => {
            lag::behind(ops.log(), memo, checkpoints, head).await.ok()
        }
        _ => None,
    };
    let mut stalls = ops.bus().delivery().stalls();
    projection::registry::names()
        .enumerate()
        .map(|(i, name)| ProjectionDetail {
            name,
            checkpoint_position: checkpoints.as_ref().map(|c| c[i].1.position),
            behind: behind.as_ref().map(|b| b[i]),
            stalled: stalls.remove(name).map(|stall| StalledDetail {
                position: stall.cursor.position,
                txid: stall.cursor.txid,
                event_id: stall.event_id,
                event_type: stall.event_type,
                event_version: stall.event_version,
                error: stall.error,
            }),
        })
        .collect()
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SealDetail {
    pub last_seal_number: Option<i64>,
    /// Position of the newest sealed event.
    pub sealed_through_position: Option<i64>,
    pub interval_seconds: u64,
}

/// Every part's state, with the figures behind it.
#[utoipa::path(get, path = "/api/health/detailed", tag = "system",
    responses(
        (status = 200, description = "Working (possibly degraded)", body = DetailedHealth),
        (status = 503, description = "The database is unreachable", body = DetailedHealth),
    ))]
async fn detailed(
    State(ops): State<Ops>,
    State(http): State<HttpState>,
) -> (StatusCode, Json<DetailedHealth>) {
    // Side by side, each a read or two: the report waits for the slowest,
    // not for their sum. A failing read leaves its figure empty: the
    // database status says why.
    let log = ops.log();
    let (probe, head, checkpoints, last_seal) = tokio::join!(
        Probe::run(&ops, &http),
        log.feed_head(),
        log.load_checkpoints(),
        log.last_seal(),
    );
    let head = head.ok();
    let projections = projection_details(&ops, &http.lag, head, checkpoints.ok()).await;
    let last_seal = last_seal.ok().flatten();
    let body = DetailedHealth {
        summary: probe.health(&ops),
        timestamp: Utc::now(),
        database: DatabaseDetail {
            status: probe.database,
            backend: ops.log().backend().name(),
            latency_ms: probe.database_latency_ms,
            head_position: head.map(|c| c.position),
        },
        event_bus: BusDetail {
            status: probe.event_bus,
            kind: ops.bus().name(),
        },
        rate_limits: RateLimitDetail {
            backend: http.limiter.backend(),
            redis: probe.redis,
        },
        projections,
        seals: SealDetail {
            last_seal_number: last_seal.as_ref().map(|s| s.seal_number),
            sealed_through_position: last_seal.as_ref().map(|s| s.to_position),
            interval_seconds: ops.seal_interval().as_secs(),
        },
    };
    (probe.http_status(), Json(body))
}

/// The body of `GET /api/health/detailed` as JSON, for the web console.
pub async fn detailed_json(ops: &Ops, http: &HttpState) -> serde_json::Value {
    let (_, Json(body)) = detailed(State(ops.clone()), State(http.clone())).await;
    serde_json::to_value(body).unwrap_or_default()
}
