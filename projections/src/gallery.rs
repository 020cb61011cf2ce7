//! The public gallery's table: one row per published debate with the
//! gallery item as served, ordered by publication, so the public list is
//! one indexed read. The `debates` projection writes it with its
//! documents, as it writes the debates list.

use agon_aggregates::debate::{ConsensusStatus, Debate};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::tables::Changes;

/// One row per published debate: `debate_id`, `sort_key`, `item`.
pub const GALLERY_TABLE: &str = "debate_gallery";

/// A published debate as anyone may see it in the gallery: its topic,
/// agents and outcome, never who created it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GalleryItem {
    pub id: String,
    pub debate_id: String,
    pub topic: String,
    pub agents: Vec<String>,
    /// The rounds the debate ran (as in the debates list).
    pub max_rounds: u32,
    pub message_count: usize,
    pub consensus_reached: bool,
    pub confidence: Option<f64>,
    /// The consensus summary (the final answer).
    pub summary: Option<String>,
    pub created_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub published_at: DateTime<Utc>,
}

impl GalleryItem {
    /// The gallery item of `debate`, if it is published.
    pub fn of(debate: &Debate) -> Option<Self> {
        let published_at = debate.published_at?;
        let consensus = debate.consensus.as_ref();
        Some(Self {
            id: debate.id.clone(),
            debate_id: debate.id.clone(),
            topic: debate.topic.clone(),
            agents: debate.agents.clone(),
            max_rounds: debate.last_round(),
            message_count: debate.messages.len(),
            consensus_reached: consensus
                .is_some_and(|c| c.status == ConsensusStatus::ConsensusReached),
            confidence: consensus.map(|c| c.confidence),
            summary: consensus.map(|c| c.summary.clone()),
            created_at: debate.created_at,
            completed_at: debate.finished_at,
            published_at,
        })
    }

    /// Publication time, then id: newest first when read backwards.
    pub fn sort_key(&self) -> String {
        format!(
            "{}|{}",
            self.published_at
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            self.id
        )
    }
}

/// The gallery row that changes when a batch takes a debate from `before`
/// to `after`: written when it is published, deleted when it is taken out.
pub fn gallery_rows(before: Option<&Debate>, after: &Debate, changes: &mut Changes) {
    let was = before.and_then(|d| d.published_at);
    if was == after.published_at {
        return;
    }
    let key = vec![("debate_id", after.id.as_str().into())];
    match GalleryItem::of(after) {
        Some(item) => {
            // An item of plain fields always serializes.
            let text = serde_json::to_string(&item).unwrap_or_else(|_| "{}".to_owned());
            changes.upsert(
                GALLERY_TABLE,
                key,
                vec![("sort_key", item.sort_key().into()), ("item", text.into())],
            );
        }
        None => changes.delete(GALLERY_TABLE, key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::Change;
    use agon_aggregates::debate::DebateEvent;

    fn published(at: &str) -> Debate {
        let mut debate = Debate {
            id: "d".to_owned(),
            topic: "t".to_owned(),
            created_by: Some("u1".to_owned()),
            ..Debate::default()
        };
        let at = at.parse().unwrap();
        debate.apply_event(DebateEvent::DebatePublished { at });
        debate
    }

    #[test]
    fn publishing_writes_the_row_and_taking_it_out_deletes_it() {
        let before = Debate {
            id: "d".to_owned(),
            ..Debate::default()
        };
        let after = published("2027-01-15T08:42:00Z");
        let mut changes = Changes::default();
        gallery_rows(Some(&before), &after, &mut changes);
        let row = changes.iter().next().unwrap();
        let Change::Upsert(columns) = &row.change else {
            panic!("{:?}", row.change)
        };
        let item = format!("{:?}", columns);
        assert!(item.contains("2027-01-15T08:42:00.000000Z|d"), "{item}");
        assert!(!item.contains("u1"), "the owner is not public: {item}");

        let mut unchanged = Changes::default();
        gallery_rows(Some(&after), &after, &mut unchanged);
        assert_eq!(unchanged.iter().count(), 0);

        let mut out = after.clone();
        out.apply_event(DebateEvent::DebateUnpublished {
            at: "2027-01-15T08:43:00Z".parse().unwrap(),
        });
        let mut changes = Changes::default();
        gallery_rows(Some(&after), &out, &mut changes);
        assert!(matches!(
            changes.iter().next().unwrap().change,
            Change::Delete
        ));
    }
}
