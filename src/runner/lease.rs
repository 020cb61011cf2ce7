//! Claims on running debates, so that of several replicas on one PostgreSQL
//! database exactly one drives each debate, and another takes over when the
//! holder stops renewing (it crashed). The embedded store has one process
//! and needs none.
//!
//! Timing, for `SERVICE_DEBATE_LEASE_SECONDS` = T: a holder renews every
//! T/4 and a claim lapses T/2 after its last renewal; every replica looks
//! for lapsed claims every T/4. After a crash the claim lapses within T/2
//! and the next look (T/4 later at most) takes it: another replica takes
//! the debate over within 3T/4 plus a database round trip, inside the
//! documented T. The holder is named after the replica (`SERVICE_REPLICA_ID`
//! or a name kept in `SERVICE_DATA_DIR`), so a restarted replica reclaims its
//! own claims at once instead of waiting for them to lapse.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::{PgConnection, PgPool};
use tokio::sync::{Mutex, OnceCell};

use crate::store::db::PoolRef;
use crate::store::{EventLog, StoreError};

/// The file in `SERVICE_DATA_DIR` that keeps the replica's generated name;
/// replicas sharing the directory keep theirs in `replica-id-2`, `-3`, ...
const NAME_FILE: &str = "replica-id";
/// How many names one data directory keeps; replicas beyond take a fresh
/// name at each start.
const NAME_SLOTS: usize = 16;
/// How often, and how far apart, a replica tries to take a name's advisory
/// lock before choosing a name of its own: a predecessor killed a moment
/// ago holds it until its database session notices the closed socket.
const NAME_LOCK_TRIES: u32 = 3;
const NAME_LOCK_PAUSE: Duration = Duration::from_millis(100);

#[derive(Debug, Clone)]
pub struct Leases {
    pool: PgPool,
    holder: std::sync::Arc<Holder>,
    ttl: Duration,
}

/// Who holds this replica's claims: its stable name, once the replica has
/// made sure no other live process uses the same one.
#[derive(Debug)]
struct Holder {
    configured: Option<String>,
    data_dir: PathBuf,
    name: OnceCell<String>,
    /// The session holding the advisory lock on the name, kept open for the
    /// life of the process: the lock ends with it, also on a crash.
    session: Mutex<Option<PgConnection>>,
}

impl Leases {
    /// Leases on PostgreSQL; `None` on the embedded store. The holder is
    /// named `replica_id` when set, else by a name generated once and kept
    /// in `data_dir`.
    pub fn for_store(
        log: &EventLog,
        ttl: Duration,
        replica_id: Option<&str>,
        data_dir: &Path,
    ) -> Option<Self> {
        let PoolRef::Postgres(pool) = log.db().writer() else {
            return None;
        };
        Some(Self {
            pool: pool.clone(),
            holder: std::sync::Arc::new(Holder {
                configured: replica_id.map(str::to_owned),
                data_dir: data_dir.to_owned(),
                name: OnceCell::new(),
                session: Mutex::new(None),
            }),
            ttl,
        })
    }

    /// How often a holder renews its claims, and a replica looks for lapsed ones.
    pub fn renew_every(&self) -> Duration {
        self.ttl / 4
    }

    /// How long a claim lasts after its last renewal.
    fn validity(&self) -> Duration {
        self.ttl / 2
    }

    /// How often every unfinished debate is looked for again (a safety net:
    /// lapsed claims are found by [`Leases::lapsed`] more often).
    pub fn full_scan_every(&self) -> Duration {
        self.ttl
    }

    /// Takes or renews the claim on `debate_id`; false while another holder's claim lasts.
    /// Expiry follows the wall clock: replicas share it, not the service clock tests move.
    pub async fn claim(&self, debate_id: &str) -> Result<bool, StoreError> {
        let holder = self.holder().await?;
        let now = now_millis();
        let expires = now + millis(self.validity());
        let claimed = sqlx::query(
            "INSERT INTO debate_leases (debate_id, holder, expires_at) VALUES ($1, $2, $3) \
             ON CONFLICT (debate_id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at \
             WHERE debate_leases.holder = excluded.holder OR debate_leases.expires_at < $4",
        )
        .bind(debate_id)
        .bind(holder)
        .bind(expires)
        .bind(now)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(claimed == 1)
    }

