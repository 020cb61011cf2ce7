//! The public gallery (§4.5): `/gallery` and `/gallery/{id}` for anyone,
//! `/gallery/{id}/embed` (the one page other sites may frame), and the
//! owner's publish and unpublish buttons on a finished debate's page.
//! They read what `GET /api/gallery…` reads, through the same service calls.

use agon_aggregates::ids::DebateId;
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use serde_json::Value;

use super::{Chrome, render};
use crate::config::WebSettings;
use crate::debates::{Debates, GalleryError};
use crate::markdown;
use crate::views::gallery::{GalleryDetail, GalleryEmbed};
use crate::web::assets::ASSETS;
use crate::web::error::PageError;
use crate::web::session::{SignedIn, Visitor};

#[derive(Debug, Deserialize)]
pub struct GalleryQuery {
    offset: Option<u64>,
}

/// A published debate in the list.
#[derive(Debug)]
struct Card {
    id: String,
    topic: String,
    agents: String,
    reached: bool,
    confidence: Option<String>,
    /// The consensus summary, rendered from Markdown.
    summary: String,
    published: String,
}

impl Card {
    fn of(item: &Value) -> Self {
        let text = |key: &str| item[key].as_str().unwrap_or_default();
        Self {
            id: text("id").to_owned(),
            topic: text("topic").to_owned(),
            agents: join(&item["agents"]),
            reached: item["consensus_reached"].as_bool().unwrap_or(false),
            confidence: item["confidence"].as_f64().map(percent),
            summary: markdown::render(text("summary")),
            published: text("published_at").chars().take(10).collect(),
        }
    }
}

fn join(list: &Value) -> String {
    list.as_array().map_or_else(String::new, |items| {
        items
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    })
}

fn percent(confidence: f64) -> String {
    format!("{:.0}%", confidence * 100.0)
}

#[derive(Template)]
#[template(path = "gallery.html")]
struct GalleryPage {
    chrome: Chrome,
    cards: Vec<Card>,
    total: u64,
    previous: Option<u64>,
    next: Option<u64>,
}

/// `GET /gallery`: published debates, newest publication first.
pub async fn list(
    State(debates): State<Debates>,
    State(settings): State<WebSettings>,
    visitor: Visitor,
    Query(query): Query<GalleryQuery>,
) -> Result<Response, PageError> {
    let (limit, offset) = (settings.page_size, query.offset.unwrap_or(0));
    let page = debates
        .gallery_page(limit, offset)
        .await
        .map_err(PageError::internal)?;
    let cards = page
        .items
        .iter()
        .filter_map(|item| serde_json::from_str::<Value>(item).ok())
        .map(|item| Card::of(&item))
        .collect();
    let shown = offset + u64::try_from(page.items.len()).unwrap_or(u64::MAX);
    render(&GalleryPage {
        chrome: Chrome::of(&visitor, "gallery"),
        cards,
        total: page.total,
        previous: (offset > 0).then(|| offset.saturating_sub(u64::from(limit))),
        next: (shown < page.total).then_some(shown),
    })
}

/// One contribution of a published debate, its Markdown rendered.
#[derive(Debug)]
struct Contribution {
    round: u32,
    phase: String,
    agent: String,
    targets: String,
    html: String,
}

#[derive(Template)]
#[template(path = "gallery_show.html")]
struct ShowPage {
    chrome: Chrome,
    id: String,
    topic: String,
    agents: String,
    published: String,
    contributions: Vec<Contribution>,
    reached: bool,
    /// Confidence as a fraction and in percent, once there is a consensus.
    confidence: Option<(f64, String)>,
    summary: String,
    key_points: Vec<String>,
    disagreements: Vec<String>,
    mode: String,
    failed: String,
}

/// The published debate `id`, or the not-found page (an unpublished
/// debate's existence is not revealed).
async fn published(
    debates: &Debates,
    id: &str,
) -> Result<agon_aggregates::debate::Debate, PageError> {
    let id = DebateId::parse(id).map_err(|_| PageError::NotFound)?;
    debates
        .published(&id)
        .await
        .map_err(PageError::internal)?
        .ok_or(PageError::NotFound)
}

