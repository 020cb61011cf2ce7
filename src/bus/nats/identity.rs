//! Who this process is on a NATS server that other deployments may share.
//!
//! The deployment id names the stream, the subjects and the consumers, so
//! two deployments on one server never read each other's events; it is kept
//! in the database, so every replica and every restart agrees on it. The
//! replica id names this process's durable consumers; it stays the same
//! across restarts, so a restart binds its consumers again instead of
//! leaving them behind and adding new ones.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use agon_projections::EventRecord;
use async_nats::HeaderMap;

use super::super::BusError;
use crate::store::EventLog;
use crate::store::db::with_pool;

/// The header that carries the publishing deployment's id on every message.
pub const DEPLOYMENT_HEADER: &str = "Agon-Deployment";
/// The longest deployment or replica id.
pub const MAX_NAME_LEN: usize = 32;
/// Replicas sharing one data directory take the first free slot; past this
/// many, a replica runs under an id of its own that is not kept.
const REPLICA_SLOTS: usize = 64;

/// Whether `name` can be a deployment or replica id: it becomes part of
/// stream names, consumer names and subject tokens, where `.`, `*`, `>` and
/// white space have meanings of their own.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// This process's names on the NATS server.
#[derive(Clone)]
pub struct Identity {
    deployment: Arc<str>,
    replica: Arc<str>,
    /// The locked slot file the replica id came from, held for as long as
    /// the bus lives so that no other process sharing the data directory
    /// takes the same id (and so the same durable consumers).
    _slot: Option<Arc<File>>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("deployment", &self.deployment)
            .field("replica", &self.replica)
            .finish()
    }
}

impl Identity {
    /// Given names, checked.
    pub fn new(deployment: &str, replica: &str) -> Result<Self, BusError> {
        for (what, value) in [("deployment id", deployment), ("replica id", replica)] {
            if !valid_name(value) {
                return Err(BusError::BadName {
                    what,
                    value: value.to_owned(),
                });
            }
        }
        Ok(Self {
            deployment: deployment.into(),
            replica: replica.into(),
            _slot: None,
        })
    }

    /// The deployment id from `deployment` (`SERVICE_DEPLOYMENT_ID`) or the
    /// database (stored at the first start), and the replica id from
    /// `replica` (`SERVICE_REPLICA_ID`) or a slot file in `data_dir`.
    pub async fn resolve(
        log: &EventLog,
        deployment: Option<&str>,
        replica: Option<&str>,
        data_dir: &Path,
    ) -> Result<Self, BusError> {
        let stored = stored_deployment(log, deployment).await?;
        let deployment = match deployment {
            Some(given) if given != stored => {
                tracing::info!(
                    deployment = given,
                    stored = %stored,
                    "SERVICE_DEPLOYMENT_ID overrides the deployment id stored in the database"
                );
                given.to_owned()
            }
            _ => stored,
        };
        let (replica, slot) = match replica {
            Some(given) => (nats_safe(given), None),
            None => match take_replica_slot(data_dir) {
                Ok((id, file)) => (id, Some(Arc::new(file))),
                Err(e) => {
                    // Still safe: a fresh id names fresh consumers, which
                    // start at their checkpoints; the old ones expire.
                    tracing::warn!(error = %e, "no replica slot in the data directory; this replica's NATS consumers get an id that a restart will not reuse");
                    (random_id()?, None)
                }
            },
        };
        let mut identity = Self::new(&deployment, &replica)?;
        identity._slot = slot;
        tracing::info!(
            deployment = %identity.deployment,
            replica = %identity.replica,
            "NATS names"
        );
        Ok(identity)
    }

    pub fn deployment(&self) -> &str {
        &self.deployment
    }

    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// The JetStream stream of this deployment's events.
    pub fn stream(&self) -> String {
        format!("AGON_{}_EVENTS", self.deployment)
    }

    /// Every subject of this deployment's events.
    pub fn subjects(&self) -> String {
        format!("agon.{}.events.>", self.deployment)
    }

    /// `agon.<deployment>.events.<aggregate_type>.<aggregate_id>`, with
    /// characters that NATS treats specially (`.`, `*`, `>`, white space)
    /// replaced by `_`.
    pub fn subject(&self, event: &EventRecord) -> String {
        fn token(s: &str) -> String {
            let cleaned: String = s
                .chars()
                .map(|c| {
                    if c == '.' || c == '*' || c == '>' || c.is_whitespace() {
                        '_'
                    } else {
                        c
                    }
                })
                .collect();
            if cleaned.is_empty() {
                "_".to_owned()
            } else {
                cleaned
            }
        }
        format!(
            "agon.{}.events.{}.{}",
            self.deployment,
            token(&event.aggregate_type),
            token(&event.aggregate_id)
        )
    }

    /// The durable consumer of `consumer` on this replica.
    pub fn durable(&self, consumer: &str) -> String {
        let consumer = consumer.replace(['.', '*', '>', ' ', '\t', '\n', '\r'], "_");
        format!("{}_{consumer}_{}", self.deployment, self.replica)
    }

