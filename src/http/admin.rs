//! `GET /api/admin/stats`: statistics from the `admin_stats` projection.
//! Authentication and the admin role are attached by the accounts issue.

use std::collections::BTreeMap;

use agon_projections::AdminStats;
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

use super::error::ApiError;
use crate::app::App;
use crate::projection::load_view;

#[derive(Debug, Serialize)]
pub struct Stats {
    pub active_debates: u64,
    pub total_events: u64,
    pub events_by_aggregate_type: BTreeMap<String, u64>,
}

pub fn router() -> Router<App> {
    Router::new().route("/api/admin/stats", get(stats))
}

async fn stats(State(app): State<App>) -> Result<Json<Stats>, ApiError> {
    let view = load_view::<AdminStats>(&app.log).await?;
    Ok(Json(Stats {
        active_debates: view.active_debates.len() as u64,
        total_events: view.total_events,
        events_by_aggregate_type: view.events_by_aggregate_type,
    }))
}