    /// Gives the claim up (the debate finished or paused).
    pub async fn release(&self, debate_id: &str) -> Result<(), StoreError> {
        let holder = self.holder().await?;
        sqlx::query("DELETE FROM debate_leases WHERE debate_id = $1 AND holder = $2")
            .bind(debate_id)
            .bind(holder)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Lets the claim on an unfinished debate lapse now, so that the next
    /// look of another replica takes it over (a shutdown cut it off).
    pub async fn hand_over(&self, debate_id: &str) -> Result<(), StoreError> {
        let holder = self.holder().await?;
        sqlx::query("UPDATE debate_leases SET expires_at = 0 WHERE debate_id = $1 AND holder = $2")
            .bind(debate_id)
            .bind(holder)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Debates whose claims have lapsed (their holder stopped renewing),
    /// longest lapsed first.
    pub async fn lapsed(&self) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT debate_id FROM debate_leases WHERE expires_at < $1 ORDER BY expires_at",
        )
        .bind(now_millis())
        .fetch_all(&self.pool)
        .await?)
    }

    /// Gives the name up (the advisory lock ends with its session), so that
    /// a successor started meanwhile can take it; called once draining is over.
    pub async fn retire(&self) {
        if let Some(session) = self.holder.session.lock().await.take() {
            let _ = sqlx::Connection::close(session).await;
        }
    }

    /// This replica's holder name, settled on first use.
    async fn holder(&self) -> Result<&str, StoreError> {
        let holder = &self.holder;
        let name = holder.name.get_or_try_init(|| self.settle_name()).await?;
        Ok(name.as_str())
    }

    /// The first of this replica's stable names (`SERVICE_REPLICA_ID`, else
    /// the names kept in the data directory) whose advisory lock this
    /// process can take, so that no other live process uses it; else a
    /// fresh name: two live processes with one name would both think they
    /// hold every claim of it.
    async fn settle_name(&self) -> Result<String, StoreError> {
        let mut session = self.pool.acquire().await?.detach();
        let slots = if self.holder.configured.is_some() {
            1
        } else {
            NAME_SLOTS
        };
        for attempt in 0..NAME_LOCK_TRIES {
            if attempt > 0 {
                tokio::time::sleep(NAME_LOCK_PAUSE).await;
            }
            for slot in 0..slots {
                let name = match &self.holder.configured {
                    Some(name) => name.clone(),
                    None => kept_name(&self.holder.data_dir, slot),
                };
                let locked: bool =
                    sqlx::query_scalar("SELECT pg_try_advisory_lock(hashtextextended($1, 0))")
                        .bind(format!("agon-replica:{name}"))
                        .fetch_one(&mut session)
                        .await?;
                if locked {
                    *self.holder.session.lock().await = Some(session);
                    return Ok(name);
                }
            }
        }
        tracing::warn!(
            "another live process uses this replica's name (SERVICE_REPLICA_ID shared, or every name kept in SERVICE_DATA_DIR taken); \
             using a name of its own, so after a restart its debates resume only once their claims lapse"
        );
        Ok(uuid::Uuid::new_v4().to_string())
    }
}

/// The name kept in slot `slot` of `data_dir`, written on first use; a
/// fresh one when the directory cannot keep it (then a restart is a new
/// replica).
fn kept_name(data_dir: &Path, slot: usize) -> String {
    let path = match slot {
        0 => data_dir.join(NAME_FILE),
        n => data_dir.join(format!("{NAME_FILE}-{}", n + 1)),
    };
    let read = |path: &Path| {
        std::fs::read_to_string(path)
            .ok()
            .map(|text| text.trim().to_owned())
            .filter(|name| !name.is_empty())
    };
    if let Some(name) = read(&path) {
        return name;
    }
    let name = uuid::Uuid::new_v4().to_string();
    // Created only if absent, so that of two processes starting together
    // both end up with the name on disk.
    let created = std::fs::create_dir_all(data_dir).and_then(|()| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        std::io::Write::write_all(&mut file, format!("{name}\n").as_bytes())
    });
    match created {
        Ok(()) => name,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            read(&path).unwrap_or_else(|| {
                // Left empty by a crash between creating and writing it.
                let _ = std::fs::write(&path, format!("{name}\n"));
                name
            })
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot keep the replica's name");
            name
        }
    }
}

fn now_millis() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX / 2)
}
