//! Who asked for a command and why: the metadata stored beside every event.
//!
//! The event store adds `event_id` and `recorded_at` itself; everything else
//! the edge (HTTP handler, runner, CLI) fills in here.

use std::collections::HashMap;

/// The context of one command, stored as the metadata of each event it emits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandMeta {
    /// The user or service that issued the command (`system` for internal work).
    pub actor: String,
    /// The `X-Request-ID` of the request that carried the command, if any.
    pub request_id: Option<String>,
    /// The event id that caused this command (process managers), if any.
    pub causation_id: Option<String>,
    /// The id shared by every command of one business flow, if any.
    pub correlation_id: Option<String>,
}

impl CommandMeta {
    /// Metadata for work the service does on its own behalf.
    pub fn system() -> Self {
        Self {
            actor: "system".to_owned(),
            ..Self::default()
        }
    }

    /// Metadata for a command issued by `actor`.
    pub fn by(actor: impl Into<String>) -> Self {
        Self {
            actor: actor.into(),
            ..Self::default()
        }
    }

    /// The map cqrs-es carries to the event store.
    pub fn into_map(self) -> HashMap<String, String> {
        let mut map = HashMap::from([("actor".to_owned(), self.actor)]);
        let optional = [
            ("request_id", self.request_id),
            ("causation_id", self.causation_id),
            ("correlation_id", self.correlation_id),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                map.insert(key.to_owned(), value);
            }
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_fields_are_left_out_when_absent() {
        let map = CommandMeta::by("user-1").into_map();
        assert_eq!(map.len(), 1);
        assert_eq!(map.get("actor").map(String::as_str), Some("user-1"));
    }

    #[test]
    fn every_present_field_is_carried() {
        let meta = CommandMeta {
            actor: "u".to_owned(),
            request_id: Some("r".to_owned()),
            causation_id: Some("c".to_owned()),
            correlation_id: Some("k".to_owned()),
        };
        let map = meta.into_map();
        assert_eq!(map.len(), 4);
        assert_eq!(map.get("correlation_id").map(String::as_str), Some("k"));
    }
}
