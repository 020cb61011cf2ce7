//! `/api/v1/scm/pr/*` and `/api/v1/webhooks/scm` (spec §4.4, §6.3): pull
//! request review against the source host, and the host's webhook
//! receiver. The receiver takes no bearer credential: it is public in the
//! route table and authenticated by the delivery's HMAC signature
//! (`SCM_WEBHOOK_SECRET`) in the service. Without `SCM_TOKEN`, answers that
//! need the host say `demo: true` and carry no pull request data.

use agon_aggregates::review::ReviewComment;
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use super::code_review::ReviewView;
use super::error::ApiError;
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::routes::{RouteSpec, Routes};
use crate::auth::Caller;
use crate::review::Reviews;
use crate::scm::{
    Delivery, GitHubError, PullRequest, ReceiveError, Repository, SUPPORTED_EVENTS, Scm, ScmError,
};

mod not_a_subscription;

pub fn routes() -> Routes {
    Routes::new()
        .add(routes!(start_pr_review), RouteSpec::new())
        .add(routes!(read_pull_request), RouteSpec::new())
        .add(routes!(read_pr_review), RouteSpec::new())
        .add(routes!(list_pr_reviews), RouteSpec::new())
        .add(routes!(submit_pr_review), RouteSpec::new())
        .add(routes!(receive_scm_webhook), RouteSpec::new().public())
        .merge(not_a_subscription::routes())
        .add(routes!(scm_webhook_status), RouteSpec::new())
}

impl From<ScmError> for ApiError {
    fn from(error: ScmError) -> Self {
        match error {
            ScmError::Invalid { field, reason } => ApiError::validation(
                format!("{field}: {reason}"),
                json!({"field": field, "reason": reason}),
            ),
            ScmError::Host(GitHubError::NotFound) => ApiError::NotFound {
                resource_type: "pull_request",
                resource_id: None,
            },
            ScmError::Host(e @ GitHubError::TooLarge { .. }) => {
                ApiError::validation(e.to_string(), json!({"field": "diff"}))
            }
            ScmError::Host(e) => ApiError::Unavailable(format!("source host: {e}")),
            ScmError::Reviews(e) => e.into(),
        }
    }
}

impl From<ReceiveError> for ApiError {
    fn from(error: ReceiveError) -> Self {
        match error {
            e @ (ReceiveError::NoSecret | ReceiveError::Unsigned | ReceiveError::BadSignature) => {
                ApiError::Unauthorized(e.to_string())
            }
            e @ (ReceiveError::MissingHeader(_) | ReceiveError::BadPayload(_)) => {
                ApiError::bad_request(e.to_string())
            }
            ReceiveError::Scm(e) => e.into(),
            ReceiveError::Debate(e) => crate::review::ReviewsError::Debate(e).into(),
            ReceiveError::Store(e) => e.into(),
            e @ ReceiveError::Contended => ApiError::Unavailable(e.to_string()),
        }
    }
}

/// Largest pull request number taken (the documents' bound).
const MAX_PR_NUMBER: i64 = 2_147_483_647;

/// A pull request number from 1 to [`MAX_PR_NUMBER`], or a 422 naming it.
pub(super) fn pr_number(number: i64) -> Result<u64, ApiError> {
    u64::try_from(number)
        .ok()
        .filter(|n| (1..=MAX_PR_NUMBER.unsigned_abs()).contains(n))
        .ok_or_else(|| ApiError::field("pr_number", format!("must be 1 to {MAX_PR_NUMBER}")))
}

/// `owner/name`, or a 422 naming `repository`.
pub(super) fn repository(text: &str) -> Result<Repository, ApiError> {
    Repository::parse(text).ok_or_else(|| {
        ApiError::validation(
            "repository must be owner/name",
            json!({"field": "repository"}),
        )
    })
}

/// The answer when the host is needed and `SCM_TOKEN` is unset: nothing
/// was fetched or started.
#[derive(Debug, Serialize, ToSchema)]
pub struct DemoAnswer {
    pub success: bool,
    /// Always true here.
    pub demo: bool,
    /// `demo`.
    pub status: String,
    pub message: String,
    pub repository: String,
    pub pr_number: u64,
}

