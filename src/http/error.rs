//! The one place that turns errors into HTTP statuses and the spec's error
//! forms (§7). A handler's [`ApiError`] becomes a response carrying an
//! [`ErrorReport`]; the platform middleware renders that report in the form
//! the request's API version asks for (general, v1, v2, or the rate-limit
//! form on every 429) and logs internal causes, which are never sent.

use agon_aggregates::{Refusal, RejectionKind};
use std::sync::Arc;

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::ratelimit::Verdict;
use crate::store::StoreError;

/// Where a v2 error points its reader.
pub const SUPPORT_URL: &str = "/api/redoc#section/Errors";

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{message}")]
    BadRequest { message: String, details: Value },
    #[error("{message}")]
    Validation { message: String, details: Value },
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{} not found", crate::auth::error::capitalized(resource_type))]
    NotFound {
        resource_type: &'static str,
        resource_id: Option<String>,
    },
    #[error("no route for {method} {path}")]
    RouteNotFound { method: String, path: String },
    #[error("{0}")]
    Conflict(String),
    #[error("Request body too large")]
    PayloadTooLarge,
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("rate limit exceeded")]
    RateLimited(Verdict),
    /// Sign-in refused while the account is locked (§8.2); 423 with `Retry-After`.
    #[error("Account locked for {remaining_seconds} seconds")]
    Locked { remaining_seconds: i64 },
    /// An aggregate refused a command: the status follows the kind of
    /// refusal, and the rule's own code rides beside the generic one.
    #[error("{message}")]
    Rejected {
        kind: RejectionKind,
        rule: &'static str,
        message: String,
        field: Option<&'static str>,
    },
    #[error("{0}")]
    Unavailable(String),
    #[error("internal error: {0}")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Seconds a client is told to wait (`Retry-After`) before trying again
/// after a 503: about how long a database or bus failover takes to show.
pub const UNAVAILABLE_RETRY_AFTER_SECS: i64 = 2;

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        if e.is_unavailable() {
            return ApiError::Unavailable(UNAVAILABLE_MESSAGE.to_owned());
        }
        ApiError::Internal(Box::new(e))
    }
}

