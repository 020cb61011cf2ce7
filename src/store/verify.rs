//! Full verification of the log: every stream's hash chain, then every seal.
//! `agon verify`, `POST /api/audit/verify` and the trail checks all run it,
//! so the command and the API report the same first problem for the same log.
//!
//! It reports the first problem found: the first broken event in position
//! order, or, when every chain holds, the first seal that does not, each
//! with the [`Check`] that failed (a stable code) and a sentence.

mod chains;
mod fold;
mod links;
mod row;
pub(crate) use row::ChainRow;
mod seals;
mod stream;

use fold::SealFold;
pub use links::ChainLink;
pub use seals::header_fault;

use std::collections::HashSet;
use std::fmt;

use serde::Serialize;

use super::expect::SavedSeal;
use super::{EventLog, StoreError};

/// The outcome of a verification run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerifyReport {
    pub events_checked: u64,
    pub streams_checked: u64,
    pub seals_checked: u64,
    /// Events after the last seal: chained, not yet sealed.
    pub unsealed_events: u64,
    /// The first problem; `None` when the log is intact.
    pub problem: Option<Problem>,
    /// The seal given by `--expect-seal`, when it was found as saved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saved_seal: Option<SavedSealFound>,
    /// The positions checked, when not the whole log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range: Option<PositionRange>,
}

/// A saved seal found in the log exactly as saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SavedSealFound {
    pub seal_number: i64,
    /// Seals after it, each linked back to it.
    pub later_seals: i64,
}

/// Positions `from..=to` of the log. Events in it are chain-checked (the
/// first of each stream against its stored predecessor), and every seal
/// covering one of them is recomputed; the seals' own chain is always
/// checked whole, as it is small and a range must not hide a forged head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PositionRange {
    pub from: i64,
    pub to: i64,
}

impl PositionRange {
    pub const ALL: Self = Self {
        from: i64::MIN,
        to: i64::MAX,
    };

    /// The range between optional ends; `None` when neither is given.
    pub fn between(from: Option<i64>, to: Option<i64>) -> Option<Self> {
        (from.is_some() || to.is_some()).then(|| Self {
            from: from.unwrap_or(i64::MIN),
            to: to.unwrap_or(i64::MAX),
        })
    }

    fn is_all(self) -> bool {
        self == Self::ALL
    }
}

/// Which events a run covers, for which seals to recompute.
pub(crate) enum Scope<'a> {
    Range(PositionRange),
    /// The positions of one stream's events.
    Positions(&'a HashSet<i64>),
}

impl Scope<'_> {
    fn touches(&self, position: i64) -> bool {
        match self {
            Scope::Range(range) => range.from <= position && position <= range.to,
            Scope::Positions(positions) => positions.contains(&position),
        }
    }
}

impl VerifyReport {
    fn new(range: Option<PositionRange>) -> Self {
        Self {
            events_checked: 0,
            streams_checked: 0,
            seals_checked: 0,
            unsealed_events: 0,
            problem: None,
            saved_seal: None,
            range,
        }
    }

    pub fn intact(&self) -> bool {
        self.problem.is_none()
    }
}

/// Which check failed: a stable code the API, the CLI's JSON and the
/// export's verification report share (`event-schemas/AUDIT.md` lists them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// An event's sequence leaves a gap in its stream.
    SequenceGap,
    /// An event's sequence repeats or goes back.
    SequenceOrder,
    /// An event's `prev_hash` is not the stored hash of its predecessor.
    PrevHash,
    /// An event's hash is not that of its stored contents.
    EventHash,
    /// A stored hash or text cannot be read at all.
    Malformed,
    /// A seal's body is not a seal, or not in canonical form.
    SealBody,
    /// Seal numbers are not 1, 2, 3, … in order.
    SealNumber,
    /// A seal's `seal_hash` is not the SHA-256 of its body.
    SealHash,
    /// A seal was signed by a key other than the trusted one.
    SealKey,
    /// A seal's signature does not verify.
    SealSignature,
    /// A seal's `prev_seal_hash` or start cursor does not continue the one before.
    SealLink,
    /// The number of events stored in a seal's range differs from its count.
    SealEventCount,
    /// The Merkle root of the events stored in a seal's range differs.
    SealMerkleRoot,
    /// A saved seal (`--expect-seal`, a published head) is not in the log as saved.
    SavedSeal,
}

