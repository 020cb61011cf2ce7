//! Bulk reads of the events table for verification, which must read every
//! stored byte and would otherwise spend most of its time in the driver:
//! sqlx hands SQLite rows across a channel one at a time and decodes
//! PostgreSQL rows one by one. Here SQLite is read with rusqlite on a
//! blocking thread (one read transaction: a snapshot) and PostgreSQL with
//! one binary `COPY` (one statement: a snapshot), in batches that a bounded
//! channel hands to the checker while the next batch is being read.

use std::path::PathBuf;

use futures::StreamExt;
use tokio::sync::mpsc;

use super::StoreError;
use super::db::Db;
use super::verify::ChainRow;

/// Rows per batch handed to the checker.
const BATCH: usize = 1024;
/// Bytes of consumed `COPY` data kept before the buffer is compacted.
const COMPACT_AT: usize = 1 << 20;
/// Batches read ahead of the checker.
const AHEAD: usize = 4;
/// The binary `COPY` header: signature, flags, extension length.
const COPY_SIGNATURE: &[u8] = b"PGCOPY\n\xff\r\n\0";

/// A row a scan yields, read column by column in the order of
/// [`ScanRow::COLUMNS`], the same way from either back end.
pub(crate) trait ScanRow: Default + Send + 'static {
    /// The select list (plain column names, the same on both back ends).
    const COLUMNS: &'static str;
    /// Reads a row into `self`, reusing its buffers: batches come back to
    /// the reader once checked, so a long scan allocates almost nothing.
    fn read_into<'r, C: Columns<'r>>(&mut self, columns: &mut C) -> Result<(), StoreError>;
}

/// The next column of a row, whichever back end it came from, borrowed
/// from where the driver holds it while the row is being read.
pub(crate) trait Columns<'r> {
    /// Whether the reading thread should do a row's heavy work itself, on
    /// the bytes where the driver left them. True on PostgreSQL, where that
    /// thread only parses what the server sent and the server's own work
    /// takes CPU elsewhere; false on SQLite, whose engine already keeps the
    /// reading thread as busy as the checking one would be.
    const HASH_ON_READ: bool;

    fn int(&mut self) -> Result<i64, StoreError>;
    fn str(&mut self) -> Result<&'r str, StoreError>;
    fn bytes(&mut self) -> Result<&'r [u8], StoreError>;

    fn blob(&mut self, into: &mut Vec<u8>) -> Result<(), StoreError> {
        let blob = self.bytes()?;
        into.clear();
        into.extend_from_slice(blob);
        Ok(())
    }
}

/// A position and a stored hash, in feed order (a seal's leaves).
#[derive(Debug, Clone, Default)]
pub(crate) struct PositionHash {
    pub position: i64,
    pub hash: Vec<u8>,
}

impl ScanRow for PositionHash {
    const COLUMNS: &'static str = "position, hash";

    fn read_into<'r, C: Columns<'r>>(&mut self, c: &mut C) -> Result<(), StoreError> {
        self.position = c.int()?;
        c.blob(&mut self.hash)
    }
}

/// A SQLite row's columns, from the first.
struct SqliteColumns<'r, 's> {
    row: &'r rusqlite::Row<'s>,
    at: usize,
}

impl<'r> SqliteColumns<'r, '_> {
    fn next(&mut self) -> Result<rusqlite::types::ValueRef<'r>, StoreError> {
        let row: &'r rusqlite::Row<'_> = self.row;
        let value = row.get_ref(self.at).map_err(scan_error)?;
        self.at += 1;
        Ok(value)
    }
}

impl<'r> Columns<'r> for SqliteColumns<'r, '_> {
    const HASH_ON_READ: bool = false;

    fn int(&mut self) -> Result<i64, StoreError> {
        self.next()?.as_i64().map_err(scan_error)
    }

