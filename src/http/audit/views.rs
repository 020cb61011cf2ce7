//! The audit API's response forms: seals, verification reports and their
//! problems, entries and trails. The service's values are mapped here, so
//! what the API answers is a DTO with a schema, never a store type.

use agon_projections::Cursor;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::audit::AuditError;
use crate::audit::entries::{Entry, TrailSummary};
use crate::audit::trail::TrailEntry;
use crate::http::error::ApiError;
use crate::store::expect::SavedSeal;
use crate::store::seal::SealBody;
use crate::store::verify::{PositionRange, Problem, VerifyReport};

impl From<AuditError> for ApiError {
    fn from(error: AuditError) -> Self {
        match error {
            AuditError::Store(e) => e.into(),
            AuditError::NoTrail(id) => ApiError::NotFound {
                resource_type: "audit trail",
                resource_id: Some(id),
            },
            AuditError::NoSeal(n) => ApiError::NotFound {
                resource_type: "seal",
                resource_id: Some(n.to_string()),
            },
            AuditError::Invalid(message) => ApiError::bad_request(message),
            AuditError::AdminOnly(message) => ApiError::Forbidden(message.to_owned()),
            e @ AuditError::Export(_) => ApiError::Internal(Box::new(e)),
        }
    }
}

/// A seal as kept by outsiders: the form `agon seal --json` prints and
/// `agon verify --expect-seal` reads (`event-schemas/saved-seal.v1.json`).
#[derive(Debug, Serialize, ToSchema)]
pub struct SealView {
    /// The signed body (`event-schemas/seal.v1.json`).
    #[schema(value_type = Object)]
    pub body: Value,
    /// Hex SHA-256 of the body's canonical JSON.
    pub seal_hash: String,
    /// Hex ed25519 signature of the body's canonical JSON.
    pub signature: String,
}

impl From<&SavedSeal> for SealView {
    fn from(seal: &SavedSeal) -> Self {
        Self {
            body: serde_json::to_value(&seal.body).unwrap_or_default(),
            seal_hash: seal.seal_hash.clone(),
            signature: seal.signature.clone(),
        }
    }
}

/// The first thing verification found wrong.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProblemView {
    /// `event` or `seal`.
    pub kind: String,
    /// The check that failed: sequence_gap, sequence_order, prev_hash,
    /// event_hash, malformed, seal_body, seal_number, seal_hash, seal_key,
    /// seal_signature, seal_link, seal_event_count, seal_merkle_root or saved_seal.
    pub check: String,
    /// What was found, in a sentence.
    pub fault: String,
    /// The whole problem in one line, as `agon verify` prints it.
    pub message: String,
    pub aggregate_type: Option<String>,
    pub aggregate_id: Option<String>,
    pub sequence: Option<i64>,
    pub position: Option<i64>,
    pub seal_number: Option<i64>,
}

impl From<&Problem> for ProblemView {
    fn from(problem: &Problem) -> Self {
        let message = problem.to_string();
        let check = problem.check().code().to_owned();
        match problem {
            Problem::Event {
                aggregate_type,
                aggregate_id,
                sequence,
                position,
                fault,
                ..
            } => Self {
                kind: "event".to_owned(),
                check,
                fault: fault.clone(),
                message,
                aggregate_type: Some(aggregate_type.clone()),
                aggregate_id: Some(aggregate_id.clone()),
                sequence: Some(*sequence),
                position: Some(*position),
                seal_number: None,
            },
            Problem::Seal {
                seal_number, fault, ..
            } => Self {
                kind: "seal".to_owned(),
                check,
                fault: fault.clone(),
                message,
                aggregate_type: None,
                aggregate_id: None,
                sequence: None,
                position: None,
                seal_number: Some(*seal_number),
            },
        }
    }
}

/// The positions a verification covered.
#[derive(Debug, Serialize, ToSchema)]
pub struct RangeView {
    pub from_position: i64,
    pub to_position: i64,
}

impl From<PositionRange> for RangeView {
    fn from(range: PositionRange) -> Self {
        Self {
            from_position: range.from,
            to_position: range.to,
        }
    }
}

/// A verification's outcome: what was checked and the first problem.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditVerifyView {
    /// True when every check held.
    pub valid: bool,
    pub events_checked: u64,
    pub streams_checked: u64,
    pub seals_checked: u64,
    /// Events after the last seal: chained, not yet sealed.
    pub unsealed_events: u64,
    pub problem: Option<ProblemView>,
    /// The saved seal given, when the log holds it as saved.
    pub saved_seal_number: Option<i64>,
    /// Seals after the saved one, each linked back to it.
    pub later_seals: Option<i64>,
    /// The positions checked, when not the whole log.
    pub range: Option<RangeView>,
}

impl From<&VerifyReport> for AuditVerifyView {
    fn from(report: &VerifyReport) -> Self {
        Self {
            valid: report.intact(),
            events_checked: report.events_checked,
            streams_checked: report.streams_checked,
            seals_checked: report.seals_checked,
            unsealed_events: report.unsealed_events,
            problem: report.problem.as_ref().map(Into::into),
            saved_seal_number: report.saved_seal.map(|s| s.seal_number),
            later_seals: report.saved_seal.map(|s| s.later_seals),
            range: report.range.map(Into::into),
        }
    }
}

