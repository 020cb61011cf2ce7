//! Event counts per aggregate type and the number of active debates, for
//! `GET /api/admin/stats`.

use serde::{Deserialize, Serialize};

use crate::tables::{Changes, TableProjection};
use crate::{DecodeError, EventRecord};

/// The aggregate type under which debates are stored.
pub const DEBATE_AGGREGATE: &str = "debate";
/// Debate event types after which a debate is no longer active.
pub const DEBATE_TERMINAL_EVENTS: [&str; 2] = ["DebateCompleted", "DebateFailed"];

/// Events per aggregate type: `aggregate_type`, `events`.
pub const EVENT_COUNTS_TABLE: &str = "admin_event_counts";
/// One row per debate created and not yet completed or failed: `debate_id`.
pub const ACTIVE_DEBATES_TABLE: &str = "admin_active_debates";

/// The admin statistics as read from the tables.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AdminStatsView {
    /// Total events per aggregate type.
    pub events_by_aggregate_type: std::collections::BTreeMap<String, u64>,
    /// Total events of every type.
    pub total_events: u64,
    /// Debates created and not yet completed or failed.
    pub active_debates: u64,
}

/// Table projection behind `GET /api/admin/stats`.
pub struct AdminStats;

impl TableProjection for AdminStats {
    const NAME: &'static str = "admin_stats";
    const TABLES: &'static [&'static str] = &[EVENT_COUNTS_TABLE, ACTIVE_DEBATES_TABLE];
    type State = ();

    fn relevant(_event: &EventRecord) -> bool {
        true
    }

    /// Reads only the envelope, so it never fails to decode.
    fn apply(
        _state: &mut (),
        event: &EventRecord,
        changes: &mut Changes,
    ) -> Result<(), DecodeError> {
        changes.increment(
            EVENT_COUNTS_TABLE,
            vec![("aggregate_type", event.aggregate_type.as_str().into())],
            "events",
            1,
        );
        if event.aggregate_type != DEBATE_AGGREGATE {
            return Ok(());
        }
        let key = vec![("debate_id", event.aggregate_id.as_str().into())];
        if DEBATE_TERMINAL_EVENTS.contains(&event.event_type.as_str()) {
            changes.delete(ACTIVE_DEBATES_TABLE, key);
        } else if event.sequence == 1 {
            changes.upsert(ACTIVE_DEBATES_TABLE, key, Vec::new());
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

    use crate::tables::Change;

    fn fold(events: &[EventRecord]) -> Changes {
        let mut changes = Changes::default();
        for e in events {
            AdminStats::apply(&mut (), e, &mut changes).unwrap_or_else(|e| panic!("{e}"));
        }
        changes
    }

    #[test]
    fn counts_events_per_aggregate_type() {
        let changes = fold(&[
            event("account", "a", 1, "Registered"),
            event("account", "a", 2, "LoggedIn"),
            event("budget", "b", 1, "Opened"),
        ]);
        let counts: Vec<_> = changes
            .iter()
            .map(|c| (c.key[0].1.clone(), c.change.clone()))
            .collect();
        assert_eq!(
            counts,
            vec![
                (
                    "account".into(),
                    Change::Increment {
                        column: "events",
                        by: 2
                    }
                ),
                (
                    "budget".into(),
                    Change::Increment {
                        column: "events",
                        by: 1
                    }
                ),
            ]
        );
    }

    #[test]
    fn a_debate_is_active_from_creation_until_it_ends() {
        let changes = fold(&[
            event("debate", "d1", 1, "DebateCreated"),
            event("debate", "d1", 2, "MessageRecorded"),
            event("debate", "d1", 3, "DebateCompleted"),
        ]);
        let active: Vec<_> = changes
            .iter()
            .filter(|c| c.table == ACTIVE_DEBATES_TABLE)
            .map(|c| c.change.clone())
            .collect();
        assert_eq!(active, vec![Change::Upsert(Vec::new()), Change::Delete]);
    }
}