    fn str(&mut self) -> Result<&'r str, StoreError> {
        self.next()?.as_str().map_err(scan_error)
    }

    fn bytes(&mut self) -> Result<&'r [u8], StoreError> {
        self.next()?.as_blob().map_err(scan_error)
    }
}

/// The rows of `SELECT {COLUMNS} FROM events WHERE {filter} ORDER BY
/// {order}`, in batches. `filter` and `order` are written by this crate
/// with integers only (a `COPY` takes no bind parameters).
pub(crate) fn scan<T: ScanRow>(db: &Db, filter: String, order: &'static str) -> Scan<T> {
    let sql = select::<T>(&filter, order);
    let (tx, rx) = mpsc::channel(AHEAD);
    // Room for every batch in flight, so that giving one back never waits.
    let (spare_tx, spare_rx) = mpsc::channel(AHEAD + 2);
    let batches = Batches::new(spare_rx);
    match db {
        Db::Sqlite { wal, .. } => {
            let file = wal.with_file_name("agon.db");
            tokio::task::spawn_blocking(move || {
                if let Err(e) = scan_sqlite(&file, &sql, &tx, batches) {
                    let _ = tx.blocking_send(Err(e));
                }
            });
        }
        Db::Postgres(pool) => {
            let pool = pool.clone();
            tokio::spawn(async move {
                let copy = format!("COPY ({sql}) TO STDOUT (FORMAT binary)");
                if let Err(e) = scan_postgres(&pool, &copy, &tx, batches).await {
                    let _ = tx.send(Err(e)).await;
                }
            });
        }
    }
    Scan {
        batches: rx,
        spare: spare_tx,
    }
}

/// The checker's end of a scan: batches in order, and the way back for
/// each once checked (its rows are then filled again, so their strings
/// are neither freed on this thread nor allocated anew on the reader's).
pub(crate) struct Scan<T> {
    batches: mpsc::Receiver<Result<Vec<T>, StoreError>>,
    spare: mpsc::Sender<Vec<T>>,
}

impl<T> Scan<T> {
    pub(crate) async fn recv(&mut self) -> Option<Result<Vec<T>, StoreError>> {
        self.batches.recv().await
    }

    /// Gives a checked batch back to the reader (dropped if it is done).
    pub(crate) fn recycle(&self, batch: Vec<T>) {
        let _ = self.spare.try_send(batch);
    }
}

/// The reader's end: the batch being filled, reusing given-back rows.
struct Batches<T> {
    spare: mpsc::Receiver<Vec<T>>,
    batch: Vec<T>,
    filled: usize,
}

impl<T: ScanRow> Batches<T> {
    fn new(spare: mpsc::Receiver<Vec<T>>) -> Self {
        Self {
            spare,
            batch: Vec::with_capacity(BATCH),
            filled: 0,
        }
    }

    /// Reads the next row into the batch.
    fn read<'r, C: Columns<'r>>(&mut self, columns: &mut C) -> Result<(), StoreError> {
        if self.filled == self.batch.len() {
            self.batch.push(T::default());
        }
        self.batch[self.filled].read_into(columns)?;
        self.filled += 1;
        Ok(())
    }

    fn full(&self) -> bool {
        self.filled >= BATCH
    }

    /// The filled rows, `None` if there are none; the next batch is a
    /// given-back one when there is one.
    fn take(&mut self) -> Option<Vec<T>> {
        if self.filled == 0 {
            return None;
        }
        let next = self
            .spare
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BATCH));
        let mut batch = std::mem::replace(&mut self.batch, next);
        batch.truncate(self.filled);
        self.filled = 0;
        Some(batch)
    }
}