impl Check {
    pub fn code(self) -> &'static str {
        match self {
            Check::SequenceGap => "sequence_gap",
            Check::SequenceOrder => "sequence_order",
            Check::PrevHash => "prev_hash",
            Check::EventHash => "event_hash",
            Check::Malformed => "malformed",
            Check::SealBody => "seal_body",
            Check::SealNumber => "seal_number",
            Check::SealHash => "seal_hash",
            Check::SealKey => "seal_key",
            Check::SealSignature => "seal_signature",
            Check::SealLink => "seal_link",
            Check::SealEventCount => "seal_event_count",
            Check::SealMerkleRoot => "seal_merkle_root",
            Check::SavedSeal => "saved_seal",
        }
    }
}

/// The first thing found wrong.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Problem {
    Event {
        aggregate_type: String,
        aggregate_id: String,
        sequence: i64,
        position: i64,
        check: Check,
        fault: String,
    },
    Seal {
        seal_number: i64,
        check: Check,
        fault: String,
    },
}

impl Problem {
    pub fn check(&self) -> Check {
        match self {
            Problem::Event { check, .. } | Problem::Seal { check, .. } => *check,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Event {
                aggregate_type,
                aggregate_id,
                sequence,
                position,
                check,
                fault,
            } => write!(
                f,
                "event {aggregate_type}/{aggregate_id} sequence {sequence} (position {position}): {fault} [{}]",
                check.code()
            ),
            Problem::Seal {
                seal_number,
                check,
                fault,
            } => write!(f, "seal {seal_number}: {fault} [{}]", check.code()),
        }
    }
}

impl EventLog {
    /// Checks every chain, then every seal against `trusted_key` (hex public key).
    pub async fn verify(&self, trusted_key: &str) -> Result<VerifyReport, StoreError> {
        self.verify_range(trusted_key, PositionRange::ALL).await
    }

    /// Checks the events at positions in `range`, then the seals (see
    /// [`PositionRange`]) against `trusted_key`.
    pub async fn verify_range(
        &self,
        trusted_key: &str,
        range: PositionRange,
    ) -> Result<VerifyReport, StoreError> {
        let mut report = VerifyReport::new((!range.is_all()).then_some(range));
        // Read before the scan: every event they cover is in its snapshot.
        let seals = self.seals().await?;
        // Only a scan of every event sees every seal's leaves.
        let mut fold = range.is_all().then(|| SealFold::new(&seals));
        report.problem = self
            .verify_chains(range, fold.as_mut(), &mut report)
            .await?;
        let folded = fold.and_then(SealFold::finish);
        if report.problem.is_none() {
            let scope = Scope::Range(range);
            match self
                .verify_seals(trusted_key, seals, &scope, folded.as_ref(), &mut report)
                .await?
            {
                Ok(sealed_to) => {
                    report.unsealed_events = match &folded {
                        Some(folded) => folded.unsealed,
                        None => self.count_after(sealed_to, range).await?,
                    }
                }
                Err(problem) => report.problem = Some(problem),
            }
        }
        Ok(report)
    }

    /// [`EventLog::verify_range`], then, when the log holds, whether it still
    /// holds `saved` exactly: the one check `agon verify` and the audit API run.
    pub async fn verify_with(
        &self,
        trusted_key: &str,
        range: PositionRange,
        saved: Option<&SavedSeal>,
    ) -> Result<VerifyReport, StoreError> {
        let mut report = self.verify_range(trusted_key, range).await?;
        if let (Some(saved), true) = (saved, report.intact()) {
            match self.find_saved_seal(saved).await? {
                Ok(later_seals) => {
                    report.saved_seal = Some(SavedSealFound {
                        seal_number: saved.body.seal_number,
                        later_seals,
                    });
                }
                Err(problem) => report.problem = Some(problem),
            }
        }
        Ok(report)
    }
}
