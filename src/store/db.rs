//! The two database back ends behind one handle, and the macro that runs the
//! same SQL on either.
//!
//! Both back ends accept `$1`-style parameters, `ON CONFLICT` and `RETURNING`,
//! so most statements are written once and expanded for each pool by
//! [`with_pool!`]. Only the feed read and the migrations differ.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, SqlitePool};

use super::StoreError;

/// Which database holds the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// How long the command-line tools (verify, seal) wait for a PostgreSQL
/// connection: they have no client waiting on an answer. The service uses
/// `SERVICE_DATABASE_ACQUIRE_TIMEOUT_MS` ([`Db::connect_postgres_timed`]).
pub const TOOL_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// The PostgreSQL pool's options. Opening a connection counts against the
/// acquire timeout, so it also bounds the connect to a server that does not
/// answer; a pooled connection is pinged before use, so one the server
/// dropped (a restart) is replaced rather than failing a statement.
fn postgres_pool(max_connections: u32, acquire_timeout: Duration) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(acquire_timeout)
        .test_before_acquire(true)
}

/// Connection pools of the chosen back end.
#[derive(Debug, Clone)]
pub enum Db {
    /// SQLite allows one writer at a time; a one-connection write pool makes
    /// writers queue in the process instead of failing with `SQLITE_BUSY`.
    Sqlite {
        writer: SqlitePool,
        reader: SqlitePool,
        /// The write-ahead log file, flushed by [`Db::sync_log`].
        wal: Arc<PathBuf>,
    },
    Postgres(PgPool),
}

/// A borrowed pool, for [`with_pool!`].
#[derive(Debug, Clone, Copy)]
pub enum PoolRef<'a> {
    Sqlite(&'a SqlitePool),
    Postgres(&'a PgPool),
}

/// Runs `$body` with `$pool` bound to whichever pool `$db` (a [`PoolRef`]) holds.
macro_rules! with_pool {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db {
            $crate::store::db::PoolRef::Sqlite($pool) => $body,
            $crate::store::db::PoolRef::Postgres($pool) => $body,
        }
    };
}
pub(crate) use with_pool;

/// A transaction on either back end, for work that several parts of the
/// code add to before one commit (the read models of a batch).
pub enum Tx {
    Sqlite(sqlx::Transaction<'static, sqlx::Sqlite>),
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
}

/// Runs `$body` with `$tx` bound to the `&mut sqlx::Transaction` that `$t`
/// (a `&mut` [`Tx`]) holds.
macro_rules! with_tx {
    ($t:expr, $tx:ident => $body:expr) => {
        match $t {
            $crate::store::db::Tx::Sqlite($tx) => $body,
            $crate::store::db::Tx::Postgres($tx) => $body,
        }
    };
}
pub(crate) use with_tx;

impl Tx {
    /// Begins a read-model transaction on the writer pool of `db`.
    pub(crate) async fn read_models(db: &Db) -> Result<Self, StoreError> {
        let relaxed = rebuildable_commit_sql(&db.writer());
        let mut tx = match db.writer() {
            PoolRef::Sqlite(pool) => Tx::Sqlite(pool.begin().await?),
            PoolRef::Postgres(pool) => Tx::Postgres(pool.begin().await?),
        };
        if let Some(sql) = relaxed {
            with_tx!(&mut tx, tx => {
                sqlx::query(sql).execute(&mut **tx).await?;
            });
        }
        Ok(tx)
    }

    pub(crate) fn backend(&self) -> Backend {
        match self {
            Tx::Sqlite(_) => Backend::Sqlite,
            Tx::Postgres(_) => Backend::Postgres,
        }
    }