/// One audit entry: an event of the log, who caused it, through which
/// request and when.
#[derive(Debug, Serialize, ToSchema)]
pub struct EntryView {
    pub position: i64,
    pub trail_id: Option<String>,
    pub subject_type: Option<String>,
    pub subject_id: Option<String>,
    pub sequence: Option<i64>,
    pub event_type: Option<String>,
    pub actor: Option<String>,
    pub request_id: Option<String>,
    /// RFC 3339, UTC.
    pub recorded_at: Option<String>,
}

impl From<Entry> for EntryView {
    fn from(e: Entry) -> Self {
        Self {
            position: e.position,
            trail_id: e.trail_id,
            subject_type: e.subject_type,
            subject_id: e.subject_id,
            sequence: e.sequence,
            event_type: e.event_type,
            actor: e.actor,
            request_id: e.request_id,
            recorded_at: e.recorded_at,
        }
    }
}

/// One subject's trail as listed.
#[derive(Debug, Serialize, ToSchema)]
pub struct TrailSummaryView {
    /// `<subject_type>:<subject_id>`, e.g. `debate:0194…`.
    pub trail_id: String,
    pub subject_type: Option<String>,
    pub subject_id: Option<String>,
    /// The user the subject belongs to; null for service subjects.
    pub owner: Option<String>,
    pub entries: i64,
    pub first_position: Option<i64>,
    pub last_position: Option<i64>,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
}

impl From<TrailSummary> for TrailSummaryView {
    fn from(t: TrailSummary) -> Self {
        Self {
            trail_id: t.trail_id,
            subject_type: t.subject_type,
            subject_id: t.subject_id,
            owner: t.owner,
            entries: t.entries.unwrap_or(0),
            first_position: t.first_position,
            last_position: t.last_position,
            created_at: t.created_at,
            updated_at: t.updated_at,
        }
    }
}

/// One event of a trail, chain-linked to the one before.
#[derive(Debug, Serialize, ToSchema)]
pub struct TrailEntryView {
    pub position: i64,
    pub sequence: i64,
    pub event_id: String,
    pub event_type: String,
    pub event_version: String,
    pub actor: Option<String>,
    pub request_id: Option<String>,
    pub recorded_at: Option<String>,
    /// What changed: the event's payload, secrets replaced by `[redacted]`.
    pub changes: Value,
    /// True when `changes` had secrets taken out (then `payload` is null).
    pub redacted: bool,
    /// The canonical payload text as hashed, when nothing is redacted.
    pub payload: Option<String>,
    /// The canonical metadata text as hashed, when nothing is redacted.
    pub metadata: Option<String>,
    /// Hex hash of the event before it in the trail (zeros for the first).
    pub prev_hash: String,
    /// Hex chain hash of this event (`event-schemas/CHAIN.md`).
    pub hash: String,
}

impl From<TrailEntry> for TrailEntryView {
    fn from(e: TrailEntry) -> Self {
        Self {
            position: e.position,
            sequence: e.sequence,
            event_id: e.event_id,
            event_type: e.event_type,
            event_version: e.event_version,
            actor: e.actor,
            request_id: e.request_id,
            recorded_at: e.recorded_at,
            changes: e.changes,
            redacted: e.redacted,
            payload: e.payload,
            metadata: e.metadata,
            prev_hash: e.prev_hash,
            hash: e.hash,
        }
    }
}

/// A feed cursor as seals state it.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CursorInput {
    #[serde(deserialize_with = "crate::http::whole::required")]
    #[schema(minimum = 0, maximum = 9007199254740991_i64)]
    pub txid: i64,
    #[serde(deserialize_with = "crate::http::whole::required")]
    #[schema(minimum = 0, maximum = 9007199254740991_i64)]
    pub position: i64,
}

/// A seal body as kept (`event-schemas/seal.v1.json`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SealBodyInput {
    #[serde(deserialize_with = "crate::http::whole::required")]
    #[schema(minimum = 0, maximum = 9007199254740991_i64)]
    pub seal_number: i64,
    pub from: CursorInput,
    pub to: CursorInput,
    #[serde(deserialize_with = "crate::http::whole::required")]
    #[schema(minimum = 0, maximum = 9007199254740991_i64)]
    pub event_count: i64,
    pub merkle_root: String,
    pub prev_seal_hash: String,
    pub sealed_at: String,
    pub public_key: String,
}

/// A seal kept earlier (`GET /api/audit/head`'s `seal`, `agon seal --json`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SavedSealInput {
    pub body: SealBodyInput,
    pub seal_hash: String,
    pub signature: String,
}

impl SavedSealInput {
    /// Its whole numbers, by field name, for the range check.
    pub fn numbers(&self) -> [(&'static str, i64); 6] {
        let b = &self.body;
        [
            ("expect_seal.body.seal_number", b.seal_number),
            ("expect_seal.body.event_count", b.event_count),
            ("expect_seal.body.from.txid", b.from.txid),
            ("expect_seal.body.from.position", b.from.position),
            ("expect_seal.body.to.txid", b.to.txid),
            ("expect_seal.body.to.position", b.to.position),
        ]
    }
}

impl From<SavedSealInput> for SavedSeal {
    fn from(input: SavedSealInput) -> Self {
        let cursor = |c: CursorInput| Cursor {
            txid: c.txid,
            position: c.position,
        };
        let b = input.body;
        SavedSeal {
            body: SealBody {
                seal_number: b.seal_number,
                from: cursor(b.from),
                to: cursor(b.to),
                event_count: b.event_count,
                merkle_root: b.merkle_root,
                prev_seal_hash: b.prev_seal_hash,
                sealed_at: b.sealed_at,
                public_key: b.public_key,
            },
            seal_hash: input.seal_hash,
            signature: input.signature,
        }
    }
}