fn demo(repository: &Repository, pr_number: u64) -> Response {
    Json(DemoAnswer {
        success: false,
        demo: true,
        status: "demo".to_owned(),
        message: "SCM_TOKEN is not set: nothing was fetched from or sent to the source host"
            .to_owned(),
        repository: repository.to_string(),
        pr_number,
    })
    .into_response()
}

/// Starts a review of a pull request; 202 with the review, or the demo answer.
pub(super) async fn start_pull_review(
    scm: &Scm,
    caller: &Caller,
    repository: &Repository,
    number: u64,
    focus: Option<String>,
    request_id: Option<String>,
) -> Result<Response, ApiError> {
    match scm
        .review_pull(Some(caller), repository, number, focus, request_id)
        .await?
    {
        Ok(doc) => Ok((StatusCode::ACCEPTED, Json(ReviewView::from(doc))).into_response()),
        Err(crate::scm::Demo) => Ok(demo(repository, number)),
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct StartPrReview {
    #[schema(minimum = 1, maximum = 2147483647)]
    #[serde(deserialize_with = "super::whole::required")]
    pub pr_number: i64,
    /// `owner/name`.
    #[schema(
        pattern = r"^(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,98}|\.\.[A-Za-z0-9._-]{1,98})/(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,98}|\.\.[A-Za-z0-9._-]{1,98})$"
    )]
    pub repository: String,
    /// `comprehensive` (default), `security`, `performance`, … : what the reviewers weigh most.
    pub review_type: Option<String>,
}

/// Fetches the pull request and its diff and starts a review debate; poll
/// `/api/v1/scm/pr/review/{review_id}`.
#[utoipa::path(post, path = "/api/v1/scm/pr/review", tag = "scm", request_body = StartPrReview,
    responses((status = 202, body = ReviewView), (status = 200, body = DemoAnswer),
        (status = 404, description = "No such pull request on the host")))]
async fn start_pr_review(
    State(scm): State<Scm>,
    caller: Caller,
    ApiJson(body): ApiJson<StartPrReview>,
) -> Result<Response, ApiError> {
    let repository = repository(&body.repository)?;
    let focus = body.review_type.filter(|t| t != "comprehensive");
    start_pull_review(
        &scm,
        &caller,
        &repository,
        pr_number(body.pr_number)?,
        focus,
        crate::request::current_request_id(),
    )
    .await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RepositoryQuery {
    /// `owner/name`.
    #[param(
        pattern = r"^(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,98}|\.\.[A-Za-z0-9._-]{1,98})/(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,98}|\.\.[A-Za-z0-9._-]{1,98})$"
    )]
    pub repository: String,
}

/// A pull request, or the demo answer while `SCM_TOKEN` is unset.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum PullOrDemo {
    Pull(PullRequestView),
    Demo(DemoAnswer),
}

/// A pull request as the host describes it.
#[derive(Debug, Serialize, ToSchema)]
pub struct PullRequestView {
    pub demo: bool,
    pub repository: String,
    pub pr_number: u64,
    pub title: String,
    pub body: Option<String>,
    pub state: String,
    pub html_url: Option<String>,
    pub author: Option<String>,
    pub head_ref: String,
    pub head_sha: String,
    pub base_ref: String,
    pub draft: Option<bool>,
    pub additions: Option<u64>,
    pub deletions: Option<u64>,
    pub changed_files: Option<u64>,
}

impl PullRequestView {
    fn new(repository: &Repository, pull: PullRequest) -> Self {
        Self {
            demo: false,
            repository: repository.to_string(),
            pr_number: pull.number,
            title: pull.title,
            body: pull.body,
            state: pull.state,
            html_url: pull.html_url,
            author: pull.user.map(|u| u.login),
            head_ref: pull.head.reference,
            head_sha: pull.head.sha,
            base_ref: pull.base.reference,
            draft: pull.draft,
            additions: pull.additions,
            deletions: pull.deletions,
            changed_files: pull.changed_files,
        }
    }
}

/// The pull request's details from the host.
#[utoipa::path(get, path = "/api/v1/scm/pr/{pr_number}", tag = "scm",
    params(("pr_number" = i64, Path, minimum = 1, maximum = 2147483647), RepositoryQuery),
    responses((status = 200, body = PullOrDemo), (status = 404, description = "No such pull request on the host")))]
