//! The debates list's tables: one row per debate with the columns the list
//! filters and orders on (owner, status, creation order) and the list item
//! as served, plus counts per owner and status, so a page and its total are
//! index reads whatever the number of debates. The `debates` projection
//! writes them with its documents.

use agon_aggregates::debate::{ConsensusStatus, Debate, DebateStatus, Stage};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::tables::{Cells, Changes};
use crate::{DocumentProjection, debates::Debates};

/// One row per debate: `debate_id`, `owner`, `status`, `sort_key`, `item`,
/// `topic_folded` (the topic as [`fold`] leaves it, for search).
pub const LIST_TABLE: &str = "debate_list";
/// Debates per `(owner, status)`, `debates`.
pub const COUNT_TABLE: &str = "debate_list_counts";
/// The `owner` (or `status`) of a count over every owner (or status).
pub const ANY: &str = "*";
/// The `owner` of a count of debates nobody created (the CLI's).
pub const NO_OWNER: &str = "";

/// A debate as the list shows it (`GET /api/debates`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListItem {
    pub id: String,
    pub debate_id: String,
    pub topic: String,
    pub status: String,
    pub agents: Vec<String>,
    pub max_rounds: u32,
    pub rounds_completed: u32,
    pub current_round: Option<u32>,
    pub current_phase: Option<String>,
    pub message_count: usize,
    pub consensus_status: Option<String>,
    pub confidence: Option<f64>,
    pub created_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub error: Option<String>,
}

impl ListItem {
    pub fn of(debate: &Debate) -> Self {
        let stage = match debate.status {
            DebateStatus::Running | DebateStatus::Paused => debate.current_stage(),
            _ => None,
        };
        let (current_round, current_phase) = match stage {
            Some(Stage::Turns { round, phase }) => (Some(round), Some(phase)),
            Some(Stage::Synthesis) => (Some(debate.last_round()), Some("synthesis".to_owned())),
            Some(Stage::Vote) => (Some(debate.last_round()), Some("vote".to_owned())),
            None => (None, None),
        };
        let consensus = debate.consensus.as_ref();
        Self {
            id: debate.id.clone(),
            debate_id: debate.id.clone(),
            topic: debate.topic.clone(),
            status: debate.status.as_str().to_owned(),
            agents: debate.agents.clone(),
            max_rounds: debate.last_round(),
            rounds_completed: rounds_completed(debate),
            current_round,
            current_phase,
            message_count: debate.messages.len(),
            consensus_status: consensus.map(|c| consensus_name(c.status).to_owned()),
            confidence: consensus.map(|c| c.confidence),
            created_at: debate.created_at,
            started_at: debate.started_at,
            completed_at: debate.finished_at,
            error: debate.failure_reason.clone(),
        }
    }
}

/// The leading rounds in which every active agent took each of its turns
/// (a round nobody spoke in is not done, even when every agent has failed).
fn rounds_completed(debate: &Debate) -> u32 {
    let stages = debate.stages();
    let done = |round: u32| {
        debate.messages.iter().any(|m| m.round == round)
            && stages.iter().all(|stage| match stage {
                Stage::Turns { round: r, .. } if *r == round => debate.missing(stage).is_empty(),
                _ => true,
            })
    };
    let done = (1..=debate.last_round()).take_while(|&round| done(round));
    u32::try_from(done.count()).unwrap_or(u32::MAX)
}

/// A consensus status as served.
pub fn consensus_name(status: ConsensusStatus) -> &'static str {
    match status {
        ConsensusStatus::ConsensusReached => "consensus_reached",
        ConsensusStatus::NoConsensus => "no_consensus",
    }
}

/// Text as search compares it: lower case by Unicode's rules (SQLite's
/// `lower()` and `LIKE` fold ASCII only), so a topic and a query folded
/// alike match whatever their case.
pub fn fold(text: &str) -> String {
    text.to_lowercase()
}

fn count_key(owner: &str, status: &str) -> Cells {
    vec![("owner", owner.into()), ("status", status.into())]
}

