//! Reading debates: list, detail, messages, consensus and batch fetch, all
//! from the `debates` read model.

use agon_aggregates::debate::{Debate, DebateStatus};
use agon_aggregates::ids::DebateId;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::views::{ConsensusBody, DebateDetail, DebateSummary, MessageView};
use super::{page, rendered};
use crate::auth::Caller;
use crate::debates::Debates;
use crate::http::as_of::AsOfQuery;
use crate::http::error::ApiError;
use crate::http::etag::Conditional;
use crate::http::extract::{ApiJson, ApiPath, ApiQuery};
use crate::http::paging::Paging;
use crate::http::shared::Shared;
use crate::http::state::HttpState;

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    #[param(inline)]
    pub status: Option<StatusName>,
    /// Page size, default 20, at most SERVICE_MAX_PAGE_SIZE (default 100).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    #[param(minimum = 0)]
    pub offset: Option<i32>,
    /// Only debates whose topic contains this text, ignoring case
    /// (Unicode-aware); `%`, `_` and `\\` match only themselves. At most
    /// `SERVICE_DEBATE_SEARCH_MAX_CHARS` characters (default 200).
    #[param(max_length = 200, pattern = "^[^\\u0000]*$")]
    pub q: Option<String>,
}

/// A debate status to filter on.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StatusName {
    Pending,
    Running,
    Paused,
    Completed,
    Failed,
}

impl StatusName {
    pub fn as_str(self) -> &'static str {
        match self {
            StatusName::Pending => DebateStatus::Pending,
            StatusName::Running => DebateStatus::Running,
            StatusName::Paused => DebateStatus::Paused,
            StatusName::Completed => DebateStatus::Completed,
            StatusName::Failed => DebateStatus::Failed,
        }
        .as_str()
    }
}

/// One page of debates. The page is under `debates` and, for paginators
/// that read `items` (the upstream SDK's `list_all`), under `items` too.
#[derive(Debug, Serialize, ToSchema)]
pub struct DebateList {
    #[schema(value_type = Vec<DebateSummary>)]
    pub debates: Shared<DebateSummary>,
    /// The same page as `debates`.
    #[schema(value_type = Vec<DebateSummary>)]
    pub items: Shared<DebateSummary>,
    /// Debates matching the filter, over all pages.
    pub total: u64,
    pub count: usize,
    pub limit: u32,
    pub offset: u32,
    /// Whether debates follow this page (`offset + count < total`).
    pub has_more: bool,
}

/// Lists the caller's debates (every debate for admins), newest first.
#[utoipa::path(get, path = "/api/debates", tag = "debates", params(ListQuery),
    responses((status = 200, body = DebateList)))]
pub async fn list_debates(
    State(debates): State<Debates>,
    State(paging): State<Paging>,
    caller: Caller,
    conditional: Conditional,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Response, ApiError> {
    let limit = paging.limit(query.limit)?;
    let offset = Paging::offset(query.offset)?;
    let state = query.status.map(StatusName::as_str);
    let search = debates
        .search(query.q.as_deref().unwrap_or_default())
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let found = debates
        .list_page(&caller, state, search.as_ref(), limit, u64::from(offset))
        .await?;
    Ok(page::respond(&conditional, &found, limit, offset))
}

/// The debate `id` if the caller may see it (404 otherwise: its existence is not revealed).
pub async fn find(debates: &Debates, caller: &Caller, id: &str) -> Result<Debate, ApiError> {
    let parsed = debate_id(id)?;
    debates
        .get(caller, &parsed)
        .await?
        .ok_or_else(|| not_found(id))
}

/// The document of debate `id` as stored, if the caller may see it.
pub(super) async fn find_stored(
    debates: &Debates,
    caller: &Caller,
    id: &str,
) -> Result<String, ApiError> {
    let parsed = debate_id(id)?;
    debates
        .stored(caller, &parsed)
        .await?
        .ok_or_else(|| not_found(id))
}

/// A debate id from a path; one that cannot be an id names no debate.
pub(super) fn debate_id(id: &str) -> Result<DebateId, ApiError> {
    DebateId::parse(id).map_err(|_| not_found(id))
}

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound {
        resource_type: "debate",
        resource_id: Some(id.to_owned()),
    }
}

/// A debate with every message, its synthesis, votes and consensus; with
/// `as_of`, exactly as this read showed it at that log position or time,
/// rebuilt from the log (for audits; such an answer carries no `ETag`).
#[utoipa::path(get, path = "/api/debates/{id}", tag = "debates",
    params(("id" = String, Path), AsOfQuery),
    responses((status = 200, body = DebateDetail),
        (status = 400, description = "as_of is neither a position nor an RFC 3339 time"),
        (status = 404, description = "No such debate (at as_of), or not the caller's")))]