async fn read_pull_request(
    State(scm): State<Scm>,
    _caller: Caller,
    ApiPath(number): ApiPath<i64>,
    ApiQuery(query): ApiQuery<RepositoryQuery>,
) -> Result<Response, ApiError> {
    let pr_number = pr_number(number)?;
    let repository = repository(&query.repository)?;
    Ok(match scm.pull(&repository, pr_number).await? {
        Ok(pull) => Json(PullRequestView::new(&repository, pull)).into_response(),
        Err(crate::scm::Demo) => demo(&repository, pr_number),
    })
}

/// A pull request review's status and, once finished, its result.
#[utoipa::path(get, path = "/api/v1/scm/pr/review/{review_id}", tag = "scm",
    params(("review_id" = String, Path)),
    responses((status = 200, body = ReviewView), (status = 404, description = "No such review of the caller's")))]
async fn read_pr_review(
    State(reviews): State<Reviews>,
    caller: Caller,
    ApiPath(review_id): ApiPath<String>,
) -> Result<Json<ReviewView>, ApiError> {
    match reviews.get(&caller, &review_id).await? {
        Some(doc) => Ok(Json(doc.into())),
        None => Err(ApiError::NotFound {
            resource_type: "review",
            resource_id: Some(review_id),
        }),
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PrReviews {
    pub repository: String,
    pub pr_number: u64,
    pub reviews: Vec<ReviewView>,
    pub total: usize,
}

/// The reviews of one pull request the caller may read, newest first
/// (admins also see those the webhook started).
#[utoipa::path(get, path = "/api/v1/scm/pr/{pr_number}/reviews", tag = "scm",
    params(("pr_number" = i64, Path, minimum = 1, maximum = 2147483647), RepositoryQuery),
    responses((status = 200, body = PrReviews)))]
async fn list_pr_reviews(
    State(reviews): State<Reviews>,
    caller: Caller,
    ApiPath(number): ApiPath<i64>,
    ApiQuery(query): ApiQuery<RepositoryQuery>,
) -> Result<Json<PrReviews>, ApiError> {
    let pr_number = pr_number(number)?;
    let repo = repository(&query.repository)?;
    let docs = reviews.for_pull(&caller, repo.as_str(), pr_number).await?;
    Ok(Json(PrReviews {
        repository: repo.to_string(),
        pr_number,
        total: docs.len(),
        reviews: docs.into_iter().map(Into::into).collect(),
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct SubmitPrReview {
    /// `owner/name`.
    #[schema(
        pattern = r"^(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,98}|\.\.[A-Za-z0-9._-]{1,98})/(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,98}|\.\.[A-Za-z0-9._-]{1,98})$"
    )]
    pub repository: String,
    /// `APPROVE`, `REQUEST_CHANGES` or `COMMENT` (any case).
    #[schema(pattern = "^(APPROVE|REQUEST_CHANGES|COMMENT)$")]
    pub event: String,
    /// The review's text (not blank).
    #[schema(pattern = r"\S")]
    pub body: String,
    #[serde(default)]
    pub comments: Vec<NewComment>,
}

/// A line comment to submit: `position` counts diff lines below the file's
/// first hunk header.
#[derive(Debug, Deserialize, ToSchema)]
pub struct NewComment {
    #[schema(pattern = r"\S")]
    pub path: String,
    #[schema(minimum = 1, maximum = 2147483647)]
    #[serde(deserialize_with = "super::whole::required")]
    pub position: i64,
    #[schema(pattern = r"\S")]
    pub body: String,
}

impl From<NewComment> for ReviewComment {
    fn from(c: NewComment) -> Self {
        Self {
            path: c.path,
            // Out of range is 0, which the service refuses by name.
            position: u32::try_from(c.position)
                .ok()
                .filter(|p| i64::from(*p) <= MAX_PR_NUMBER)
                .unwrap_or(0),
            body: c.body,
        }
    }
}

/// Submits a review to the host and records it (`demo: true`, not sent,
/// while `SCM_TOKEN` is unset).
#[utoipa::path(post, path = "/api/v1/scm/pr/{pr_number}/review", tag = "scm",
    params(("pr_number" = i64, Path, minimum = 1, maximum = 2147483647)), request_body = SubmitPrReview,
    responses((status = 201, body = ReviewView), (status = 422, description = "Bad event, body or comments"),
        (status = 404, description = "No such pull request on the host")))]
