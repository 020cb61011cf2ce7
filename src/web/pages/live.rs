//! The live debate page, `/debates/{id}`: the debate as recorded, then (with
//! JavaScript) its events as they happen through `/ws?format=html`, which
//! this module renders too ([`LiveHtml`]). Every element an event changes
//! has a stable id and one template in `templates/live/`, used by the page
//! and by the fragments alike: a fragment replaces its element by id
//! (htmx's out-of-band swap), so a replayed event changes nothing twice.
//! Each (round, phase, agent) has its slot from the start (empty ones are
//! hidden), which a streamed draft and then the recorded message fill.
//! The socket's side is [`super::live_html`].

use std::fmt::Write as _;

use agon_aggregates::debate::{AgentFailure, Debate, Message, Synthesis, VoteChoice};
use agon_aggregates::ids::DebateId;
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};

use serde::Deserialize;

use super::rounds::RoundPages;
use super::{Chrome, render};
use crate::config::WebSettings;
use crate::debates::Debates;
use crate::views::debates::DebateDetail;
use crate::web::assets::ASSETS;
use crate::web::error::PageError;
use crate::web::session::SignedIn;

/// Phases that are not rounds' contributions (the plan runs them once, at the end).
pub(super) const CLOSING_PHASES: [&str; 2] = ["vote", "synthesis"];

/// The facts at the top.
#[derive(Debug)]
pub struct Header {
    pub status: &'static str,
    pub agents: String,
    /// The highest round with a recorded message (0: none yet).
    pub round: u32,
    pub rounds: u32,
    pub phase: Option<String>,
    pub error: Option<String>,
}

impl Header {
    pub(super) fn of(debate: &Debate) -> Self {
        let last = debate.messages.last();
        Self {
            status: debate.status.as_str(),
            agents: debate.agents.join(", "),
            round: debate.messages.iter().map(|m| m.round).max().unwrap_or(0),
            rounds: debate.protocol.as_ref().map_or(0, |p| p.rounds),
            phase: closing_stage(debate)
                .map(str::to_owned)
                .or_else(|| last.map(|m| m.phase.clone())),
            error: debate.failure_reason.clone(),
        }
    }
}

/// The closing stage a debate is in or ended at (its votes, then its
/// synthesis), which no round message names.
fn closing_stage(debate: &Debate) -> Option<&'static str> {
    if !debate.votes.is_empty() {
        Some("vote")
    } else if debate.synthesis.is_some() {
        Some("synthesis")
    } else {
        None
    }
}

/// What one agent's slot in a round's phase holds.
#[derive(Debug)]
pub enum SlotState {
    Empty,
    /// Text streamed so far, before the message is recorded.
    Draft(String),
    /// The message and its text as HTML ([`agent_html`]).
    Recorded(Message, String),
    Failed(AgentFailure),
}

/// An agent's Markdown as safe HTML; its headings sit below the slot's.
pub(super) fn agent_html(text: &str) -> String {
    crate::markdown::render_with(
        text,
        crate::markdown::RenderOptions {
            first_heading_level: 6,
        },
    )
}

#[derive(Debug)]
pub struct Slot {
    pub id: String,
    pub agent: String,
    pub state: SlotState,
}

/// A name as a piece of an element id: letters and digits stay, anything
/// else becomes `_` and its code point, so different names never collide.
pub(super) fn slug(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else {
            let _ = write!(out, "_{:x}", u32::from(c));
        }
    }
    out
}

pub(super) fn slot_id(round: u32, phase: &str, agent: &str) -> String {
    format!("c-{round}-{}-{}", slug(phase), slug(agent))
}

impl Slot {
    pub(super) fn of(
        debate: &Debate,
        round: u32,
        phase: &str,
        agent: &str,
        draft: Option<String>,
    ) -> Self {
        let at = |r: u32, p: &str, a: &str| r == round && p == phase && a == agent;
        let message = debate
            .messages
            .iter()
            .rev()
            .find(|m| at(m.round, &m.phase, &m.agent));
        let failure = debate
            .failures
            .iter()
            .find(|f| at(f.round, &f.phase, &f.agent));
        let state = match (message, failure, draft) {
            (Some(m), _, _) => SlotState::Recorded(m.clone(), agent_html(&m.content)),
            (None, Some(f), _) => SlotState::Failed(f.clone()),
            (None, None, Some(text)) => SlotState::Draft(text),
            (None, None, None) => SlotState::Empty,
        };
        Self {
            id: slot_id(round, phase, agent),
            agent: agent.to_owned(),
            state,
        }
    }
}