/// What a client reads while the database is away.
const UNAVAILABLE_MESSAGE: &str = "The service is temporarily unavailable; retry shortly";

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::BadRequest {
            message: message.into(),
            details: json!({}),
        }
    }

    /// The one mapping of every aggregate's refusals; `field` names the
    /// request field the broken rule is about, when there is one.
    pub fn rejected(refusal: &Refusal, field: Option<&'static str>) -> Self {
        let text = &refusal.message;
        let message = match field {
            Some(field) => format!("{field}: {text}"),
            None => crate::auth::error::capitalized(text),
        };
        ApiError::Rejected {
            kind: refusal.kind,
            rule: refusal.rule,
            message,
            field,
        }
    }

    pub fn validation(message: impl Into<String>, details: Value) -> Self {
        ApiError::Validation {
            message: message.into(),
            details,
        }
    }

    /// A 422 naming `field`, its message `field: reason` so that every error
    /// form (the v1 and v2 ones carry only a message) keeps both.
    pub fn field(field: &str, reason: impl Into<String>) -> Self {
        let reason = reason.into();
        ApiError::validation(
            format!("{field}: {reason}"),
            serde_json::json!({"field": field, "reason": reason}),
        )
    }

    fn report(self) -> ErrorReport {
        let message = self.to_string();
        let (status, code) = match &self {
            ApiError::BadRequest { .. } => (StatusCode::BAD_REQUEST, "BAD_REQUEST"),
            ApiError::Validation { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR"),
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "UNAUTHORIZED"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "FORBIDDEN"),
            ApiError::NotFound { .. } | ApiError::RouteNotFound { .. } => {
                (StatusCode::NOT_FOUND, "NOT_FOUND")
            }
            ApiError::Conflict(_) => (StatusCode::CONFLICT, "CONFLICT"),
            ApiError::PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "PAYLOAD_TOO_LARGE"),
            ApiError::UnsupportedMediaType(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "UNSUPPORTED_MEDIA_TYPE")
            }
            ApiError::RateLimited(_) => (StatusCode::TOO_MANY_REQUESTS, "RATE_LIMIT_EXCEEDED"),
            ApiError::Locked { .. } => (StatusCode::LOCKED, "ACCOUNT_LOCKED"),
            ApiError::Rejected { kind, .. } => match kind {
                RejectionKind::Invalid => (StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR"),
                RejectionKind::NotFound => (StatusCode::NOT_FOUND, "NOT_FOUND"),
                RejectionKind::Conflict => (StatusCode::CONFLICT, "CONFLICT"),
                RejectionKind::Forbidden => (StatusCode::FORBIDDEN, "FORBIDDEN"),
                RejectionKind::Locked => (StatusCode::LOCKED, "LOCKED"),
            },
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE"),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL_ERROR"),
        };
        let mut report = ErrorReport::new(status, code, message);
        match self {
            ApiError::BadRequest { details, .. } | ApiError::Validation { details, .. } => {
                report.details = details;
            }
            ApiError::NotFound {
                resource_type,
                resource_id,
            } => {
                report.resource_type = Some(resource_type.to_owned());
                report.resource_id = resource_id;
            }
            ApiError::RateLimited(verdict) => {
                report.details = json!({"retry_after": verdict.retry_after_secs()});
                report.rate_limit = Some(verdict);
            }
            ApiError::Locked { remaining_seconds } => {
                report.details = json!({"retry_after": remaining_seconds});
                report.retry_after = Some(remaining_seconds);
            }
            ApiError::Rejected {
                rule,
                field,
                message,
                ..
            } => {
                report.details = match field {
                    Some(field) => json!({"field": field, "reason": message, "rule": rule}),
                    None => json!({"rule": rule}),
                };
                report.rule = Some(rule);
            }
            ApiError::Unavailable(_) => {
                report.retry_after = Some(UNAVAILABLE_RETRY_AFTER_SECS);
            }
            ApiError::Internal(cause) => {
                let chain = crate::errors::chain(cause.as_ref());
                report.message = "Internal server error".to_owned();
                report.internal_cause = Some(chain);
            }
            _ => {}
        }
        report
    }
}

/// Everything needed to render an error in any of the spec's forms.
#[derive(Debug, Clone)]
pub struct ErrorReport {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub details: Value,
    pub resource_type: Option<String>,
    pub resource_id: Option<String>,
    pub rate_limit: Option<Verdict>,
    /// Seconds for a `Retry-After` header outside rate limiting (a lockout,
    /// a 503 while the database is away).
    pub retry_after: Option<i64>,
    /// Logged by the middleware; never sent.
    pub internal_cause: Option<String>,
    /// The specific rule a refusal broke (`DUPLICATE_AGENT`), sent as
    /// `rule` beside the generic `code`.
    pub rule: Option<&'static str>,
}