    /// The headers every published message carries.
    pub fn headers(&self, event: &EventRecord) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", event.event_id.as_str());
        headers.insert(DEPLOYMENT_HEADER, self.deployment.as_ref());
        headers
    }

    /// Whether a message with `headers` was published by this deployment.
    pub fn owns(&self, headers: Option<&HeaderMap>) -> bool {
        headers
            .and_then(|h| h.get(DEPLOYMENT_HEADER))
            .is_some_and(|v| v.as_str() == self.deployment.as_ref())
    }
}

/// The deployment id in the database, storing `proposed` (or a new random
/// id) first when there is none yet. Every replica of the deployment reads
/// the same row, so they agree without being configured.
async fn stored_deployment(log: &EventLog, proposed: Option<&str>) -> Result<String, BusError> {
    let proposed = match proposed {
        Some(given) => given.to_owned(),
        None => random_id()?,
    };
    let stored: String = with_pool!(log.db().writer(), pool => {
        sqlx::query("INSERT INTO deployment (name, value) VALUES ('id', $1) ON CONFLICT (name) DO NOTHING")
            .bind(&proposed)
            .execute(pool)
            .await
            .map_err(crate::store::StoreError::from)?;
        sqlx::query_scalar("SELECT value FROM deployment WHERE name = 'id'")
            .fetch_one(pool)
            .await
            .map_err(crate::store::StoreError::from)?
    });
    if !valid_name(&stored) {
        return Err(BusError::BadName {
            what: "deployment id stored in the database",
            value: stored,
        });
    }
    Ok(stored)
}

/// `name` if NATS can carry it, else a name that can and that no other
/// name maps to in practice: its safe characters, then a digest of it.
/// (`SERVICE_REPLICA_ID` also names debate leases, which allow more.)
fn nats_safe(name: &str) -> String {
    if valid_name(name) {
        return name.to_owned();
    }
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(name.as_bytes()));
    let kept: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .take(MAX_NAME_LEN - 13)
        .collect();
    format!("{kept}-{}", &digest[..12])
}

/// Twelve random hex digits.
fn random_id() -> Result<String, BusError> {
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).map_err(|e| BusError::Nats(e.to_string()))?;
    Ok(hex::encode(bytes))
}

/// The id in the first slot file of `data_dir` that no running process has
/// locked, created on first use; the file stays locked while it is open.
/// A slot rather than one file: several replicas may share a data directory
/// (PostgreSQL keeps the data; the directory only holds keys), and two
/// replicas under one id would split one durable consumer's events.
fn take_replica_slot(data_dir: &Path) -> std::io::Result<(String, File)> {
    std::fs::create_dir_all(data_dir)?;
    for slot in 0..REPLICA_SLOTS {
        let path = data_dir.join(format!("nats-replica-{slot}.id"));
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => continue,
            Err(TryLockError::Error(e)) => return Err(e),
        }
        let text = std::io::read_to_string(&mut file)?;
        let kept = text.trim();
        if valid_name(kept) {
            return Ok((kept.to_owned(), file));
        }
        let id = random_id().map_err(std::io::Error::other)?;
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(id.as_bytes())?;
        file.sync_all()?;
        return Ok((id, file));
    }
    Err(std::io::Error::other(format!(
        "all {REPLICA_SLOTS} replica slots in {} are taken",
        data_dir.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_limited_to_what_nats_reads_literally() {
        for good in ["a", "prod-eu_1", &"x".repeat(MAX_NAME_LEN)] {
            assert!(valid_name(good), "{good}");
        }
        for bad in [
            "",
            "a.b",
            "a*",
            "a>",
            "a b",
            "ä",
            &"x".repeat(MAX_NAME_LEN + 1),
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn replicas_sharing_a_data_directory_get_different_ids_and_keep_them() {
        let dir = tempfile::tempdir().unwrap();
        let (first, held) = take_replica_slot(dir.path()).unwrap();
        let (second, other) = take_replica_slot(dir.path()).unwrap();
        assert_ne!(first, second);
        drop(held);
        let (again, _held) = take_replica_slot(dir.path()).unwrap();
        assert_eq!(again, first, "a restart takes the freed slot and its id");
        drop(other);
    }

    #[test]
    fn configured_replica_names_are_made_safe_without_merging_them() {
        let long = "pod.".repeat(20);
        for name in ["web-1.eu", "web 1", long.as_str()] {
            let safe = nats_safe(name);
            assert!(valid_name(&safe), "{safe}");
        }
        assert_ne!(nats_safe("a.b"), nats_safe("a b"));
        assert_eq!(nats_safe("web-1"), "web-1");
    }

    #[test]
    fn names_carry_the_deployment() {
        let identity = Identity::new("blue", "r1").unwrap();
        assert_eq!(identity.stream(), "AGON_blue_EVENTS");
        assert_eq!(identity.durable("debates.v2"), "blue_debates_v2_r1");
        assert!(Identity::new("blue.green", "r1").is_err());
    }
}