    pub(crate) async fn commit(self) -> Result<(), StoreError> {
        with_tx!(self, tx => tx.commit().await?);
        Ok(())
    }
}

/// Run inside a read-model transaction on PostgreSQL: its commit need not
/// wait for the WAL flush. A read model and its checkpoint commit together
/// and are rebuilt from the log, so a crash of the database server can only
/// move them back, never past the log. (SQLite needs nothing: its commits
/// never wait for the disk, and only event appends are flushed; see
/// [`Db::open_sqlite`].)
pub(crate) fn rebuildable_commit_sql(pool: &PoolRef<'_>) -> Option<&'static str> {
    match pool {
        PoolRef::Sqlite(_) => None,
        PoolRef::Postgres(_) => Some("SET LOCAL synchronous_commit = off"),
    }
}

impl Db {
    /// Opens (creating if needed) the SQLite file `agon.db` in `data_dir`, in WAL mode.
    ///
    /// Commits do not wait for the disk (`synchronous = NORMAL`): event
    /// appends are made durable by [`Db::sync_log`], one flush per group
    /// commit, after the writer is free again; read-model commits are not
    /// flushed at all. They lie in the same write-ahead log after the events
    /// they come from, so a power loss can only take a read model back
    /// together with, or before, its events, never past them.
    pub async fn open_sqlite(data_dir: &Path) -> Result<Db, StoreError> {
        std::fs::create_dir_all(data_dir).map_err(|source| StoreError::DataDir {
            path: data_dir.display().to_string(),
            source,
        })?;
        let options = SqliteConnectOptions::new()
            .filename(data_dir.join("agon.db"))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        // A file connection cannot go stale the way a network one can, so
        // the pool's ping before every acquire would only cost a round trip
        // to the connection's thread.
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .test_before_acquire(false)
            .connect_with(options.clone())
            .await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(4)
            .test_before_acquire(false)
            .connect_with(options.read_only(true))
            .await?;
        sqlx::migrate!("./migrations/sqlite").run(&writer).await?;
        Ok(Db::Sqlite {
            writer,
            reader,
            wal: Arc::new(data_dir.join("agon.db-wal")),
        })
    }

    /// Connects to PostgreSQL at `url` and applies the migrations, with the
    /// tools' acquire timeout ([`TOOL_ACQUIRE_TIMEOUT`]).
    pub async fn connect_postgres(url: &str, max_connections: u32) -> Result<Db, StoreError> {
        Self::connect_postgres_timed(url, max_connections, TOOL_ACQUIRE_TIMEOUT).await
    }

    /// Connects to PostgreSQL at `url` and applies the migrations; a
    /// statement that gets no connection within `acquire_timeout` (the
    /// server is down, or every connection busy) fails as
    /// [`StoreError::Unavailable`] instead of waiting on.
    pub async fn connect_postgres_timed(
        url: &str,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> Result<Db, StoreError> {
        let options = PgConnectOptions::from_str(url)?;
        let pool = postgres_pool(max_connections, acquire_timeout)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        Ok(Db::Postgres(pool))
    }

    /// Opens the SQLite store in `data_dir` only if its `agon.db` exists and
    /// holds an event log; `None` otherwise. It creates nothing and runs no
    /// migrations, so inspecting a mistyped data directory leaves no empty
    /// store behind. `read_only` opens every connection read-only.
    pub async fn open_sqlite_existing(
        data_dir: &Path,
        read_only: bool,
    ) -> Result<Option<Db>, StoreError> {
        let file = data_dir.join("agon.db");
        if !file.is_file() {
            return Ok(None);
        }
        let options = SqliteConnectOptions::new()
            .filename(&file)
            .create_if_missing(false)
            .read_only(read_only)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(2)
            .connect_with(options.read_only(true))
            .await?;
        let db = Db::Sqlite {
            writer,
            reader,
            wal: Arc::new(data_dir.join("agon.db-wal")),
        };
        db.holding_log().await
    }

    /// Connects to PostgreSQL at `url` without applying migrations; `None`
    /// when the database holds no event log.
    pub async fn connect_postgres_existing(
        url: &str,
        max_connections: u32,
    ) -> Result<Option<Db>, StoreError> {
        let options = PgConnectOptions::from_str(url)?;
        let pool = postgres_pool(max_connections, TOOL_ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await?;
        Db::Postgres(pool).holding_log().await
    }

    /// `Some(self)` when the `events` and `seals` tables exist, else closes it.
    async fn holding_log(self) -> Result<Option<Db>, StoreError> {
        let sql = match self {
            Db::Sqlite { .. } => {
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' \
                 AND name IN ('events', 'seals')"
            }
            Db::Postgres(_) => {
                "SELECT COUNT(*) FROM information_schema.tables \
                 WHERE table_schema = current_schema() AND table_name IN ('events', 'seals')"
            }
        };
        let tables: i64 = with_pool!(self.reader(), pool => {
            sqlx::query_scalar(sql).fetch_one(pool).await?
        });
        if tables == 2 {
            return Ok(Some(self));
        }
        self.close().await;
        Ok(None)
    }

    pub fn backend(&self) -> Backend {
        match self {
            Db::Sqlite { .. } => Backend::Sqlite,
            Db::Postgres(_) => Backend::Postgres,
        }
    }

    /// The pool for statements that write.
    pub fn writer(&self) -> PoolRef<'_> {
        match self {
            Db::Sqlite { writer, .. } => PoolRef::Sqlite(writer),
            Db::Postgres(pool) => PoolRef::Postgres(pool),
        }
    }

    /// The pool for statements that only read.
    pub fn reader(&self) -> PoolRef<'_> {
        match self {
            Db::Sqlite { reader, .. } => PoolRef::Sqlite(reader),
            Db::Postgres(pool) => PoolRef::Postgres(pool),
        }
    }

    /// Makes every commit so far durable. On SQLite this flushes the
    /// write-ahead log file (opened afresh each time: the file is replaced
    /// when the last connection closes); PostgreSQL commits durably already.
    pub async fn sync_log(&self) -> Result<(), StoreError> {
        let Db::Sqlite { wal, .. } = self else {
            return Ok(());
        };
        let wal = Arc::clone(wal);
        let synced = tokio::task::spawn_blocking(move || {
            match std::fs::File::open(wal.as_path()) {
                Ok(file) => file.sync_data(),
                // The last connection closed meanwhile: SQLite then moved
                // the log into the database file, flushed it, and removed it.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(e),
            }
        })
        .await;
        let flush = |e: StoreError| StoreError::Flush(std::sync::Arc::new(e));
        synced
            .map_err(|e| flush(StoreError::Task(e)))?
            .map_err(|e| flush(StoreError::Io(e)))
    }

    /// Answers whether the database takes a trivial query.
    pub async fn ping(&self) -> bool {
        with_pool!(self.reader(), pool => sqlx::query("SELECT 1").execute(pool).await.is_ok())
    }

    pub async fn close(&self) {
        match self {
            Db::Sqlite { writer, reader, .. } => {
                writer.close().await;
                reader.close().await;
            }
            Db::Postgres(pool) => pool.close().await,
        }
    }
}