#[derive(Debug)]
pub struct PhaseView {
    pub name: String,
    pub slots: Vec<Slot>,
}

#[derive(Debug)]
pub struct RoundView {
    pub number: u32,
    pub phases: Vec<PhaseView>,
}

/// The shown rounds' phases with a slot per agent, as the protocol plans them.
pub(super) fn rounds(debate: &Debate, pages: &RoundPages) -> Vec<RoundView> {
    let Some(protocol) = &debate.protocol else {
        return Vec::new();
    };
    (pages.first..=pages.last.min(protocol.rounds))
        .map(|number| RoundView {
            number,
            phases: round_phases(debate)
                .map(|phase| PhaseView {
                    name: phase.to_owned(),
                    slots: debate
                        .agents
                        .iter()
                        .map(|agent| Slot::of(debate, number, phase, agent, None))
                        .collect(),
                })
                .collect(),
        })
        .collect()
}

/// The phases each round runs (the closing ones run once, after them).
fn round_phases(debate: &Debate) -> impl Iterator<Item = &str> {
    debate
        .protocol
        .iter()
        .flat_map(|p| p.phases.iter())
        .map(String::as_str)
        .filter(|p| !CLOSING_PHASES.contains(p))
}

/// The pages of a debate's rounds, for what the address asked.
pub(super) fn round_pages(debate: &Debate, limit: u32, asked: Option<u32>) -> RoundPages {
    let rounds = debate.protocol.as_ref().map_or(0, |p| p.rounds);
    let per_round =
        u32::try_from(debate.agents.len() * round_phases(debate).count()).unwrap_or(u32::MAX);
    let current = debate.messages.iter().map(|m| m.round).max().unwrap_or(0);
    RoundPages::choose(
        rounds,
        per_round,
        limit,
        current,
        !debate.status.is_finished(),
        asked,
    )
}

/// The synthesis, its text as HTML.
#[derive(Debug)]
pub struct SynthesisView {
    pub agent: String,
    pub usage: agon_aggregates::debate::Usage,
    pub summary: String,
    pub key_points: Vec<String>,
    /// The consensus, shown above it, carries this summary and these key
    /// points: the page says so rather than showing them twice.
    pub in_consensus: bool,
}

pub(super) fn synthesis(debate: &Debate) -> Option<SynthesisView> {
    debate
        .synthesis
        .as_ref()
        .map(|s: &Synthesis| SynthesisView {
            agent: s.agent.clone(),
            usage: s.usage.clone(),
            summary: agent_html(&s.summary),
            key_points: s.key_points.clone(),
            in_consensus: debate
                .consensus
                .as_ref()
                .is_some_and(|c| c.summary == s.summary && c.key_points == s.key_points),
        })
}

#[derive(Debug)]
pub struct VoteRow {
    pub agent: String,
    pub choice: &'static str,
    pub confidence: f64,
    pub reasons: String,
}

pub(super) fn votes(debate: &Debate) -> Vec<VoteRow> {
    debate
        .votes
        .iter()
        .map(|v| VoteRow {
            agent: v.agent.clone(),
            choice: match v.choice {
                VoteChoice::Agree => "agree",
                VoteChoice::AgreeWithModifications => "agree with modifications",
                VoteChoice::Disagree => "disagree",
            },
            confidence: v.confidence,
            reasons: v.reasons.join(" "),
        })
        .collect()
}

#[derive(Debug)]
pub struct ConsensusView {
    pub reached: bool,
    pub confidence: f64,
    pub summary: String,
    pub key_points: Vec<String>,
    pub disagreements: Vec<String>,
    pub agree: u32,
    pub modify: u32,
    pub disagree: u32,
    pub mode: &'static str,
    pub threshold: Option<f64>,
    pub failed: Vec<String>,
}

pub(super) fn consensus(debate: &Debate) -> Option<ConsensusView> {
    let c = debate.consensus.as_ref()?;
    Some(ConsensusView {
        reached: matches!(
            c.status,
            agon_aggregates::debate::ConsensusStatus::ConsensusReached
        ),
        confidence: c.confidence,
        summary: agent_html(&c.summary),
        key_points: c.key_points.clone(),
        disagreements: c.disagreements.clone(),
        agree: c.voting_summary.agree,
        modify: c.voting_summary.agree_with_modifications,
        disagree: c.voting_summary.disagree,
        mode: c.mode.as_str(),
        threshold: c.threshold,
        failed: c.failed_agents.clone(),
    })
}