impl ErrorReport {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            details: json!({}),
            resource_type: None,
            resource_id: None,
            rate_limit: None,
            retry_after: None,
            internal_cause: None,
            rule: None,
        }
    }

    /// A report for an error response some layer produced without one
    /// (axum's 405, a timeout, a length limit).
    pub fn for_status(status: StatusCode) -> Self {
        let (code, message) = match status {
            StatusCode::BAD_REQUEST => ("BAD_REQUEST", "Bad request"),
            StatusCode::UNAUTHORIZED => ("UNAUTHORIZED", "Authentication required"),
            StatusCode::FORBIDDEN => ("FORBIDDEN", "Insufficient permission"),
            StatusCode::NOT_FOUND => ("NOT_FOUND", "Resource not found"),
            StatusCode::METHOD_NOT_ALLOWED => (
                "METHOD_NOT_ALLOWED",
                "Method not allowed on this path; see the Allow header",
            ),
            StatusCode::REQUEST_TIMEOUT => ("REQUEST_TIMEOUT", "The request took too long"),
            StatusCode::CONFLICT => ("CONFLICT", "The request conflicts with the current state"),
            StatusCode::PAYLOAD_TOO_LARGE => ("PAYLOAD_TOO_LARGE", "Request body too large"),
            StatusCode::URI_TOO_LONG => ("URI_TOO_LONG", "Request target too long"),
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => (
                "REQUEST_HEADER_FIELDS_TOO_LARGE",
                "Request headers too large",
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                ("UNSUPPORTED_MEDIA_TYPE", "Unsupported media type")
            }
            StatusCode::UNPROCESSABLE_ENTITY => ("VALIDATION_ERROR", "The request is not valid"),
            StatusCode::TOO_MANY_REQUESTS => ("RATE_LIMIT_EXCEEDED", "Rate limit exceeded"),
            StatusCode::LOCKED => ("ACCOUNT_LOCKED", "Account locked"),
            StatusCode::SERVICE_UNAVAILABLE => {
                ("SERVICE_UNAVAILABLE", "The service is unavailable")
            }
            s if s.is_server_error() => ("INTERNAL_ERROR", "Internal server error"),
            _ => ("BAD_REQUEST", "The request could not be served"),
        };
        Self::new(status, code, message)
    }

    /// The body in `form`; `trace_id` is the request id.
    pub fn body(&self, form: ErrorForm, trace_id: &str) -> Value {
        let mut body = self.form_body(form, trace_id);
        if let (Some(verdict), Some(fields)) = (&self.rate_limit, body.as_object_mut()) {
            // §7's rate-limit form on top of the version's own: `error`
            // stays a string (form 4), and the version's other fields stay.
            if form == ErrorForm::General {
                fields.insert("message".into(), json!(self.message));
                fields.insert("details".into(), self.details.clone());
            }
            fields.insert("error".into(), json!(self.message));
            fields.insert("code".into(), json!(self.code));
            fields.insert("retry_after".into(), json!(verdict.retry_after_secs()));
            fields.insert("limit".into(), json!(verdict.limit));
            fields.insert("remaining".into(), json!(verdict.remaining));
            fields.insert("trace_id".into(), json!(trace_id));
        }
        body
    }

    fn form_body(&self, form: ErrorForm, trace_id: &str) -> Value {
        let mut body = self.generic_body(form, trace_id);
        if let Some(rule) = self.rule {
            let fields = match form {
                ErrorForm::General => body["error"].as_object_mut(),
                ErrorForm::V1 | ErrorForm::V2 => body.as_object_mut(),
            };
            if let Some(fields) = fields {
                fields.insert("rule".into(), json!(rule));
            }
        }
        body
    }

    fn generic_body(&self, form: ErrorForm, trace_id: &str) -> Value {
        match form {
            ErrorForm::General => {
                let mut error = Map::new();
                error.insert("code".into(), json!(self.code));
                error.insert("message".into(), json!(self.message));
                error.insert("details".into(), self.details.clone());
                error.insert("trace_id".into(), json!(trace_id));
                json!({ "error": error })
            }
            // §7's v1 form (`error`, `status`) with the code, details and
            // trace id clients print and quote.
            ErrorForm::V1 => json!({
                "error": self.message,
                "status": self.status.as_u16(),
                "code": self.code,
                "details": self.details,
                "trace_id": trace_id,
            }),
            ErrorForm::V2 => json!({
                "error": self.message,
                "code": self.code,
                "resource_type": self.resource_type,
                "resource_id": self.resource_id,
                "trace_id": trace_id,
                "support_url": SUPPORT_URL,
            }),
        }
    }
}

/// Which of §7's forms a request's errors take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorForm {
    /// Paths outside `/api` (no version applies there).
    General,
    /// v1 `/api` paths: by prefix, header or default.
    V1,
    V2,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let report = self.report();
        // The general form is the default; the platform middleware re-renders
        // it in the request's form and fills in the trace id.
        let mut response =
            (report.status, Json(report.body(ErrorForm::General, ""))).into_response();
        let retry_after = report
            .rate_limit
            .as_ref()
            .map(|verdict| verdict.retry_after_secs().to_string())
            .or_else(|| report.retry_after.map(|s| s.to_string()));
        if let Some(value) = retry_after.and_then(|s| HeaderValue::from_str(&s).ok()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response.extensions_mut().insert(Arc::new(report));
        response
    }
}

/// Answers every unknown route.
pub async fn not_found(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::RouteNotFound {
        method: method.to_string(),
        path: uri.path().to_owned(),
    }
}