pub async fn get_debate(
    State(debates): State<Debates>,
    State(http): State<HttpState>,
    caller: Caller,
    conditional: Conditional,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<AsOfQuery>,
) -> Result<Response, ApiError> {
    let Some(as_of) = query.parsed()? else {
        return rendered::detail(&debates, &http.details, &caller, &conditional, &id).await;
    };
    let debate = debates
        .as_of(&caller, &debate_id(&id)?, as_of)
        .await?
        .ok_or_else(|| not_found(&id))?;
    Ok(Json(DebateDetail::from(&debate)).into_response())
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Page size, default 20, at most SERVICE_MAX_PAGE_SIZE (default 100).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    #[param(minimum = 0)]
    pub offset: Option<i32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MessagePage {
    pub debate_id: String,
    #[schema(value_type = Vec<MessageView>)]
    pub messages: Shared<MessageView>,
    /// The same page as `messages` (where paginating clients read it).
    #[schema(value_type = Vec<MessageView>)]
    pub items: Shared<MessageView>,
    pub total: usize,
    pub count: usize,
    pub limit: u32,
    pub offset: u32,
}

/// A debate's messages in the order recorded, a page at a time.
#[utoipa::path(get, path = "/api/debates/{id}/messages", tag = "debates",
    params(("id" = String, Path), PageQuery),
    responses((status = 200, body = MessagePage), (status = 404, description = "No such debate")))]
pub async fn list_messages(
    State(debates): State<Debates>,
    State(paging): State<Paging>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<MessagePage>, ApiError> {
    let limit = paging.limit(query.limit)?;
    let offset = Paging::offset(query.offset)?;
    let debate = find(&debates, &caller, &id).await?;
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    let messages: Vec<MessageView> = debate
        .messages
        .iter()
        .enumerate()
        .skip(start)
        .take(limit as usize)
        .map(|(i, m)| MessageView::of(i, m))
        .collect();
    let count = messages.len();
    let messages = Shared::new(messages);
    Ok(Json(MessagePage {
        debate_id: debate.id,
        items: messages.clone(),
        total: debate.messages.len(),
        count,
        messages,
        limit,
        offset,
    }))
}

/// While a debate runs, its consensus does not exist yet.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConsensusPending {
    pub debate_id: String,
    /// pending, running or paused.
    pub status: String,
    pub message: String,
    /// Always null until the debate completes.
    #[schema(value_type = Option<Object>)]
    pub consensus: Option<()>,
}

/// The consensus of a completed debate (§2.1). While the debate is pending,
/// running or paused: 202 with its status; when it failed: 409 with the reason.
#[utoipa::path(get, path = "/api/debates/{id}/consensus", tag = "debates",
    params(("id" = String, Path)),
    responses((status = 200, body = ConsensusBody),
        (status = 202, body = ConsensusPending, description = "Still running: poll again"),
        (status = 404, description = "No such debate"),
        (status = 409, description = "The debate failed; no consensus")))]
pub async fn get_consensus(
    State(debates): State<Debates>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let debate = debates
        .outcome(&caller, &debate_id(&id)?)
        .await?
        .ok_or_else(|| not_found(&id))?;
    if let Some(body) =
        ConsensusBody::completed(&debate.id, debate.status, debate.consensus.as_ref())
    {
        return Ok(Json(body).into_response());
    }
    if debate.status == DebateStatus::Failed {
        return Err(ApiError::Conflict(format!(
            "Debate failed without a consensus: {}",
            debate.failure_reason.unwrap_or_default()
        )));
    }
    let status = debate.status.as_str().to_owned();
    Ok((
        StatusCode::ACCEPTED,
        Json(ConsensusPending {
            debate_id: debate.id,
            message: format!("The debate is {status}; its consensus is computed when it completes"),
            status,
            consensus: None,
        }),
    )
        .into_response())
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchBody {
    /// At most SERVICE_MAX_BATCH_IDS (default 100) debate ids.
    #[schema(max_items = 100)]
    pub debate_ids: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BatchResult {
    #[schema(value_type = Vec<DebateDetail>)]
    pub debates: Shared<DebateDetail>,
    /// The same list as `debates`.
    #[schema(value_type = Vec<DebateDetail>)]
    pub items: Shared<DebateDetail>,
    /// Requested ids that name no debate the caller may see.
    pub not_found: Vec<String>,
    pub count: usize,
}

/// Fetches up to SERVICE_MAX_BATCH_IDS (default 100) debates at once;
/// unknown ids are listed, not fatal.
#[utoipa::path(post, path = "/api/debates/batch", tag = "debates",
    request_body = BatchBody,
    responses((status = 200, body = BatchResult), (status = 422, description = "More ids than SERVICE_MAX_BATCH_IDS, or debate_ids missing or not a list of strings")))]
pub async fn batch_debates(
    State(debates): State<Debates>,
    State(paging): State<Paging>,
    caller: Caller,
    ApiJson(body): ApiJson<BatchBody>,
) -> Result<Json<BatchResult>, ApiError> {
    paging.batch("debate_ids", body.debate_ids.len())?;
    let mut ids = body.debate_ids;
    let mut seen = std::collections::HashSet::new();
    ids.retain(|id| seen.insert(id.clone()));
    let parsed: Vec<DebateId> = ids
        .iter()
        .filter_map(|id| DebateId::parse(id).ok())
        .collect();
    let found = debates.many(&caller, &parsed).await?;
    let not_found = ids
        .iter()
        .filter(|id| !found.iter().any(|d| &d.id == *id))
        .cloned()
        .collect();
    let count = found.len();
    let debates = Shared::new(found.iter().map(DebateDetail::from).collect());
    Ok(Json(BatchResult {
        count,
        items: debates.clone(),
        debates,
        not_found,
    }))
}
