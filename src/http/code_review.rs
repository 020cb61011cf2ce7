//! `/api/v1/code-review/*` (spec §4.5 Code review): review a snippet, a
//! diff or a pull request, read a result, list the history. Reviews are
//! asynchronous (a debate runs): start, then poll the result until its
//! status leaves `in_progress`. Each review belongs to the caller who
//! asked for it; others get 404. The view here is also the pull request
//! review's (`scm.rs`).

use agon_aggregates::review::{ReviewComment, ReviewKind};
use agon_projections::reviews::ReviewDoc;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::SecondsFormat;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::paging::Paging;
use super::routes::{RouteSpec, Routes};
use crate::auth::Caller;
use crate::review::{Material, ReviewRequest, Reviews, ReviewsError};
use crate::scm::Scm;

pub fn routes() -> Routes {
    Routes::new()
        .add(routes!(review_snippet), RouteSpec::new())
        .add(routes!(review_diff), RouteSpec::new())
        .add(routes!(review_pull_request), RouteSpec::new())
        .add(routes!(review_result), RouteSpec::new())
        .add(routes!(review_history), RouteSpec::new())
}

/// A line comment: `position` counts diff lines below the file's first hunk header.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CommentView {
    pub path: String,
    pub position: u32,
    pub body: String,
}

impl From<ReviewComment> for CommentView {
    fn from(c: ReviewComment) -> Self {
        Self {
            path: c.path,
            position: c.position,
            body: c.body,
        }
    }
}

/// A review: while `status` is `in_progress` its debate runs; `completed`
/// carries the action, body and comments; `failed` the reason;
/// `submitted` is a review sent to the source host.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReviewView {
    pub success: bool,
    pub review_id: String,
    /// `in_progress`, `completed`, `failed` or `submitted`.
    pub status: String,
    /// `snippet`, `diff` or `pull_request`.
    pub kind: String,
    /// `api`, `webhook` or `submission`.
    pub source: String,
    /// `owner/name`, for pull requests.
    pub repository: Option<String>,
    pub pr_number: Option<u64>,
    pub title: Option<String>,
    pub head_sha: Option<String>,
    /// The review debate (readable at `/api/v1/debates/{id}`).
    pub debate_id: Option<String>,
    /// The review action: `APPROVE`, `REQUEST_CHANGES` or `COMMENT`.
    pub event: Option<String>,
    pub body: Option<String>,
    pub comments: Vec<CommentView>,
    pub confidence: Option<f64>,
    pub error: Option<String>,
    /// The material was cut to fit the debate's context.
    pub truncated: bool,
    /// No source host was called (`SCM_TOKEN` unset).
    pub demo: bool,
    /// The host's id of a submitted review.
    pub host_review_id: Option<u64>,
    pub created_at: String,
    pub completed_at: Option<String>,
}

impl From<ReviewDoc> for ReviewView {
    fn from(doc: ReviewDoc) -> Self {
        let time =
            |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(SecondsFormat::Millis, true);
        let kind = match doc.kind {
            ReviewKind::Snippet => "snippet",
            ReviewKind::Diff => "diff",
            ReviewKind::PullRequest => "pull_request",
        };
        Self {
            success: doc.failure_reason.is_none(),
            review_id: doc.review_id,
            status: doc.status.as_str().to_owned(),
            kind: kind.to_owned(),
            source: doc.source,
            repository: doc.target.repository,
            pr_number: doc.target.pr_number,
            title: doc.target.title,
            head_sha: doc.target.head_sha,
            debate_id: doc.debate_id,
            event: doc.action.map(|a| a.as_str().to_owned()),
            body: doc.body,
            comments: doc.comments.into_iter().map(Into::into).collect(),
            confidence: doc.confidence,
            error: doc.failure_reason,
            truncated: doc.truncated,
            demo: doc.demo,
            host_review_id: doc.host_review_id,
            created_at: time(doc.requested_at),
            completed_at: doc.finished_at.map(time),
        }
    }
}