impl From<&crate::auth::AuthError> for ApiError {
    fn from(e: &crate::auth::AuthError) -> Self {
        use crate::auth::AuthError as A;
        match e {
            A::InvalidCredentials
            | A::TokenExpired
            | A::InvalidToken
            | A::InvalidCode
            | A::CredentialEnded => ApiError::Unauthorized(e.to_string()),
            A::Locked { remaining_seconds } => ApiError::Locked {
                remaining_seconds: *remaining_seconds,
            },
            A::Disabled | A::Forbidden(_) => ApiError::Forbidden(e.to_string()),
            A::Invalid(message) => ApiError::validation(message.clone(), json!({})),
            A::Value(rule) => ApiError::validation(rule.to_string(), json!({})),
            A::Rejected(refusal) => ApiError::rejected(refusal, None),
            A::Conflict(message) => ApiError::Conflict(message.clone()),
            A::NotFound {
                resource_type,
                resource_id,
            } => ApiError::NotFound {
                resource_type,
                resource_id: (!resource_id.is_empty()).then(|| resource_id.clone()),
            },
            A::Contended => ApiError::Unavailable(e.to_string()),
            A::Store(store) if store.is_unavailable() => {
                ApiError::Unavailable(UNAVAILABLE_MESSAGE.to_owned())
            }
            _ => ApiError::Internal(e.to_string().into()),
        }
    }
}

impl From<crate::auth::AuthError> for ApiError {
    fn from(e: crate::auth::AuthError) -> Self {
        ApiError::from(&e)
    }
}

#[cfg(test)]
mod tests {
    use agon_aggregates::debate::DebateError;

    use super::*;

    #[test]
    fn a_refusal_names_its_rule_beside_the_generic_code() {
        let rule = DebateError::DuplicateAgent {
            name: "claude".to_owned(),
            earlier: "Claude".to_owned(),
        };
        let report = ApiError::rejected(&Refusal::of(&rule), rule.field()).report();
        assert_eq!(report.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(report.code, "VALIDATION_ERROR");
        for form in [ErrorForm::V1, ErrorForm::V2] {
            let body = report.body(form, "t");
            assert_eq!(body["rule"], "DUPLICATE_AGENT", "{body}");
            assert_eq!(body["code"], "VALIDATION_ERROR", "{body}");
        }
        let general = report.body(ErrorForm::General, "t");
        assert_eq!(general["error"]["rule"], "DUPLICATE_AGENT");
        assert_eq!(general["error"]["details"]["field"], "agents");
        let late = ApiError::rejected(
            &Refusal::of(&DebateError::WrongStatus {
                status: "completed",
                action: "pause",
            }),
            None,
        );
        assert_eq!(late.report().status, StatusCode::CONFLICT);
    }

    #[test]
    fn contention_and_outages_are_503_with_retry_after_never_500() {
        use crate::auth::AuthError;
        let outage = AuthError::Store(StoreError::Unavailable {
            source: sqlx::Error::PoolTimedOut,
        });
        for error in [AuthError::Contended, outage] {
            let response = ApiError::from(error).into_response();
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert!(response.headers().contains_key(header::RETRY_AFTER));
        }
    }

    #[test]
    fn account_and_organization_refusals_go_through_the_same_mapping() {
        use agon_aggregates::account::AccountError;
        use agon_aggregates::organization::OrganizationError;

        use crate::auth::AuthError;
        let cases = [
            (
                AuthError::from(AccountError::TooManyApiKeys { max: 25 }),
                StatusCode::CONFLICT,
                "TOO_MANY_API_KEYS",
            ),
            (
                AuthError::from(AccountError::InvalidApiKeyName),
                StatusCode::UNPROCESSABLE_ENTITY,
                "INVALID_API_KEY_NAME",
            ),
            (
                AuthError::from(crate::store::CommandError::Rejected(
                    OrganizationError::InviteEmailMismatch,
                )),
                StatusCode::FORBIDDEN,
                "INVITE_EMAIL_MISMATCH",
            ),
        ];
        for (error, status, rule) in cases {
            let report = ApiError::from(error).report();
            assert_eq!((report.status, report.rule), (status, Some(rule)));
            assert!(
                report.message.starts_with(char::is_uppercase),
                "{}",
                report.message
            );
        }
    }
}
