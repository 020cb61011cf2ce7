//! The HTTP face: one router module per spec area, merged here.

pub mod admin;
pub mod error;
pub mod health;

use axum::Router;

use crate::app::App;

/// The full API router.
pub fn router(app: App) -> Router {
    Router::new()
        .merge(health::router())
        .merge(admin::router())
        .fallback(error::not_found)
        .with_state(app)
}