fn scan_sqlite<T: ScanRow>(
    file: &PathBuf,
    sql: &str,
    tx: &mpsc::Sender<Result<Vec<T>, StoreError>>,
    mut batches: Batches<T>,
) -> Result<(), StoreError> {
    let connection = rusqlite::Connection::open_with_flags(
        file,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(scan_error)?;
    // Pages read through a mapping are not copied by a system call each;
    // SQLite caps the size at its compile-time maximum.
    connection
        .pragma_update(None, "mmap_size", i64::MAX)
        .map_err(scan_error)?;
    let mut statement = connection.prepare(sql).map_err(scan_error)?;
    let mut rows = statement.query([]).map_err(scan_error)?;
    while let Some(row) = rows.next().map_err(scan_error)? {
        batches.read(&mut SqliteColumns { row, at: 0 })?;
        if batches.full()
            && let Some(full) = batches.take()
            && tx.blocking_send(Ok(full)).is_err()
        {
            return Ok(()); // The checker stopped at a problem.
        }
    }
    if let Some(last) = batches.take() {
        let _ = tx.blocking_send(Ok(last));
    }
    Ok(())
}

/// The query of a bulk read.
fn select<T: ScanRow>(filter: &str, order: &str) -> String {
    format!(
        "SELECT {} FROM events WHERE {filter} ORDER BY {order}",
        T::COLUMNS
    )
}

/// A bulk read's transaction on PostgreSQL. The rows are wanted in the
/// order of an index (`events_pkey` or `events_feed`) that returns them
/// sorted already; left to itself the planner may read the table and sort
/// it, on disk past `work_mem` (it did, with a table not yet analysed:
/// 23.7 ms against 5.1 for 20 000 events, and the first row only once all
/// were sorted).
async fn begin_read(
    pool: &sqlx::PgPool,
) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, StoreError> {
    let mut read = pool.begin().await?;
    sqlx::query("SET LOCAL enable_sort = off")
        .execute(&mut *read)
        .await?;
    Ok(read)
}

impl super::EventLog {
    /// PostgreSQL's plans (`EXPLAIN`, a line each) for verification's two
    /// bulk reads over the whole log, under the settings they run with:
    /// whether they follow an index or sort the table. Empty on SQLite.
    pub async fn bulk_read_plans(&self) -> Result<Vec<String>, StoreError> {
        let Db::Postgres(pool) = self.db() else {
            return Ok(Vec::new());
        };
        let whole = format!("position >= 0 AND position <= {}", i64::MAX);
        let by_txid = format!(
            "(txid, position) > (0, 0) AND (txid, position) <= ({0}, {0})",
            i64::MAX
        );
        let mut read = begin_read(pool).await?;
        let mut lines = Vec::new();
        for sql in [
            select::<ChainRow>(&whole, "position"),
            select::<PositionHash>(&by_txid, "txid, position"),
        ] {
            let plan: Vec<(String,)> = sqlx::query_as(&format!("EXPLAIN {sql}"))
                .fetch_all(&mut *read)
                .await?;
            lines.extend(plan.into_iter().map(|(line,)| line));
        }
        read.rollback().await?;
        Ok(lines)
    }
}

async fn scan_postgres<T: ScanRow>(
    pool: &sqlx::PgPool,
    copy: &str,
    tx: &mpsc::Sender<Result<Vec<T>, StoreError>>,
    mut batches: Batches<T>,
) -> Result<(), StoreError> {
    let mut read = begin_read(pool).await?;
    let mut chunks = read.copy_out_raw(copy).await?;
    // The server sends one message per row: rows are gathered into batches
    // across messages, and the buffer is compacted only now and then.
    let mut buffer: Vec<u8> = Vec::new();
    let mut at = 0;
    let mut header_done = false;
    while let Some(chunk) = chunks.next().await {
        buffer.extend_from_slice(&chunk?);
        if !header_done {
            match copy_header_len(&buffer)? {
                Some(len) => (at, header_done) = (len, true),
                None => continue,
            }
        }
        while let Some((fields, len)) = next_tuple(&buffer[at..])? {
            at += len;
            match fields {
                Some(mut fields) => batches.read(&mut fields)?,
                None => break, // The trailer.
            }
        }
        if at > COMPACT_AT {
            buffer.drain(..at);
            at = 0;
        }
        if batches.full()
            && let Some(full) = batches.take()
            && tx.send(Ok(full)).await.is_err()
        {
            return Ok(()); // The checker stopped at a problem.
        }
    }
    drop(chunks);
    if let Some(last) = batches.take() {
        let _ = tx.send(Ok(last)).await;
    }
    // Read only: ending it either way hands the connection back clean.
    read.rollback().await?;
    Ok(())
}

/// The length of the binary `COPY` header once `buffer` holds all of it.
fn copy_header_len(buffer: &[u8]) -> Result<Option<usize>, StoreError> {
    let fixed = COPY_SIGNATURE.len() + 8;
    if buffer.len() < fixed {
        return Ok(None);
    }
    if !buffer.starts_with(COPY_SIGNATURE) {
        return Err(copy_error("not a binary COPY stream"));
    }
    let extension = read_u32(&buffer[COPY_SIGNATURE.len() + 4..]) as usize;
    Ok((buffer.len() >= fixed + extension).then_some(fixed + extension))
}

/// The fields of the next tuple of `data` and its length, `None` when
/// `data` does not hold all of it yet; the fields are `None` for the
/// trailer.
#[allow(clippy::type_complexity)]
fn next_tuple(data: &[u8]) -> Result<Option<(Option<Fields<'_>>, usize)>, StoreError> {
    if data.len() < 2 {
        return Ok(None);
    }
    let count = i16::from_be_bytes([data[0], data[1]]);
    if count == -1 {
        return Ok(Some((None, 2)));
    }
    // Find the tuple's end before decoding, so a partial one waits.
    let mut end = 2;
    for _ in 0..count {
        if data.len() < end + 4 {
            return Ok(None);
        }
        let len = i32::from_be_bytes([data[end], data[end + 1], data[end + 2], data[end + 3]]);
        end += 4 + usize::try_from(len).unwrap_or(0);
        if data.len() < end {
            return Ok(None);
        }
    }
    let fields = Fields {
        data: &data[2..end],
    };
    Ok(Some((Some(fields), end)))
}

/// The fields of one binary `COPY` tuple, read in order.
pub(crate) struct Fields<'a> {
    data: &'a [u8],
}

