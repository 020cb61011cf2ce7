//! A read model's document rebuilt from the log as it stood at a past
//! position or time, by the projection's own fold: what audits replay to
//! see exactly what the service showed then (the debate read and a debate's
//! audit trail both use it, so the two cannot disagree).

use agon_projections::DocumentProjection;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::store::{EventLog, StoreError, StoredEvent};

/// Where a replay stops: a log position, or a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsOf {
    Position(i64),
    Time(DateTime<Utc>),
}

impl AsOf {
    /// A position (digits) or an RFC 3339 time.
    pub fn parse(text: &str) -> Option<Self> {
        if let Ok(position) = text.parse::<i64>() {
            return Some(AsOf::Position(position));
        }
        DateTime::parse_from_rfc3339(text)
            .ok()
            .map(|t| AsOf::Time(t.with_timezone(&Utc)))
    }

    /// Whether `event`, recorded at `recorded_at` (its metadata's stamp),
    /// had happened by this point.
    pub fn includes(self, event: &StoredEvent, recorded_at: Option<&str>) -> bool {
        match self {
            AsOf::Position(position) => event.position <= position,
            AsOf::Time(time) => recorded_at
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .is_some_and(|t| t <= time),
        }
    }
}

/// Folds `event` into `doc` as projection `P` does for its read model.
pub fn fold<P: DocumentProjection>(
    doc: Option<P::Doc>,
    event: StoredEvent,
) -> Result<Option<P::Doc>, StoreError> {
    P::apply(doc, &event.into_record()?).map_err(StoreError::from)
}

/// Document `key` of `P`, folded from stream (`aggregate_type`, `key`) up
/// to `as_of`; none when the stream had no event by then.
pub async fn document_as_of<P: DocumentProjection>(
    log: &EventLog,
    aggregate_type: &str,
    key: &str,
    as_of: AsOf,
) -> Result<Option<P::Doc>, StoreError> {
    let mut doc = None;
    for event in log.load_stream(aggregate_type, key, 0).await? {
        let metadata = event.metadata_value()?;
        let recorded_at = metadata.get("recorded_at").and_then(Value::as_str);
        // A stream is read in order: nothing after the first later event counts.
        if !as_of.includes(&event, recorded_at) {
            break;
        }
        doc = fold::<P>(doc, event)?;
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_or_an_rfc3339_time_and_nothing_else() {
        assert_eq!(AsOf::parse("42"), Some(AsOf::Position(42)));
        let at = "2026-01-02T03:04:05.000006+01:00";
        let want = DateTime::parse_from_rfc3339(at)
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(AsOf::parse(at), Some(AsOf::Time(want)));
        for bad in ["", "yesterday", "4.2", "2026-01-02"] {
            assert_eq!(AsOf::parse(bad), None, "{bad:?}");
        }
    }
}
