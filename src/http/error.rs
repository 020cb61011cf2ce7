//! The one place that turns errors into HTTP statuses and the spec's general
//! error form `{"error": {"code", "message", "details"}}` (§7). Internal
//! causes are logged, never sent.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("resource not found")]
    NotFound,
    #[error("internal error")]
    Internal(#[from] StoreError),
}

impl ApiError {
    fn parts(&self) -> (StatusCode, &'static str, String) {
        match self {
            ApiError::NotFound => (
                StatusCode::NOT_FOUND,
                "NOT_FOUND",
                "Resource not found".to_owned(),
            ),
            ApiError::Internal(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "INTERNAL_ERROR",
                "Internal server error".to_owned(),
            ),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(cause) = &self {
            tracing::error!(error = %cause, "request failed");
        }
        let (status, code, message) = self.parts();
        (
            status,
            Json(json!({"error": {"code": code, "message": message, "details": {}}})),
        )
            .into_response()
    }
}

/// Answers every unknown route.
pub async fn not_found() -> ApiError {
    ApiError::NotFound
}