/// The links once the debate has ended, and publishing for its creator.
#[derive(Debug)]
pub struct After {
    pub id: String,
    pub finished: bool,
    /// The viewer created it and it completed: it may go to the gallery.
    pub publishable: bool,
    pub published: bool,
}

impl After {
    pub(super) fn of(debate: &Debate, viewer: &str) -> Self {
        Self {
            id: debate.id.clone(),
            finished: debate.status.is_finished(),
            publishable: debate.created_by.as_deref() == Some(viewer)
                && debate.status == agon_aggregates::debate::DebateStatus::Completed,
            published: debate.published_at.is_some(),
        }
    }
}

#[derive(Template)]
#[template(path = "debate_show.html")]
struct DebatePage {
    chrome: Chrome,
    hx_ws: &'static str,
    topic: String,
    context: Option<String>,
    header: Header,
    conn: &'static str,
    /// The socket's address while the debate runs.
    live: Option<String>,
    consensus: Option<ConsensusView>,
    pages: RoundPages,
    rounds: Vec<RoundView>,
    failures: Vec<AgentFailure>,
    synthesis: Option<SynthesisView>,
    votes: Vec<VoteRow>,
    after: After,
    /// Page elements are not fragments.
    oob: bool,
}

pub(super) const OFFLINE: &str = "not live: reload the page to see new contributions";
pub(super) const LIVE: &str = "live";
pub(super) const ENDED: &str = "the debate has ended";

/// `?round=`: a round whose page to show (anything else: the current one).
#[derive(Debug, Deserialize)]
pub struct RoundQuery {
    round: Option<String>,
}

/// `GET /debates/{id}`: the debate as recorded, if the user may see it,
/// following it live while it runs.
pub async fn show(
    State(debates): State<Debates>,
    State(settings): State<WebSettings>,
    SignedIn(caller): SignedIn,
    Path(id): Path<String>,
    Query(query): Query<RoundQuery>,
) -> Result<Response, PageError> {
    let id = DebateId::parse(&id).map_err(|_| PageError::NotFound)?;
    let (debate, position) = debates
        .recorded(&caller, &id)
        .await
        .map_err(PageError::internal)?
        .ok_or(PageError::NotFound)?;
    let finished = debate.status.is_finished();
    let asked = query.round.and_then(|r| r.parse().ok());
    let pages = round_pages(&debate, settings.debate_contributions, asked);
    render(&DebatePage {
        chrome: Chrome::for_caller(Some(&caller), ""),
        hx_ws: &ASSETS.htmx_ws.url,
        topic: debate.topic.clone(),
        context: debate.context.clone(),
        header: Header::of(&debate),
        conn: if finished { ENDED } else { OFFLINE },
        live: (!finished).then(|| {
            format!(
                "/ws?debate_id={}&since={position}&format=html",
                super::encode(&debate.id)
            )
        }),
        consensus: consensus(&debate),
        rounds: rounds(&debate, &pages),
        pages,
        failures: debate.failures.clone(),
        synthesis: synthesis(&debate),
        votes: votes(&debate),
        after: After::of(&debate, caller.user_id.as_str()),
        oob: false,
    })
}

/// `GET /debates/{id}/export/{format}`: the debate as a file, the bytes
/// the API exports (`json`: its detail, `md`: its report).
pub async fn export(
    State(debates): State<Debates>,
    SignedIn(caller): SignedIn,
    Path((id, format)): Path<(String, String)>,
) -> Result<Response, PageError> {
    let id = DebateId::parse(&id).map_err(|_| PageError::NotFound)?;
    let debate = debates
        .get(&caller, &id)
        .await
        .map_err(PageError::internal)?
        .ok_or(PageError::NotFound)?;
    let (content_type, body) = match format.as_str() {
        "json" => (
            "application/json",
            serde_json::to_string(&DebateDetail::from(&debate)).map_err(PageError::internal)?,
        ),
        "md" => (
            "text/markdown; charset=utf-8",
            crate::views::report::markdown(&debate),
        ),
        _ => return Err(PageError::NotFound),
    };
    let file = format!("attachment; filename=\"debate-{}.{format}\"", debate.id);
    Ok((
        [
            (header::CONTENT_TYPE, content_type.to_owned()),
            (header::CONTENT_DISPOSITION, file),
        ],
        body,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_different_names_differ_and_stay_plain() {
        assert_eq!(slug("demo-a"), "demo_2da");
        assert_ne!(slug("a b"), slug("a_b"));
        assert!(
            slug("<x\">")
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        );
        assert_eq!(slot_id(2, "opening", "demo-a"), "c-2-opening-demo_2da");
    }
}
