//! The stored form of events is a public contract: this is the one way back
//! from it to the domain enums, for the repository and every projection.
//!
//! Each event type has a current version (1 plus the number of upcasters
//! registered for it). An event stored at an older version is raised one
//! version at a time by pure `fn(Value) -> Value` upcasters, then
//! deserialized. An event newer than the code, of a version with no path to
//! the current one, or whose payload does not fit, is a [`DecodeError`]:
//! never skipped, so a reader that cannot decode an event stops there.

use serde::de::DeserializeOwned;
use serde_json::Value;
use thiserror::Error;

/// Raises a payload of one event type by one version.
pub type UpcastFn = fn(Value) -> Value;

/// One upcaster: the payload of `event_type` (of `aggregate_type`) at
/// version `from` becomes version `from + 1`.
#[derive(Debug, Clone, Copy)]
pub struct Upcaster {
    pub aggregate_type: &'static str,
    pub event_type: &'static str,
    pub from: u32,
    pub upcast: UpcastFn,
}

/// The upcasters the service runs with. Adding a version `N + 1` of an event
/// means: a new schema file and sample in `event-schemas/` (and their lines
/// in `PUBLISHED.sha256`), the enum changed to the new form, and here one
/// entry raising version `N` to `N + 1` (new events are then written at
/// `N + 1`: the enums' `event_version` asks [`current_version`]).
pub const UPCASTERS: &[Upcaster] = &[Upcaster {
    aggregate_type: "account",
    event_type: "Registered",
    from: 1,
    upcast: registered_v1_to_v2,
}];

/// `Registered` v1 held email and name in plaintext and no blind index; v2
/// holds them sealed with the index. A v1 payload stays plaintext (nothing
/// here may encrypt) and gets no index: readers take an unsealed value as it
/// is, and the service finds such accounts by their plaintext email stream.
fn registered_v1_to_v2(mut payload: Value) -> Value {
    if let Some(fields) = payload.get_mut("Registered").and_then(Value::as_object_mut) {
        fields.entry("email_index").or_insert(Value::Null);
    }
    payload
}

/// Why a stored event cannot be turned into its domain event.
#[derive(Debug, Error)]
pub enum DecodeError {
    #[error("event version {version:?} is not a positive integer")]
    BadVersion { version: String },
    #[error("{aggregate_type}/{event_type} v{version} is newer than this code knows (v{current})")]
    FromTheFuture {
        aggregate_type: String,
        event_type: String,
        version: u32,
        current: u32,
    },
    #[error("no upcaster raises {aggregate_type}/{event_type} from v{from}")]
    MissingUpcaster {
        aggregate_type: String,
        event_type: String,
        from: u32,
    },
    #[error("payload of {aggregate_type}/{event_type} v{version} does not fit the event")]
    Payload {
        aggregate_type: String,
        event_type: String,
        version: u32,
        #[source]
        source: serde_json::Error,
    },
}

/// A stored event's identity as the decoder needs it.
#[derive(Debug, Clone, Copy)]
pub struct Stored<'a> {
    pub aggregate_type: &'a str,
    pub event_type: &'a str,
    pub event_version: &'a str,
}

/// An event brought to its current version.
#[derive(Debug, Clone, PartialEq)]
pub struct Upgraded {
    pub version: u32,
    pub payload: Value,
}

/// A set of upcasters, looked up by aggregate type, event type and version.
#[derive(Debug, Clone, Copy)]
pub struct Upcasters<'a> {
    steps: &'a [Upcaster],
}

/// The service's upcasters ([`UPCASTERS`]).
pub const STANDARD: Upcasters<'static> = Upcasters { steps: UPCASTERS };

impl<'a> Upcasters<'a> {
    pub const fn new(steps: &'a [Upcaster]) -> Self {
        Self { steps }
    }

    fn step(&self, aggregate_type: &str, event_type: &str, from: u32) -> Option<&Upcaster> {
        self.steps.iter().find(|s| {
            s.aggregate_type == aggregate_type && s.event_type == event_type && s.from == from
        })
    }

    /// The version the code reads and writes `event_type` at.
    pub fn current(&self, aggregate_type: &str, event_type: &str) -> u32 {
        let mut version = 1;
        while self.step(aggregate_type, event_type, version).is_some() {
            version += 1;
        }
        version
    }

    /// Raises `payload`, stored as `stored`, to the current version.
    pub fn upgrade(&self, stored: Stored<'_>, payload: Value) -> Result<Upgraded, DecodeError> {
        let Stored {
            aggregate_type,
            event_type,
            event_version,
        } = stored;
        let mut version: u32 = event_version
            .parse()
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| DecodeError::BadVersion {
                version: event_version.to_owned(),
            })?;
        let current = self.current(aggregate_type, event_type);
        if version > current {
            return Err(DecodeError::FromTheFuture {
                aggregate_type: aggregate_type.to_owned(),
                event_type: event_type.to_owned(),
                version,
                current,
            });
        }
        let mut payload = payload;
        while version < current {
            let step = self
                .step(aggregate_type, event_type, version)
                .ok_or_else(|| DecodeError::MissingUpcaster {
                    aggregate_type: aggregate_type.to_owned(),
                    event_type: event_type.to_owned(),
                    from: version,
                })?;
            payload = (step.upcast)(payload);
            version += 1;
        }
        Ok(Upgraded { version, payload })
    }

    /// Upgrades `payload` and deserializes it into the domain event `E`.
    pub fn decode<E: DeserializeOwned>(
        &self,
        stored: Stored<'_>,
        payload: Value,
    ) -> Result<E, DecodeError> {
        let upgraded = self.upgrade(stored, payload)?;
        serde_json::from_value(upgraded.payload).map_err(|source| DecodeError::Payload {
            aggregate_type: stored.aggregate_type.to_owned(),
            event_type: stored.event_type.to_owned(),
            version: upgraded.version,
            source,
        })
    }
}

