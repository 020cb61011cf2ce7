//! Event counts per aggregate type and the number of active debates, for
//! `GET /api/admin/stats`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::{DecodeError, EventRecord, Projection};

/// The aggregate type under which debates are stored.
pub const DEBATE_AGGREGATE: &str = "debate";
/// Debate event types after which a debate is no longer active.
pub const DEBATE_TERMINAL_EVENTS: [&str; 2] = ["DebateCompleted", "DebateFailed"];

/// The admin statistics view.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AdminStatsView {
    /// Total events per aggregate type.
    pub events_by_aggregate_type: BTreeMap<String, u64>,
    /// Total events of every type.
    pub total_events: u64,
    /// Debates created and not yet completed or failed.
    pub active_debates: BTreeSet<String>,
}

/// Projection behind `GET /api/admin/stats`.
pub struct AdminStats;

impl Projection for AdminStats {
    const NAME: &'static str = "admin_stats";
    type View = AdminStatsView;

    /// Reads only the envelope, so it never fails to decode.
    fn apply(view: &mut AdminStatsView, event: &EventRecord) -> Result<(), DecodeError> {
        *view
            .events_by_aggregate_type
            .entry(event.aggregate_type.clone())
            .or_default() += 1;
        view.total_events += 1;
        if event.aggregate_type != DEBATE_AGGREGATE {
            return Ok(());
        }
        if DEBATE_TERMINAL_EVENTS.contains(&event.event_type.as_str()) {
            view.active_debates.remove(&event.aggregate_id);
        } else if event.sequence == 1 {
            view.active_debates.insert(event.aggregate_id.clone());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cursor;
    use serde_json::json;

    fn event(aggregate_type: &str, id: &str, sequence: i64, event_type: &str) -> EventRecord {
        EventRecord {
            cursor: Cursor::START,
            event_id: format!("{id}-{sequence}"),
            aggregate_type: aggregate_type.to_owned(),
            aggregate_id: id.to_owned(),
            sequence,
            event_type: event_type.to_owned(),
            event_version: "1".to_owned(),
            payload: json!({}),
            metadata: json!({}),
            hash: String::new(),
        }
    }

    #[test]
    fn counts_events_per_aggregate_type() {
        let mut view = AdminStatsView::default();
        AdminStats::apply(&mut view, &event("account", "a", 1, "Registered"))
            .unwrap_or_else(|e| panic!("{e}"));
        AdminStats::apply(&mut view, &event("account", "a", 2, "LoggedIn"))
            .unwrap_or_else(|e| panic!("{e}"));
        AdminStats::apply(&mut view, &event("budget", "b", 1, "Opened"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(view.total_events, 3);
        assert_eq!(view.events_by_aggregate_type.get("account"), Some(&2));
        assert_eq!(view.events_by_aggregate_type.get("budget"), Some(&1));
        assert!(view.active_debates.is_empty());
    }

    #[test]
    fn a_debate_is_active_from_creation_until_it_ends() {
        let mut view = AdminStatsView::default();
        AdminStats::apply(&mut view, &event("debate", "d1", 1, "DebateCreated"))
            .unwrap_or_else(|e| panic!("{e}"));
        AdminStats::apply(&mut view, &event("debate", "d2", 1, "DebateCreated"))
            .unwrap_or_else(|e| panic!("{e}"));
        AdminStats::apply(&mut view, &event("debate", "d1", 2, "MessageRecorded"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(view.active_debates.len(), 2);
        AdminStats::apply(&mut view, &event("debate", "d1", 3, "DebateCompleted"))
            .unwrap_or_else(|e| panic!("{e}"));
        AdminStats::apply(&mut view, &event("debate", "d2", 2, "DebateFailed"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(view.active_debates.is_empty());
    }
}
