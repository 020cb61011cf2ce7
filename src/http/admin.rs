//! `GET /api/admin/stats`: statistics from the `admin_stats` projection.
//! Admin only.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::error::ApiError;
use super::ratelimit::Action;
use super::routes::{RouteSpec, Routes};
use crate::auth::rbac::Permission;
use crate::ops::Ops;

pub fn routes() -> Routes {
    Routes::new().add(
        routes!(stats),
        RouteSpec::new()
            .action(Action::Admin)
            .requires(Permission::Admin),
    )
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Stats {
    /// Debates neither completed nor failed.
    pub active_debates: u64,
    pub total_events: u64,
    pub events_by_aggregate_type: BTreeMap<String, u64>,
}

/// Counts from the event log's `admin_stats` read model.
#[utoipa::path(get, path = "/api/admin/stats", tag = "operations",
    responses((status = 200, body = Stats)))]
async fn stats(State(ops): State<Ops>) -> Result<Json<Stats>, ApiError> {
    let view = ops.admin_stats().await?;
    Ok(Json(Stats {
        active_debates: view.active_debates,
        total_events: view.total_events,
        events_by_aggregate_type: view.events_by_aggregate_type,
    }))
}