/// The version new events of `event_type` are written at: the one the
/// service's upcasters raise stored ones to.
pub fn current_version(aggregate_type: &str, event_type: &str) -> String {
    STANDARD.current(aggregate_type, event_type).to_string()
}

/// Decodes a stored event with the service's upcasters: the one decode path.
pub fn decode<E: DeserializeOwned>(stored: Stored<'_>, payload: Value) -> Result<E, DecodeError> {
    STANDARD.decode(stored, payload)
}

/// Raises a stored event to its current version with the service's upcasters.
pub fn upgrade(stored: Stored<'_>, payload: Value) -> Result<Upgraded, DecodeError> {
    STANDARD.upgrade(stored, payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::account::AccountEvent;
    use crate::debate::DebateEvent;
    use serde_json::json;

    #[test]
    fn a_plaintext_v1_registration_reads_as_v2_without_an_index() {
        let v1 = json!({"Registered": {"user_id": "u1", "email": "ada@example.com",
            "name": "Ada", "password_hash": "h", "role": "user", "email_verified": false,
            "at": "2027-01-15T08:00:00Z"}});
        let stored = Stored {
            aggregate_type: "account",
            event_type: "Registered",
            event_version: "1",
        };
        assert_eq!(STANDARD.current("account", "Registered"), 2);
        let event: AccountEvent = decode(stored, v1).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            matches!(event, AccountEvent::Registered { email, email_index: None, .. }
            if email == "ada@example.com")
        );
    }

    /// A made-up v2 of `VoteCast` that stored the agent as `voter`; its
    /// upcaster renames the field back, as a real one would rename forward.
    fn vote_v1_to_v2(mut payload: Value) -> Value {
        if let Some(fields) = payload.get_mut("VoteCast").and_then(Value::as_object_mut)
            && let Some(agent) = fields.remove("voter")
        {
            fields.insert("agent".to_owned(), agent);
        }
        payload
    }

    const TEST_STEPS: &[Upcaster] = &[Upcaster {
        aggregate_type: "debate",
        event_type: "VoteCast",
        from: 1,
        upcast: vote_v1_to_v2,
    }];

    fn stored<'a>(event_type: &'a str, version: &'a str) -> Stored<'a> {
        Stored {
            aggregate_type: "debate",
            event_type,
            event_version: version,
        }
    }

    /// `VoteCast` as the made-up v1 stored it.
    fn old_vote() -> Value {
        json!({"VoteCast": {"voter": "claude", "choice": "agree", "confidence": 0.9,
            "reasons": [], "modifications": [], "at": "2027-01-15T08:00:00Z",
            "usage": {"provider": "demo", "model": "demo", "tokens_in": 1, "tokens_out": 2,
                "latency_ms": 3, "fallback": false}}})
    }

    #[test]
    fn an_old_version_is_raised_step_by_step_then_decoded() {
        let registry = Upcasters::new(TEST_STEPS);
        assert_eq!(registry.current("debate", "VoteCast"), 2);
        assert_eq!(registry.current("debate", "DebateCreated"), 1);
        let upgraded = registry
            .upgrade(stored("VoteCast", "1"), old_vote())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(upgraded.version, 2);
        assert_eq!(upgraded.payload["VoteCast"]["agent"], "claude");
        assert!(upgraded.payload["VoteCast"].get("voter").is_none());
        let event: DebateEvent = registry
            .decode(stored("VoteCast", "1"), old_vote())
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(event, DebateEvent::VoteCast { agent, .. } if agent == "claude"));
        // The current version passes through untouched.
        let current = registry
            .upgrade(stored("VoteCast", "2"), upgraded.payload.clone())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(current, upgraded);
    }

    #[test]
    fn newer_versions_and_misfits_are_errors_not_skips() {
        let registry = Upcasters::new(TEST_STEPS);
        let future = registry.upgrade(stored("VoteCast", "3"), old_vote());
        assert!(matches!(
            future,
            Err(DecodeError::FromTheFuture { current: 2, .. })
        ));
        assert!(matches!(
            STANDARD.upgrade(stored("VoteCast", "2"), old_vote()),
            Err(DecodeError::FromTheFuture { current: 1, .. })
        ));
        assert!(matches!(
            decode::<DebateEvent>(stored("VoteCast", "x"), old_vote()),
            Err(DecodeError::BadVersion { .. })
        ));
        // Today's code reads v1 as is: `voter` is not a v1 field.
        assert!(matches!(
            decode::<DebateEvent>(stored("VoteCast", "1"), old_vote()),
            Err(DecodeError::Payload { version: 1, .. })
        ));
        let gap = [Upcaster {
            from: 2,
            ..TEST_STEPS[0]
        }];
        // A step from 2 alone does not make 2 current: 1 stays current.
        assert_eq!(Upcasters::new(&gap).current("debate", "VoteCast"), 1);
    }
}
