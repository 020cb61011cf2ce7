//! §4.5 Gallery (public): the published debates for anyone, and the owner's
//! publish and unpublish commands on a completed debate.

use agon_aggregates::ids::DebateId;
use agon_aggregates::rejection::Refusal;
use axum::Json;
use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::routes;

use super::debates::respond_page;
use super::error::ApiError;
use super::etag::Conditional;
use super::extract::{ApiPath, ApiQuery};
use super::paging::Paging;
use super::routes::{RouteSpec, Routes};
use crate::auth::Caller;
use crate::debates::{Debates, GalleryError};
use crate::views::gallery::{GalleryDetail, GalleryEmbed, GallerySummary, PublishState};

pub fn routes() -> Routes {
    Routes::new()
        .add(routes!(list_gallery), RouteSpec::new().public())
        .add(routes!(get_gallery_debate), RouteSpec::new().public())
        .add(routes!(get_gallery_embed), RouteSpec::new().public())
        .add(routes!(publish_debate, unpublish_debate), RouteSpec::new())
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct GalleryQuery {
    /// Page size, default 20, at most SERVICE_MAX_PAGE_SIZE (default 100).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    #[param(minimum = 0)]
    pub offset: Option<i32>,
}

/// One page of the gallery, in the debates list's form: the page under
/// `debates` and `items`, `total` published debates.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct GalleryList {
    pub debates: Vec<GallerySummary>,
    /// The same page as `debates`.
    pub items: Vec<GallerySummary>,
    pub total: u64,
    pub count: usize,
    pub limit: u32,
    pub offset: u32,
    pub has_more: bool,
}

/// Published debates, newest publication first; no credential needed.
#[utoipa::path(get, path = "/api/gallery", tag = "gallery", params(GalleryQuery),
    security(()), responses((status = 200, body = GalleryList)))]
pub async fn list_gallery(
    State(debates): State<Debates>,
    State(paging): State<Paging>,
    conditional: Conditional,
    ApiQuery(query): ApiQuery<GalleryQuery>,
) -> Result<Response, ApiError> {
    let limit = paging.limit(query.limit)?;
    let offset = Paging::offset(query.offset)?;
    let page = debates.gallery_page(limit, u64::from(offset)).await?;
    Ok(respond_page(&conditional, &page, limit, offset))
}

/// A published debate: topic, agents, every round's contributions and the
/// outcome; 404 when it is not published.
#[utoipa::path(get, path = "/api/gallery/{debate_id}", tag = "gallery",
    params(("debate_id" = String, Path)), security(()),
    responses((status = 200, body = GalleryDetail)))]
pub async fn get_gallery_debate(
    State(debates): State<Debates>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<GalleryDetail>, ApiError> {
    let debate = published(&debates, &id).await?;
    GalleryDetail::of(&debate)
        .map(Json)
        .ok_or_else(|| not_found(&id))
}

/// What an embedded card of a published debate shows (title, confidence,
/// summary, agents) and where it links; 404 when it is not published.
#[utoipa::path(get, path = "/api/gallery/{debate_id}/embed", tag = "gallery",
    params(("debate_id" = String, Path)), security(()),
    responses((status = 200, body = GalleryEmbed)))]
pub async fn get_gallery_embed(
    State(debates): State<Debates>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<GalleryEmbed>, ApiError> {
    let debate = published(&debates, &id).await?;
    GalleryEmbed::of(&debate, debates.public_url())
        .map(Json)
        .ok_or_else(|| not_found(&id))
}

/// Puts the caller's completed debate in the public gallery (again: no
/// change). 403 for a debate the caller sees but did not create, 409 while
/// it is not completed.
#[utoipa::path(post, path = "/api/debates/{id}/publish", tag = "gallery",
    params(("id" = String, Path)),
    responses((status = 200, body = PublishState),
        (status = 409, description = "The debate is not completed")))]
pub async fn publish_debate(
    State(debates): State<Debates>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<PublishState>, ApiError> {
    let parsed = parse(&id)?;
    let debate = debates
        .publish(&caller, &parsed)
        .await
        .map_err(|e| refused(e, &id))?;
    Ok(Json(PublishState::of(&debate, debates.public_url())))
}

/// Takes the caller's debate out of the public gallery (when it is not
/// there: no change). 403 for a debate the caller sees but did not create.
#[utoipa::path(delete, path = "/api/debates/{id}/publish", tag = "gallery",
    params(("id" = String, Path)),
    responses((status = 200, body = PublishState)))]
pub async fn unpublish_debate(
    State(debates): State<Debates>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<PublishState>, ApiError> {
    let parsed = parse(&id)?;
    let debate = debates
        .unpublish(&caller, &parsed)
        .await
        .map_err(|e| refused(e, &id))?;
    Ok(Json(PublishState::of(&debate, debates.public_url())))
}

async fn published(
    debates: &Debates,
    id: &str,
) -> Result<agon_aggregates::debate::Debate, ApiError> {
    debates
        .published(&parse(id)?)
        .await?
        .ok_or_else(|| not_found(id))
}

fn parse(id: &str) -> Result<DebateId, ApiError> {
    DebateId::parse(id).map_err(|_| not_found(id))
}

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound {
        resource_type: "debate",
        resource_id: Some(id.to_owned()),
    }
}

fn refused(error: GalleryError, id: &str) -> ApiError {
    match error {
        GalleryError::NotFound => not_found(id),
        e @ GalleryError::NotOwner => ApiError::Forbidden(e.to_string()),
        GalleryError::Rejected(rule) => ApiError::rejected(&Refusal::of(&rule), None),
        GalleryError::Store(e) => e.into(),
        e @ GalleryError::Contended => ApiError::Unavailable(e.to_string()),
    }
}
