//! Reading debates: list, detail, messages, consensus and batch fetch, all
//! from the `debates` read model.

use agon_aggregates::debate::{Debate, DebateStatus};
use agon_projections::Debates;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};

use super::views::{ConsensusBody, DebateDetail, DebateOutcome, DebateSummary, MessageView};
use super::{page, rendered};
use crate::app::App;
use crate::auth::Caller;
use crate::debates::{visible, visible_to};
use crate::http::error::ApiError;
use crate::http::etag::Conditional;
use crate::http::extract::{ApiJson, ApiPath, ApiQuery};
use crate::http::shared::Shared;
use crate::projection::{Documents, ListFilter, reads};
use crate::store::StoreError;

/// Default page size of debate listings (§8.2).
pub const DEFAULT_LIMIT: u32 = 20;
/// Largest page a listing returns.
pub const MAX_LIMIT: u32 = 100;
/// Most ids one batch fetch takes.
pub const MAX_BATCH: usize = 100;

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    #[param(inline)]
    pub status: Option<StatusName>,
    /// Page size, default 20, at most 100.
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    #[param(minimum = 0)]
    pub offset: Option<i32>,
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

/// The page size a query asks for, checked.
pub fn page_limit(limit: Option<u32>) -> Result<u32, ApiError> {
    match limit {
        None => Ok(DEFAULT_LIMIT),
        Some(limit) if (1..=MAX_LIMIT).contains(&limit) => Ok(limit),
        Some(_) => Err(ApiError::bad_request(format!(
            "limit must be between 1 and {MAX_LIMIT}"
        ))),
    }
}

/// The offset a query asks for, checked.
pub fn page_offset(offset: Option<i32>) -> Result<u32, ApiError> {
    u32::try_from(offset.unwrap_or(0))
        .map_err(|_| ApiError::bad_request("offset must not be negative"))
}

/// The listing filter a caller gets: admins see every debate, others their own.
pub fn filter_for<'a>(caller: &'a Caller, state: Option<&'a str>) -> ListFilter<'a> {
    ListFilter {
        owner: (!caller.is_admin()).then_some(caller.user_id.as_str()),
        state,
    }
}

/// Lists the caller's debates (every debate for admins), newest first.
#[utoipa::path(get, path = "/api/debates", tag = "debates", params(ListQuery),
    responses((status = 200, body = DebateList)))]
pub async fn list_debates(
    State(app): State<App>,
    caller: Caller,
    conditional: Conditional,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Response, ApiError> {
    let limit = page_limit(query.limit)?;
    let offset = page_offset(query.offset)?;
    let state = query.status.map(StatusName::as_str);
    let found = reads::debate_page(&app.log, filter_for(&caller, state), limit, offset.into());
    Ok(page::respond(&conditional, &found.await?, limit, offset))
}

/// The debate `id` if the caller may see it (404 otherwise: its existence is not revealed).
pub async fn find(app: &App, caller: &Caller, id: &str) -> Result<Debate, ApiError> {
    let stored = find_stored(app, caller, id).await?;
    Ok(serde_json::from_str(&stored).map_err(StoreError::from)?)
}

/// Who a debate belongs to: all [`find_stored`] parses of its document.
#[derive(Deserialize)]
struct Belonging {
    created_by: Option<String>,
    org_id: Option<String>,
}

/// The document of debate `id` as stored, if the caller may see it.
pub(super) async fn find_stored(app: &App, caller: &Caller, id: &str) -> Result<String, ApiError> {
    let not_found = || ApiError::NotFound {
        resource_type: "debate",
        resource_id: Some(id.to_owned()),
    };
    let text = reads::document_text::<Debates>(&app.log, id)
        .await?
        .ok_or_else(not_found)?;
    let of: Belonging = serde_json::from_str(&text).map_err(StoreError::from)?;
    if visible_to(app, caller, of.created_by.as_deref(), of.org_id.as_deref()).await? {
        Ok(text)
    } else {
        Err(not_found())
    }
}

/// A debate with every message, its synthesis, votes and consensus.
#[utoipa::path(get, path = "/api/debates/{id}", tag = "debates",
    params(("id" = String, Path)),
    responses((status = 200, body = DebateDetail), (status = 404, description = "No such debate")))]
pub async fn get_debate(
    State(app): State<App>,
    caller: Caller,
    conditional: Conditional,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    rendered::detail(&app, &caller, &conditional, &id).await
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Page size, default 20, at most 100.
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
    State(app): State<App>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<MessagePage>, ApiError> {
    let limit = page_limit(query.limit)?;
    let offset = page_offset(query.offset)?;
    let debate = find(&app, &caller, &id).await?;
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
    State(app): State<App>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let found = Documents::new(app.log.clone())
        .get_part::<Debates, DebateOutcome>(&id)
        .await?;
    let debate = match found {
        Some(d)
            if visible_to(&app, &caller, d.created_by.as_deref(), d.org_id.as_deref()).await? =>
        {
            d
        }
        _ => {
            return Err(ApiError::NotFound {
                resource_type: "debate",
                resource_id: Some(id.clone()),
            });
        }
    };
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
    /// At most 100 debate ids.
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

/// Fetches up to 100 debates at once; unknown ids are listed, not fatal.
#[utoipa::path(post, path = "/api/debates/batch", tag = "debates",
    request_body = BatchBody,
    responses((status = 200, body = BatchResult), (status = 422, description = "More than 100 ids, or debate_ids missing or not a list of strings")))]
pub async fn batch_debates(
    State(app): State<App>,
    caller: Caller,
    ApiJson(body): ApiJson<BatchBody>,
) -> Result<Json<BatchResult>, ApiError> {
    if body.debate_ids.len() > MAX_BATCH {
        // Out of range, like a wrong type of the same field: a 422 naming it.
        let reason = format!(
            "holds at most {MAX_BATCH} ids, not {}",
            body.debate_ids.len()
        );
        return Err(ApiError::validation(
            format!("debate_ids: {reason}"),
            json!({"field": "debate_ids", "reason": reason, "max": MAX_BATCH}),
        ));
    }
    let mut ids = body.debate_ids;
    let mut seen = std::collections::HashSet::new();
    ids.retain(|id| seen.insert(id.clone()));
    let found = Documents::new(app.log.clone())
        .many::<Debates>(&ids)
        .await?;
    let mut debates = Vec::with_capacity(found.len());
    let mut not_found = Vec::new();
    for id in &ids {
        let debate = found.iter().find(|d| &d.id == id);
        match debate {
            Some(debate) if visible(&app, &caller, debate).await? => {
                debates.push(DebateDetail::from(debate));
            }
            _ => not_found.push(id.clone()),
        }
    }
    let count = debates.len();
    let debates = Shared::new(debates);
    Ok(Json(BatchResult {
        count,
        items: debates.clone(),
        debates,
        not_found,
    }))
}