impl<'a> Fields<'a> {
    fn field(&mut self) -> Result<&'a [u8], StoreError> {
        let header = self
            .data
            .get(..4)
            .ok_or_else(|| copy_error("a field is missing"))?;
        let len = i32::from_be_bytes([header[0], header[1], header[2], header[3]]);
        let len = usize::try_from(len).map_err(|_| copy_error("a column is NULL"))?;
        let value = self
            .data
            .get(4..4 + len)
            .ok_or_else(|| copy_error("a field is cut short"))?;
        self.data = &self.data[4 + len..];
        Ok(value)
    }
}

impl<'a> Columns<'a> for Fields<'a> {
    const HASH_ON_READ: bool = true;

    fn int(&mut self) -> Result<i64, StoreError> {
        let bytes: [u8; 8] = self
            .field()?
            .try_into()
            .map_err(|_| copy_error("a BIGINT column is not 8 bytes"))?;
        Ok(i64::from_be_bytes(bytes))
    }

    fn str(&mut self) -> Result<&'a str, StoreError> {
        std::str::from_utf8(self.field()?).map_err(|_| copy_error("text is not UTF-8"))
    }

    fn bytes(&mut self) -> Result<&'a [u8], StoreError> {
        self.field()
    }
}

fn read_u32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

fn copy_error(what: &str) -> StoreError {
    StoreError::Scan(format!("PostgreSQL binary COPY: {what}"))
}

/// A SQLite error, or a column of an unexpected type.
fn scan_error(e: impl std::fmt::Display) -> StoreError {
    StoreError::Scan(format!("SQLite: {e}"))
}