/// `GET /gallery/{id}`: a published debate, every contribution and the outcome.
pub async fn show(
    State(debates): State<Debates>,
    visitor: Visitor,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let debate = published(&debates, &id).await?;
    let detail = GalleryDetail::of(&debate).ok_or(PageError::NotFound)?;
    let contributions = detail
        .rounds
        .iter()
        .flat_map(|round| &round.messages)
        .map(|m| Contribution {
            round: m.round,
            phase: m.phase.clone(),
            agent: m.agent.clone(),
            targets: m.targets.join(", "),
            html: markdown::render(&m.content),
        })
        .collect();
    let consensus = detail.consensus.as_ref();
    render(&ShowPage {
        chrome: Chrome::of(&visitor, "gallery"),
        id: detail.summary.id.clone(),
        topic: detail.summary.topic.clone(),
        agents: detail.summary.agents.join(", "),
        published: detail.summary.published_at.format("%Y-%m-%d").to_string(),
        contributions,
        reached: consensus.is_some_and(|c| c.reached),
        confidence: consensus.map(|c| (c.confidence, percent(c.confidence))),
        summary: consensus.map_or_else(String::new, |c| markdown::render(&c.summary)),
        key_points: consensus.map_or_else(Vec::new, |c| c.key_points.clone()),
        disagreements: consensus.map_or_else(Vec::new, |c| c.disagreements.clone()),
        mode: consensus.map_or_else(String::new, |c| c.mode.clone()),
        failed: detail.failed_agents.join(", "),
    })
}

#[derive(Template)]
#[template(path = "gallery_embed.html")]
struct EmbedCard {
    css: &'static str,
    card: GalleryEmbed,
    confidence: Option<String>,
    summary: String,
}

/// `GET /gallery/{id}/embed`: a card other sites may put in a frame; its
/// links open the full page outside the frame.
pub async fn embed(
    State(debates): State<Debates>,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let debate = published(&debates, &id).await?;
    let card = GalleryEmbed::of(&debate, debates.public_url()).ok_or(PageError::NotFound)?;
    let page = EmbedCard {
        css: &ASSETS.css.url,
        confidence: card.confidence.map(percent),
        summary: markdown::render(card.summary.as_deref().unwrap_or_default()),
        card,
    };
    let mut response = render(&page)?;
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static(crate::views::EMBED_POLICY),
    );
    Ok(response)
}

/// `POST /debates/{id}/publish`: the owner puts a completed debate in the gallery.
pub async fn publish(
    State(debates): State<Debates>,
    SignedIn(caller): SignedIn,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let id = DebateId::parse(&id).map_err(|_| PageError::NotFound)?;
    gallery_outcome(debates.publish(&caller, &id).await.map(|_| ()), &id)
}

/// `POST /debates/{id}/unpublish`: the owner takes it out again.
pub async fn unpublish(
    State(debates): State<Debates>,
    SignedIn(caller): SignedIn,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let id = DebateId::parse(&id).map_err(|_| PageError::NotFound)?;
    gallery_outcome(debates.unpublish(&caller, &id).await.map(|_| ()), &id)
}

/// Back to the debate's page, or the page for what went wrong.
fn gallery_outcome(
    outcome: Result<(), GalleryError>,
    id: &DebateId,
) -> Result<Response, PageError> {
    match outcome {
        Ok(()) => Ok(Redirect::to(&format!("/debates/{id}")).into_response()),
        Err(GalleryError::NotFound) => Err(PageError::NotFound),
        Err(e @ GalleryError::NotOwner) => Err(PageError::Forbidden(e.to_string())),
        Err(GalleryError::Rejected(e)) => Err(PageError::BadRequest(e.to_string())),
        Err(e @ GalleryError::Contended) => Err(PageError::Unavailable(e.to_string())),
        Err(GalleryError::Store(e)) => Err(PageError::internal(e)),
    }
}