/// The list rows that change when a batch takes a debate from `before` to
/// `after`: its row, and the counts of the statuses it left and entered.
/// Written by the `debates` projection in the transaction of its document,
/// so the list and the document never disagree.
pub fn list_rows(before: Option<&Debate>, after: &Debate, changes: &mut Changes) {
    if !after.exists() {
        return;
    }
    let item = ListItem::of(after);
    // A list item of plain fields always serializes.
    let item = serde_json::to_string(&item).unwrap_or_else(|_| "{}".to_owned());
    let owner = after.created_by.clone();
    changes.upsert(
        LIST_TABLE,
        vec![("debate_id", after.id.as_str().into())],
        vec![
            ("owner", owner.clone().into()),
            ("status", after.status.as_str().into()),
            (
                "sort_key",
                Debates::sort_key(after).unwrap_or_default().into(),
            ),
            ("item", item.into()),
            ("topic_folded", fold(&after.topic).into()),
        ],
    );
    let before = before.filter(|d| d.exists()).map(|d| d.status);
    let status = after.status.as_str();
    if before.map(DebateStatus::as_str) == Some(status) {
        return;
    }
    let owner = owner.unwrap_or_else(|| NO_OWNER.to_owned());
    for scope in [owner.as_str(), ANY] {
        match before {
            Some(before) => {
                changes.increment(
                    COUNT_TABLE,
                    count_key(scope, before.as_str()),
                    "debates",
                    -1,
                );
            }
            None => changes.increment(COUNT_TABLE, count_key(scope, ANY), "debates", 1),
        }
        changes.increment(COUNT_TABLE, count_key(scope, status), "debates", 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::debates::DEBATE_AGGREGATE;
    use crate::tables::Change;
    use crate::{Cursor, EventRecord};
    use serde_json::json;

    fn event(sequence: i64, payload: serde_json::Value) -> EventRecord {
        EventRecord {
            cursor: Cursor::START,
            event_id: format!("d-{sequence}"),
            aggregate_type: DEBATE_AGGREGATE.to_owned(),
            aggregate_id: "d".to_owned(),
            sequence,
            event_type: String::new(),
            event_version: "1".to_owned(),
            payload,
            metadata: json!({}),
            hash: String::new(),
        }
    }

    fn created() -> EventRecord {
        event(
            1,
            json!({"DebateCreated": {"debate_id": "d", "topic": "t", "context": null,
                "agents": ["a", "b"], "protocol": {"phases": ["opening"], "rounds": 1,
                "consensus": "majority", "threshold": 0.5, "judge": null},
                "created_by": "u1", "org_id": null, "at": "2026-01-01T00:00:00Z"}}),
        )
    }

    fn counts(changes: &Changes) -> Vec<(String, i64)> {
        changes
            .iter()
            .filter(|c| c.table == COUNT_TABLE)
            .map(|c| {
                let key = format!("{:?}/{:?}", c.key[0].1, c.key[1].1);
                match c.change {
                    Change::Increment { by, .. } => (key, by),
                    _ => (key, 0),
                }
            })
            .collect()
    }

    /// The debate after `event` and the list rows that step changes.
    fn step(before: Option<Debate>, event: &EventRecord) -> (Debate, Changes) {
        let after = Debates::apply(before.clone(), event)
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_default();
        let mut changes = Changes::default();
        list_rows(before.as_ref(), &after, &mut changes);
        (after, changes)
    }

    #[test]
    fn a_new_debate_gets_a_row_and_counts_in_four_places() {
        let (_, changes) = step(None, &created());
        assert_eq!(changes.iter().filter(|c| c.table == LIST_TABLE).count(), 1);
        let counts = counts(&changes);
        assert_eq!(counts.len(), 4);
        assert!(counts.iter().all(|(_, by)| *by == 1));
    }

    #[test]
    fn a_status_change_moves_the_debate_between_counts() {
        let (state, _) = step(None, &created());
        let started = event(2, json!({"DebateStarted": {"at": "2026-01-01T00:00:01Z"}}));
        let (state, changes) = step(Some(state), &started);
        let counts = counts(&changes);
        let total: i64 = counts.iter().map(|(_, by)| by).sum();
        assert_eq!((counts.len(), total), (4, 0));
        assert_eq!(state.status, DebateStatus::Running);
    }
}
