//! Extractors whose rejections are [`ApiError`]s, so a malformed body, a
//! wrong type, a missing content type or an oversized body answers in the
//! spec's error form like everything else; and [`WantsHtml`] with the
//! pages that links in mails land on.

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
            JsonRejection::JsonDataError(e) => {
                let (field, reason) = data_fault(&e.body_text());
                ApiError::validation(
                    format!("{field}: {reason}"),
                    json!({"field": field, "reason": reason}),
                )
            }
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

/// The field and the reason of a well-formed body of the wrong shape, from
/// axum's text (`<prefix>: <path>: <serde message> at line L column C`), so
/// that a wrong type, a missing field and an out-of-range value of one field
/// all name it alike. `body` stands for the body as a whole.
fn data_fault(text: &str) -> (String, String) {
    let text = text
        .split_once("target type: ")
        .map_or(text, |(_, rest)| rest);
    let text = match text.rfind(" at line ") {
        Some(i) if text[i..].contains(" column ") => &text[..i],
        _ => text,
    };
    let (path, reason) = match text.split_once(": ") {
        Some((path, reason)) if !path.is_empty() && !path.contains(char::is_whitespace) => {
            (path, reason)
        }
        _ => ("", text),
    };
    let named = ["missing field `", "unknown field `"]
        .iter()
        .find_map(|prefix| reason.strip_prefix(prefix))
        .and_then(|rest| rest.split('`').next());
    let field = match (path, named) {
        ("", Some(name)) => name.to_owned(),
        (path, Some(name)) if !path.ends_with(name) => format!("{path}.{name}"),
        ("", None) => "body".to_owned(),
        (path, _) => path.to_owned(),
    };
    (field, reason.to_owned())
}

/// Whether the client prefers a page to JSON: its `Accept` names
/// `text/html` (as browsers opening a link in a mail do) and not JSON
/// before it.
#[derive(Debug, Clone, Copy, Default)]
pub struct WantsHtml(pub bool);

impl<S: Send + Sync> FromRequestParts<S> for WantsHtml {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let accept = parts
            .headers
            .get(axum::http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let html = accept.find("text/html");
        let json = accept.find("json");
        Ok(Self(match (html, json) {
            (Some(h), Some(j)) => h < j,
            (html, _) => html.is_some(),
        }))
    }
}

/// A landing page (see [`crate::mail::landing_page`]) with `status`.
pub fn page(status: StatusCode, title: &str, paragraphs: &[String]) -> axum::response::Response {
    use axum::response::IntoResponse;
    let html = crate::mail::landing_page(title, paragraphs);
    (status, axum::response::Html(html)).into_response()
}

/// A landing page for an error: its status, and its message unless it is a
/// server error (whose cause is never shown).
pub fn error_page(title: &str, error: ApiError) -> axum::response::Response {
    use axum::response::IntoResponse;
    let message = error.to_string();
    let status = error.into_response().status();
    let text = if status.is_server_error() {
        "Something went wrong on our side; please try the link again later.".to_owned()
    } else {
        message
    };
    page(status, title, &[text])
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

#[cfg(test)]
mod tests {
    use super::data_fault;

    #[test]
    fn data_faults_name_their_field() {
        let prefix = "Failed to deserialize the JSON body into the target type: ";
        let cases = [
            (
                "rounds: invalid value: integer `-1`, expected u32 at line 1 column 12",
                "rounds",
                "invalid value: integer `-1`, expected u32",
            ),
            (
                "missing field `topic` at line 1 column 2",
                "topic",
                "missing field `topic`",
            ),
            (
                "protocol: unknown field `speed`, expected one of `a` at line 1 column 20",
                "protocol.speed",
                "unknown field `speed`, expected one of `a`",
            ),
            (
                "invalid type: sequence, expected struct X at line 1 column 1",
                "body",
                "invalid type: sequence, expected struct X",
            ),
        ];
        for (text, field, reason) in cases {
            let (f, r) = data_fault(&format!("{prefix}{text}"));
            assert_eq!((f.as_str(), r.as_str()), (field, reason), "{text}");
        }
    }
}