impl From<ReviewsError> for ApiError {
    fn from(error: ReviewsError) -> Self {
        match error {
            ReviewsError::Invalid { field, reason } => ApiError::field(field, reason),
            ReviewsError::Debate(e) => e.into(),
            ReviewsError::Store(e) => e.into(),
            e @ (ReviewsError::Contended | ReviewsError::NotShown(_)) => {
                ApiError::Unavailable(e.to_string())
            }
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct SnippetReview {
    /// Not blank.
    #[schema(pattern = r"\S")]
    pub code: String,
    pub language: Option<String>,
    /// The file the snippet is from; comments name it (default `snippet`).
    pub filename: Option<String>,
    /// What to look at above all (security, performance, …).
    pub focus: Option<String>,
}

/// Starts a review of a code snippet; poll `/results/{id}`.
#[utoipa::path(post, path = "/api/v1/code-review/review", tag = "code-review",
    request_body = SnippetReview,
    responses((status = 202, body = ReviewView), (status = 422, description = "Empty or too large")))]
async fn review_snippet(
    State(reviews): State<Reviews>,
    caller: Caller,
    ApiJson(body): ApiJson<SnippetReview>,
) -> Result<(StatusCode, Json<ReviewView>), ApiError> {
    let request = ReviewRequest {
        kind: ReviewKind::Snippet,
        target: Default::default(),
        material: Material::Snippet {
            code: body.code,
            language: body.language,
            filename: body.filename,
        },
        focus: body.focus,
    };
    let doc = reviews
        .start(Some(&caller), request, crate::request::current_request_id())
        .await?;
    Ok((StatusCode::ACCEPTED, Json(doc.into())))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct DiffReview {
    /// A unified diff (`git diff` output).
    #[schema(pattern = r"\S")]
    pub diff: String,
    pub focus: Option<String>,
}

/// Starts a review of a unified diff; comments anchor at diff positions.
#[utoipa::path(post, path = "/api/v1/code-review/diff", tag = "code-review",
    request_body = DiffReview,
    responses((status = 202, body = ReviewView), (status = 422, description = "Blank or too large")))]
async fn review_diff(
    State(reviews): State<Reviews>,
    caller: Caller,
    ApiJson(body): ApiJson<DiffReview>,
) -> Result<(StatusCode, Json<ReviewView>), ApiError> {
    let request = ReviewRequest {
        kind: ReviewKind::Diff,
        target: Default::default(),
        material: Material::Diff(body.diff),
        focus: body.focus,
    };
    let doc = reviews
        .start(Some(&caller), request, crate::request::current_request_id())
        .await?;
    Ok((StatusCode::ACCEPTED, Json(doc.into())))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct PullReview {
    /// `owner/name`.
    #[schema(
        pattern = r"^(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,98}|\.\.[A-Za-z0-9._-]{1,98})/(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,98}|\.\.[A-Za-z0-9._-]{1,98})$"
    )]
    pub repository: String,
    #[schema(minimum = 1, maximum = 2147483647)]
    #[serde(deserialize_with = "super::whole::required")]
    pub pr_number: i64,
    pub focus: Option<String>,
}

/// Reviews a pull request fetched from the source host (needs `SCM_TOKEN`;
/// without it the answer is `demo: true` and no review starts).
#[utoipa::path(post, path = "/api/v1/code-review/pr", tag = "code-review",
    request_body = PullReview,
    responses((status = 202, body = ReviewView), (status = 200, body = super::scm::DemoAnswer),
        (status = 404, description = "No such pull request on the host")))]
async fn review_pull_request(
    State(scm): State<Scm>,
    caller: Caller,
    ApiJson(body): ApiJson<PullReview>,
) -> Result<axum::response::Response, ApiError> {
    let repository = super::scm::repository(&body.repository)?;
    super::scm::start_pull_review(
        &scm,
        &caller,
        &repository,
        super::scm::pr_number(body.pr_number)?,
        body.focus,
        crate::request::current_request_id(),
    )
    .await
}

/// A review's status and, once finished, its result.
#[utoipa::path(get, path = "/api/v1/code-review/results/{id}", tag = "code-review",
    params(("id" = String, Path)),
    responses((status = 200, body = ReviewView), (status = 404, description = "No such review of the caller's")))]
async fn review_result(
    State(reviews): State<Reviews>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<ReviewView>, ApiError> {
    match reviews.get(&caller, &id).await? {
        Some(doc) => Ok(Json(doc.into())),
        None => Err(ApiError::NotFound {
            resource_type: "review",
            resource_id: Some(id),
        }),
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// Page size, default 20, at most SERVICE_MAX_PAGE_SIZE (default 100).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    #[param(minimum = 0)]
    pub offset: Option<i32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReviewHistory {
    pub reviews: Vec<ReviewView>,
    pub total: u64,
    pub limit: u32,
    pub offset: u32,
}

/// The caller's reviews (every review for admins), newest first.
#[utoipa::path(get, path = "/api/v1/code-review/history", tag = "code-review", params(HistoryQuery),
    responses((status = 200, body = ReviewHistory)))]
async fn review_history(
    State(reviews): State<Reviews>,
    State(paging): State<Paging>,
    caller: Caller,
    ApiQuery(query): ApiQuery<HistoryQuery>,
) -> Result<Json<ReviewHistory>, ApiError> {
    let limit = paging.limit(query.limit)?;
    let offset = Paging::offset(query.offset)?;
    let (docs, total) = reviews.history(&caller, limit, u64::from(offset)).await?;
    Ok(Json(ReviewHistory {
        reviews: docs.into_iter().map(Into::into).collect(),
        total,
        limit,
        offset,
    }))
}
