//! The audit service: the log's published head and the proof that one seal
//! extends another, verification of the whole log, a range or one subject's
//! trail, the audit entries (filtered, paged, counted), trails read from the
//! log (also as of a past position or time), and their exports.
//!
//! Everything an auditor is shown comes from the hash-chained log or from
//! the `audit_log` rows folded from it; every check is the one `agon verify`
//! runs (`store::verify`), so the two never disagree.

pub mod entries;
pub mod export;
pub mod trail;

use std::sync::Arc;

use thiserror::Error;

use crate::auth::Caller;
use crate::config::AuditSettings;
use crate::store::expect::SavedSeal;
use crate::store::verify::{PositionRange, Problem, VerifyReport, header_fault};
use crate::store::{EventLog, StoreError};

/// Who is asking: an admin sees every subject, anyone else their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Viewer {
    Admin,
    Owner(String),
}

impl Viewer {
    pub fn of(caller: &Caller) -> Self {
        if caller.is_admin() {
            Viewer::Admin
        } else {
            Viewer::Owner(caller.user_id.to_string())
        }
    }

    /// The owner to restrict to; `None` for admins.
    pub fn owner(&self) -> Option<&str> {
        match self {
            Viewer::Admin => None,
            Viewer::Owner(id) => Some(id),
        }
    }
}

/// Why an audit request could not be answered.
#[derive(Debug, Error)]
pub enum AuditError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No such trail, or one the caller may not see (never told apart).
    #[error("no audit trail {0}")]
    NoTrail(String),
    #[error("no seal {0}")]
    NoSeal(i64),
    /// The request names something impossible (a range ending before it starts).
    #[error("{0}")]
    Invalid(String),
    /// Only admins may do this.
    #[error("{0}")]
    AdminOnly(&'static str),
    #[error("cannot write the export: {0}")]
    Export(#[source] std::io::Error),
}

/// The service; cheap to clone (one pointer, so the app's futures stay small).
#[derive(Debug, Clone)]
pub struct Audit(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    log: EventLog,
    settings: AuditSettings,
    /// Hex ed25519 key every seal of this log must be signed with.
    public_key: String,
}

/// Why seal `to` extends seal `from`: every seal after `from` through `to`,
/// each linking to the one before and signed; the holder of seal `from`
/// checks the first link against the copy they kept.
#[derive(Debug, Clone)]
pub struct Consistency {
    pub from: i64,
    pub to: i64,
    /// The seal `from` as the log holds it (`None` for 0, the empty log).
    pub from_seal: Option<SavedSeal>,
    /// Seals `from + 1 ..= to`, in order, up to the first that does not
    /// extend the one before it.
    pub seals: Vec<SavedSeal>,
    /// The first seal that does not extend the one before; `None`: consistent.
    pub problem: Option<Problem>,
}

impl Audit {
    pub fn new(log: EventLog, public_key: String, settings: AuditSettings) -> Self {
        Self(Arc::new(Inner {
            log,
            settings,
            public_key,
        }))
    }

    pub fn settings(&self) -> AuditSettings {
        self.0.settings
    }

    pub fn public_key(&self) -> &str {
        &self.0.public_key
    }

    pub(crate) fn log(&self) -> &EventLog {
        &self.0.log
    }

    /// The newest seal, in the form `agon verify --expect-seal` reads.
    pub async fn head(&self) -> Result<Option<SavedSeal>, AuditError> {
        match self.log().last_seal().await? {
            Some(seal) => Ok(Some(SavedSeal::from_stored(&seal)?)),
            None => Ok(None),
        }
    }

    /// Verifies the log (or `range` of it), and that it still holds `saved`.
    pub async fn verify(
        &self,
        range: PositionRange,
        saved: Option<&SavedSeal>,
    ) -> Result<VerifyReport, AuditError> {
        // A range ending before it starts holds no event: only the seals'
        // own chain is checked.
        Ok(self
            .log()
            .verify_with(self.public_key(), range, saved)
            .await?)
    }

    /// The seals that show seal `to` extends seal `from`; each is checked
    /// here too (link, start, signature), and a break is a verification
    /// problem, never a proof.
    pub async fn consistency(&self, from: i64, to: i64) -> Result<Consistency, AuditError> {
        if from < 0 || from > to {
            // No seal extends a later one: there is no such proof.
            return Err(AuditError::NoSeal(to));
        }
        let seals = self.log().seals().await?;
        let last = seals.last().map_or(0, |s| s.seal_number);
        if to > last {
            return Err(AuditError::NoSeal(to));
        }
        let index = |n: i64| usize::try_from(n).unwrap_or(usize::MAX);
        let mut prev_hash = hex::encode(crate::store::chain::GENESIS);
        let mut prev_to = agon_projections::Cursor::START;
        let from_seal = match from {
            0 => None,
            n => {
                let stored = seals.get(index(n - 1)).ok_or(AuditError::NoSeal(n))?;
                let saved = SavedSeal::from_stored(stored)?;
                prev_hash = saved.seal_hash.clone();
                prev_to = saved.body.to;
                Some(saved)
            }
        };
        let mut proof = Vec::new();
        let mut problem = None;
        for seal in seals.iter().take(index(to)).skip(index(from)) {
            match header_fault(
                seal,
                seal.seal_number,
                &prev_hash,
                prev_to,
                self.public_key(),
            )? {
                Ok(body) => prev_to = body.to,
                Err((check, fault)) => {
                    problem = Some(Problem::Seal {
                        seal_number: seal.seal_number,
                        check,
                        fault,
                    });
                    break;
                }
            }
            let saved = SavedSeal::from_stored(seal)?;
            prev_hash = saved.seal_hash.clone();
            proof.push(saved);
        }
        Ok(Consistency {
            from,
            to,
            from_seal,
            seals: proof,
            problem,
        })
    }
}
