//! The audit log's rows: one per event (who, which request, when, what
//! subject) and one per subject (its trail: owner, entry count, first and
//! last position), so `GET /api/audit/events` and the trail list filter and
//! page from indexes. The events themselves stay in the log; a trail's
//! entries are read from there, with their hashes.

use serde_json::Value;

use crate::tables::{Changes, TableProjection};
use crate::{DecodeError, EventRecord};

/// One row per event: `event_position` (key, the log position), `txid`, `trail_id`, `subject_type`,
/// `subject_id`, `sequence`, `event_type`, `actor`, `request_id`, `recorded_at`.
pub const ENTRIES_TABLE: &str = "audit_entries";
/// One row per subject: `trail_id` (key), `subject_type`, `subject_id`,
/// `owner`, `entries`, `first_position`, `last_position`, `created_at`, `updated_at`.
pub const TRAILS_TABLE: &str = "audit_trails";

/// The aggregate type whose stream id is the user id itself.
const ACCOUNT_AGGREGATE: &str = "account";
/// Fields of a stream's first event that name the user it belongs to, in
/// the order they are looked for.
const OWNER_FIELDS: [&str; 3] = ["owner", "owner_id", "created_by"];

/// A subject's trail id: its aggregate type and id, `debate:<id>`.
pub fn trail_id(aggregate_type: &str, aggregate_id: &str) -> String {
    format!("{aggregate_type}:{aggregate_id}")
}

/// The subject a trail id names, if it is one.
pub fn subject_of(trail_id: &str) -> Option<(&str, &str)> {
    let (subject_type, subject_id) = trail_id.split_once(':')?;
    (!subject_type.is_empty() && !subject_id.is_empty()).then_some((subject_type, subject_id))
}

/// The user a stream belongs to, from its first event: an account is its
/// own; other subjects name their owner or creator. `None`: admins only.
pub fn owner_of(first: &EventRecord) -> Result<Option<String>, DecodeError> {
    if first.aggregate_type == ACCOUNT_AGGREGATE {
        return Ok(Some(first.aggregate_id.clone()));
    }
    let payload: Value = first.decode()?;
    // Events are stored externally tagged: `{"DebateCreated": {...}}`.
    let body = match &payload {
        Value::Object(map) if map.len() == 1 => map.values().next().unwrap_or(&payload),
        _ => &payload,
    };
    Ok(OWNER_FIELDS
        .iter()
        .find_map(|field| body.get(field).and_then(Value::as_str))
        .map(str::to_owned))
}

/// A metadata field as text, when it is one.
fn meta(event: &EventRecord, field: &str) -> Option<String> {
    event
        .metadata
        .get(field)
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Table projection behind the audit API.
pub struct AuditLog;

impl TableProjection for AuditLog {
    const NAME: &'static str = "audit_log";
    const TABLES: &'static [&'static str] = &[ENTRIES_TABLE, TRAILS_TABLE];
    type State = ();

    fn relevant(_event: &EventRecord) -> bool {
        true
    }

    fn apply(
        _state: &mut (),
        event: &EventRecord,
        changes: &mut Changes,
    ) -> Result<(), DecodeError> {
        let trail = trail_id(&event.aggregate_type, &event.aggregate_id);
        let recorded_at = meta(event, "recorded_at");
        changes.upsert(
            ENTRIES_TABLE,
            vec![("event_position", event.cursor.position.into())],
            vec![
                ("txid", event.cursor.txid.into()),
                ("trail_id", trail.clone().into()),
                ("subject_type", event.aggregate_type.as_str().into()),
                ("subject_id", event.aggregate_id.as_str().into()),
                ("sequence", event.sequence.into()),
                ("event_type", event.event_type.as_str().into()),
                ("actor", meta(event, "actor").into()),
                ("request_id", meta(event, "request_id").into()),
                ("recorded_at", recorded_at.clone().into()),
            ],
        );
        let key = vec![("trail_id", trail.into())];
        let mut columns = vec![
            ("last_position", event.cursor.position.into()),
            ("updated_at", recorded_at.clone().into()),
        ];
        if event.sequence == 1 {
            columns.extend([
                ("subject_type", event.aggregate_type.as_str().into()),
                ("subject_id", event.aggregate_id.as_str().into()),
                ("owner", owner_of(event)?.into()),
                ("first_position", event.cursor.position.into()),
                ("created_at", recorded_at.into()),
                // Counted up by the increments; NULL + 1 would stay NULL.
                ("entries", 0.into()),
            ]);
        }
        changes.upsert(TRAILS_TABLE, key.clone(), columns);
        changes.increment(TRAILS_TABLE, key, "entries", 1);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cursor;
    use crate::tables::{Cell, Change};
    use serde_json::json;

    fn event(aggregate_type: &str, sequence: i64, payload: Value) -> EventRecord {
        EventRecord {
            cursor: Cursor {
                txid: 0,
                position: 10 + sequence,
            },
            event_id: format!("e{sequence}"),
            aggregate_type: aggregate_type.to_owned(),
            aggregate_id: "s1".to_owned(),
            sequence,
            event_type: "Anything".to_owned(),
            event_version: "1".to_owned(),
            payload,
            metadata: json!({"actor": "u1", "request_id": "r1", "recorded_at": "2027-01-01T00:00:00Z"}),
            hash: String::new(),
        }
    }

    #[test]
    fn the_owner_is_the_account_itself_or_the_first_event_s_owner_field() {
        let account = event("account", 1, json!({"Registered": {"owner": "x"}}));
        assert_eq!(owner_of(&account).unwrap().as_deref(), Some("s1"));
        let debate = event("bench", 1, json!({"Created": {"created_by": "u9"}}));
        assert_eq!(owner_of(&debate).unwrap().as_deref(), Some("u9"));
        let org = event(
            "bench",
            1,
            json!({"Created": {"owner_id": "u8", "created_by": "u7"}}),
        );
        assert_eq!(owner_of(&org).unwrap().as_deref(), Some("u8"));
        let none = event("bench", 1, json!({"Created": {"name": "n"}}));
        assert_eq!(owner_of(&none).unwrap(), None);
    }

    #[test]
    fn each_event_is_an_entry_and_only_the_first_sets_the_owner() {
        let mut changes = Changes::default();
        for e in [
            event("bench", 1, json!({"Created": {"owner": "u9"}})),
            event("bench", 2, json!({"Changed": {"owner": "u5"}})),
        ] {
            AuditLog::apply(&mut (), &e, &mut changes).unwrap();
        }
        let rows: Vec<_> = changes.iter().collect();
        let entries = rows.iter().filter(|r| r.table == ENTRIES_TABLE).count();
        assert_eq!(entries, 2);
        let upserts: Vec<_> = rows
            .iter()
            .filter(|r| r.table == TRAILS_TABLE && matches!(r.change, Change::Upsert(_)))
            .collect();
        // One upsert of the trail for the batch: the first event's owner,
        // the last event's position.
        assert_eq!(upserts.len(), 1, "{upserts:?}");
        let Change::Upsert(columns) = &upserts[0].change else {
            unreachable!()
        };
        let owner = columns.iter().find(|(n, _)| *n == "owner").unwrap();
        assert_eq!(owner.1, Cell::Text(Some("u9".to_owned())));
        let last = columns.iter().find(|(n, _)| *n == "last_position").unwrap();
        assert_eq!(last.1, Cell::Int(Some(12)));
        let counted: i64 = rows
            .iter()
            .filter_map(|r| match r.change {
                Change::Increment {
                    column: "entries",
                    by,
                } => Some(by),
                _ => None,
            })
            .sum();
        assert_eq!(counted, 2);
    }
}
