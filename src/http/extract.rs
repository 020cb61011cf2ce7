//! Extractors whose rejections are [`ApiError`]s, so a malformed body, a
//! wrong type, a missing content type or an oversized body answers in the
//! spec's error form like everything else.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::error::ApiError;

/// A JSON body. Use `#[serde(deny_unknown_fields)]` on request types so a
/// misspelt field is refused rather than ignored.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(request, state).await {
            Ok(axum::Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(rejection.into()),
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection {
            JsonRejection::JsonDataError(e) => ApiError::validation(
                "The JSON body does not have the expected fields and types",
                json!({"reason": e.body_text()}),
            ),
            JsonRejection::JsonSyntaxError(e) => ApiError::BadRequest {
                message: "The body is not valid JSON".to_owned(),
                details: json!({"reason": e.body_text()}),
            },
            JsonRejection::MissingJsonContentType(_) => ApiError::UnsupportedMediaType(
                "Expected a body with Content-Type: application/json".to_owned(),
            ),
            JsonRejection::BytesRejection(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::PayloadTooLarge
            }
            other => ApiError::bad_request(other.body_text()),
        }
    }
}

/// Query parameters.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Self(value)),
            Err(rejection) => Err(rejection.into()),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::BadRequest {
            message: "Invalid query parameters".to_owned(),
            details: json!({"reason": rejection.body_text()}),
        }
    }
}

/// Path parameters.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Self(value)),
            Err(rejection) => Err(rejection.into()),
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        match rejection {
            PathRejection::FailedToDeserializePathParams(e) => ApiError::BadRequest {
                message: "Invalid path parameter".to_owned(),
                details: json!({"reason": e.body_text()}),
            },
            other => ApiError::Internal(Box::new(other)),
        }
    }
}
