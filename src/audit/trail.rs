//! One subject's trail read from the log itself: its events in order, each
//! linked to the one before by hash, with who, which request, when and what
//! changed; the same trail as of a past position or time, with the debate
//! rebuilt by the fold the live read uses; and the trail's verification.

use agon_projections::audit::subject_of;
use serde::Serialize;
use serde_json::{Map, Value};

use super::entries::TrailSummary;
use super::{Audit, AuditError, Viewer};
use crate::projection::replay::{AsOf, fold};
use crate::store::StoredEvent;
use crate::store::verify::VerifyReport;
use crate::views::debates::DebateDetail;

/// Payload fields whose values never leave the service in a trail: secrets,
/// their hashes and sealed fields. An entry holding one is shown redacted
/// and cannot be rehashed from the export (its links still can).
const SECRET_FIELDS: [&str; 4] = ["password", "secret", "credential", "ciphertext"];

/// One event of a trail with its chain fields.
#[derive(Debug, Clone, Serialize)]
pub struct TrailEntry {
    pub position: i64,
    pub sequence: i64,
    pub event_id: String,
    pub event_type: String,
    pub event_version: String,
    pub actor: Option<String>,
    pub request_id: Option<String>,
    pub recorded_at: Option<String>,
    /// What changed: the event's payload, secrets redacted.
    pub changes: Value,
    /// Whether `changes` is the payload exactly as hashed.
    pub redacted: bool,
    /// The stored canonical texts, present only when nothing is redacted,
    /// so that the export can be rehashed by `verify_trail_export.py`.
    pub payload: Option<String>,
    pub metadata: Option<String>,
    pub prev_hash: String,
    pub hash: String,
}

/// A trail as read.
#[derive(Debug, Serialize)]
pub struct Trail {
    pub summary: TrailSummary,
    pub entries: Vec<TrailEntry>,
    /// The debate as the service showed it at `as_of` (debate trails only).
    pub state: Option<DebateDetail>,
}

/// Replaces the values of secret fields, at any depth; whether any was.
fn redact(value: &mut Value) -> bool {
    match value {
        Value::Object(map) => redact_map(map),
        Value::Array(items) => {
            // Every item is redacted: no short circuit.
            let mut any = false;
            for item in items {
                any |= redact(item);
            }
            any
        }
        _ => false,
    }
}

fn redact_map(map: &mut Map<String, Value>) -> bool {
    if map.get("_encrypted") == Some(&Value::Bool(true)) {
        map.clear();
        map.insert("_redacted".to_owned(), Value::Bool(true));
        return true;
    }
    let mut any = false;
    for (key, value) in map.iter_mut() {
        let name = key.to_ascii_lowercase();
        if SECRET_FIELDS.iter().any(|s| name.contains(s))
            || name.ends_with("_hash")
            || name.ends_with("_hashes")
        {
            *value = Value::String("[redacted]".to_owned());
            any = true;
        } else {
            any |= redact(value);
        }
    }
    any
}

fn entry(event: &StoredEvent, metadata: &Value) -> Result<TrailEntry, AuditError> {
    let text = |field: &str| {
        metadata
            .get(field)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let mut changes = event.payload_value()?;
    let redacted = redact(&mut changes);
    Ok(TrailEntry {
        position: event.position,
        sequence: event.sequence,
        event_id: event.event_id.clone(),
        event_type: event.event_type.clone(),
        event_version: event.event_version.clone(),
        actor: text("actor"),
        request_id: text("request_id"),
        recorded_at: text("recorded_at"),
        changes,
        redacted,
        payload: (!redacted).then(|| event.payload.clone()),
        metadata: (!redacted).then(|| event.metadata.clone()),
        prev_hash: hex::encode(&event.prev_hash),
        hash: hex::encode(&event.hash),
    })
}

impl Audit {
    /// The trail `trail_id` (`<subject_type>:<subject_id>`), up to `as_of`.
    pub async fn trail(
        &self,
        viewer: &Viewer,
        trail_id: &str,
        as_of: Option<AsOf>,
    ) -> Result<Trail, AuditError> {
        let summary = self.trail_summary(viewer, trail_id).await?;
        let (subject_type, subject_id) =
            subject_of(trail_id).ok_or_else(|| AuditError::NoTrail(trail_id.to_owned()))?;
        let events = self.log().load_stream(subject_type, subject_id, 0).await?;
        let mut entries = Vec::with_capacity(events.len());
        let mut debate = None;
        for event in events {
            let metadata = event.metadata_value()?;
            let recorded_at = metadata.get("recorded_at").and_then(Value::as_str);
            if as_of.is_some_and(|limit| !limit.includes(&event, recorded_at)) {
                break;
            }
            entries.push(entry(&event, &metadata)?);
            if subject_type == agon_projections::debates::DEBATE_AGGREGATE {
                debate = fold::<agon_projections::Debates>(debate, event)?;
            }
        }
        Ok(Trail {
            summary,
            entries,
            state: debate.as_ref().map(DebateDetail::from),
        })
    }

    /// Checks the trail's chain and every seal over its events.
    pub async fn verify_trail(
        &self,
        viewer: &Viewer,
        trail_id: &str,
    ) -> Result<VerifyReport, AuditError> {
        self.trail_summary(viewer, trail_id).await?;
        let (subject_type, subject_id) =
            subject_of(trail_id).ok_or_else(|| AuditError::NoTrail(trail_id.to_owned()))?;
        let recorded = self.recorded(trail_id).await?;
        Ok(self
            .log()
            .verify_stream(self.public_key(), subject_type, subject_id, &recorded)
            .await?)
    }
}
