//! How the public gallery looks over HTTP: a published debate's card in
//! the list, its public detail, and the embed descriptor an HTML card is
//! made from. Only what a published debate shows everyone: topic, agents,
//! what they said and the outcome; never its creator, organization,
//! context, providers or costs.

use std::collections::BTreeMap;

use agon_aggregates::debate::{ConsensusStatus, Debate};
use agon_projections::gallery::GalleryItem;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

/// A published debate in the gallery list (the item the `debates`
/// projection stores in its `debate_gallery` table, field for field).
#[derive(Debug, Serialize, ToSchema)]
pub struct GallerySummary {
    pub id: String,
    /// The same value as `id`.
    pub debate_id: String,
    pub topic: String,
    pub agents: Vec<String>,
    /// The rounds the debate ran (as in the debates list).
    pub max_rounds: u32,
    pub message_count: usize,
    /// Whether the agents reached consensus.
    pub consensus_reached: bool,
    /// The consensus confidence, 0 to 1.
    pub confidence: Option<f64>,
    /// The consensus summary (the final answer).
    pub summary: Option<String>,
    pub created_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub published_at: DateTime<Utc>,
}

impl From<GalleryItem> for GallerySummary {
    fn from(item: GalleryItem) -> Self {
        Self {
            id: item.id,
            debate_id: item.debate_id,
            topic: item.topic,
            agents: item.agents,
            max_rounds: item.max_rounds,
            message_count: item.message_count,
            consensus_reached: item.consensus_reached,
            confidence: item.confidence,
            summary: item.summary,
            created_at: item.created_at,
            completed_at: item.completed_at,
            published_at: item.published_at,
        }
    }
}

/// One contribution as the gallery shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GalleryMessage {
    pub round: u32,
    pub phase: String,
    pub agent: String,
    /// The agent's text (Markdown).
    pub content: String,
    /// The agents the message answers.
    pub targets: Vec<String>,
    pub created_at: DateTime<Utc>,
}

/// A round and its contributions in the order recorded.
#[derive(Debug, Serialize, ToSchema)]
pub struct GalleryRound {
    pub round_number: u32,
    pub messages: Vec<GalleryMessage>,
}

/// The outcome as the gallery shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct GalleryConsensus {
    pub reached: bool,
    pub summary: String,
    pub confidence: f64,
    pub key_points: Vec<String>,
    pub disagreements: Vec<String>,
    /// majority, supermajority, unanimous, judge or weighted.
    pub mode: String,
}

/// A published debate with what its agents said and the outcome.
#[derive(Debug, Serialize, ToSchema)]
pub struct GalleryDetail {
    #[serde(flatten)]
    pub summary: GallerySummary,
    /// Every round that holds a message.
    pub rounds: Vec<GalleryRound>,
    pub consensus: Option<GalleryConsensus>,
    /// Agents that dropped out of the debate.
    pub failed_agents: Vec<String>,
}

impl GalleryDetail {
    /// The public detail of `debate`; `None` when it is not published.
    pub fn of(debate: &Debate) -> Option<Self> {
        let summary = GallerySummary::from(GalleryItem::of(debate)?);
        let mut rounds: BTreeMap<u32, Vec<GalleryMessage>> = BTreeMap::new();
        for m in &debate.messages {
            rounds.entry(m.round).or_default().push(GalleryMessage {
                round: m.round,
                phase: m.phase.clone(),
                agent: m.agent.clone(),
                content: m.content.clone(),
                targets: m.targets.clone(),
                created_at: m.at,
            });
        }
        let consensus = debate.consensus.as_ref().map(|c| GalleryConsensus {
            reached: c.status == ConsensusStatus::ConsensusReached,
            summary: c.summary.clone(),
            confidence: c.confidence,
            key_points: c.key_points.clone(),
            disagreements: c.disagreements.clone(),
            mode: c.mode.as_str().to_owned(),
        });
        Some(Self {
            summary,
            rounds: rounds
                .into_iter()
                .map(|(round_number, messages)| GalleryRound {
                    round_number,
                    messages,
                })
                .collect(),
            consensus,
            failed_agents: debate.failed_agents(),
        })
    }
}

/// What an embedded card of a published debate shows, and where it links.
#[derive(Debug, Serialize, ToSchema)]
pub struct GalleryEmbed {
    pub id: String,
    /// The debate's topic.
    pub title: String,
    pub agents: Vec<String>,
    pub consensus_reached: bool,
    /// The consensus confidence, 0 to 1.
    pub confidence: Option<f64>,
    /// The consensus summary (the final answer).
    pub summary: Option<String>,
    /// The gallery page of the debate.
    pub url: String,
    /// The HTML card to frame (the only page others may frame).
    pub embed_url: String,
    /// This descriptor's JSON form of the debate.
    pub api_url: String,
    pub published_at: DateTime<Utc>,
}

impl GalleryEmbed {
    /// The embed descriptor of `debate` on a service at `public_url`
    /// (no trailing slash); `None` when it is not published.
    pub fn of(debate: &Debate, public_url: &str) -> Option<Self> {
        let item = GalleryItem::of(debate)?;
        let page = format!("{public_url}/gallery/{}", item.id);
        Some(Self {
            title: item.topic,
            agents: item.agents,
            consensus_reached: item.consensus_reached,
            confidence: item.confidence,
            summary: item.summary,
            embed_url: format!("{page}/embed"),
            api_url: format!("{public_url}/api/gallery/{}", item.id),
            url: page,
            published_at: item.published_at,
            id: item.id,
        })
    }
}

/// Whether a debate is in the gallery, as publishing or unpublishing left it.
#[derive(Debug, Serialize, ToSchema)]
pub struct PublishState {
    pub debate_id: String,
    pub published: bool,
    /// When it was published; null when it is not in the gallery.
    pub published_at: Option<DateTime<Utc>>,
    /// Its gallery page; null when it is not in the gallery.
    pub url: Option<String>,
}

impl PublishState {
    pub fn of(debate: &Debate, public_url: &str) -> Self {
        Self {
            debate_id: debate.id.clone(),
            published: debate.published_at.is_some(),
            published_at: debate.published_at,
            url: debate
                .published_at
                .map(|_| format!("{public_url}/gallery/{}", debate.id)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agon_aggregates::debate::DebateEvent;

    #[test]
    fn the_summary_is_the_stored_item_field_for_field_and_hides_the_owner() {
        let mut debate = Debate {
            id: "d".to_owned(),
            topic: "t".to_owned(),
            created_by: Some("owner-1".to_owned()),
            org_id: Some("org-1".to_owned()),
            context: Some("private context".to_owned()),
            ..Debate::default()
        };
        assert!(GalleryDetail::of(&debate).is_none(), "not published");
        debate.apply_event(DebateEvent::DebatePublished {
            at: "2027-01-15T08:42:00Z".parse().unwrap(),
        });
        let item = GalleryItem::of(&debate).unwrap();
        assert_eq!(
            serde_json::to_value(GallerySummary::from(item.clone())).unwrap(),
            serde_json::to_value(&item).unwrap()
        );
        let text = serde_json::to_string(&GalleryDetail::of(&debate).unwrap()).unwrap();
        let embed = serde_json::to_string(&GalleryEmbed::of(&debate, "http://x").unwrap());
        for private in ["owner-1", "org-1", "private context"] {
            assert!(!text.contains(private), "{text}");
            assert!(!embed.as_ref().unwrap().contains(private));
        }
    }
}