async fn submit_pr_review(
    State(scm): State<Scm>,
    caller: Caller,
    ApiPath(number): ApiPath<i64>,
    ApiJson(body): ApiJson<SubmitPrReview>,
) -> Result<(StatusCode, Json<ReviewView>), ApiError> {
    let pr_number = pr_number(number)?;
    let repo = repository(&body.repository)?;
    let comments = body.comments.into_iter().map(Into::into).collect();
    let doc = scm
        .submit(&caller, &repo, pr_number, &body.event, body.body, comments)
        .await?;
    Ok((StatusCode::CREATED, Json(doc.into())))
}

/// What the receiver did with a delivery.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryAnswer {
    pub received: bool,
    pub delivery_id: String,
    pub event: String,
    pub action: Option<String>,
    /// `review_queued`, `triage_queued`, `tracked`, `acknowledged` or `ignored`.
    pub outcome: String,
    /// This delivery id was received before: nothing was done again.
    pub duplicate: bool,
    /// Why nothing was done.
    pub reason: Option<String>,
    pub review_id: Option<String>,
    pub debate_id: Option<String>,
}

/// The source host's webhook receiver (GitHub: content type
/// `application/json`, secret `SCM_WEBHOOK_SECRET`). Signed with
/// `X-Hub-Signature-256`; `X-GitHub-Event` and `X-GitHub-Delivery` required.
#[utoipa::path(post, path = "/api/v1/webhooks/scm", tag = "scm",
    request_body(content = String, description = "The host's event payload (JSON), signed as sent"),
    responses((status = 200, body = DeliveryAnswer, description = "Acknowledged, tracked or already received"),
        (status = 202, body = DeliveryAnswer, description = "A debate was queued, or the event is ignored"),
        (status = 401, description = "Missing or wrong signature, or no secret set")))]
async fn receive_scm_webhook(
    State(scm): State<Scm>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<DeliveryAnswer>), ApiError> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let received = scm
        .receive(Delivery {
            event: header("x-github-event"),
            id: header("x-github-delivery"),
            signature: header("x-hub-signature-256"),
            body: &body,
        })
        .await?;
    let receipt = received.receipt;
    let queued = matches!(
        receipt.outcome.as_str(),
        "review_queued" | "triage_queued" | "ignored"
    );
    let status = if queued && !received.duplicate {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(DeliveryAnswer {
            received: true,
            delivery_id: receipt.delivery_id,
            event: receipt.event,
            action: receipt.action,
            outcome: receipt.outcome,
            duplicate: received.duplicate,
            reason: received.reason,
            review_id: receipt.review_id,
            debate_id: receipt.debate_id,
        }),
    ))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookFeatures {
    pub pr_auto_review: bool,
    pub issue_triage: bool,
    pub push_tracking: bool,
}

/// The receiver's set-up (§2.3 Webhook status).
#[derive(Debug, Serialize, ToSchema)]
pub struct ScmWebhookStatus {
    /// `configured` (a secret is set), `demo` (unsigned deliveries taken)
    /// or `unconfigured` (deliveries refused).
    pub status: String,
    pub webhook_endpoint: String,
    pub supported_events: Vec<String>,
    pub features: WebhookFeatures,
}

#[utoipa::path(get, path = "/api/v1/webhooks/scm/status", tag = "scm",
    responses((status = 200, body = ScmWebhookStatus)))]
async fn scm_webhook_status(State(scm): State<Scm>, _caller: Caller) -> Json<ScmWebhookStatus> {
    let status = scm.status();
    let receiving = status.configured || status.demo;
    Json(ScmWebhookStatus {
        status: if status.configured {
            "configured"
        } else if status.demo {
            "demo"
        } else {
            "unconfigured"
        }
        .to_owned(),
        webhook_endpoint: "/api/v1/webhooks/scm".to_owned(),
        supported_events: SUPPORTED_EVENTS.iter().map(|e| (*e).to_owned()).collect(),
        features: WebhookFeatures {
            pr_auto_review: receiving && status.token,
            issue_triage: receiving,
            push_tracking: receiving,
        },
    })
}
