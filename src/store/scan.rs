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
use super::rows::StoredEvent;

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
pub(crate) trait ScanRow: Sized + Send + 'static {
    /// The select list (plain column names, the same on both back ends).
    const COLUMNS: &'static str;
    fn read<C: Columns>(columns: &mut C) -> Result<Self, StoreError>;
}

/// The next column of a row, whichever back end it came from.
pub(crate) trait Columns {
    fn int(&mut self) -> Result<i64, StoreError>;
    fn text(&mut self) -> Result<String, StoreError>;
    fn blob(&mut self) -> Result<Vec<u8>, StoreError>;
}

impl ScanRow for StoredEvent {
    const COLUMNS: &'static str = super::rows::EVENT_COLUMNS;

    fn read<C: Columns>(c: &mut C) -> Result<Self, StoreError> {
        Ok(StoredEvent {
            position: c.int()?,
            txid: c.int()?,
            event_id: c.text()?,
            aggregate_type: c.text()?,
            aggregate_id: c.text()?,
            sequence: c.int()?,
            event_type: c.text()?,
            event_version: c.text()?,
            payload: c.text()?,
            metadata: c.text()?,
            prev_hash: c.blob()?,
            hash: c.blob()?,
        })
    }
}

/// A position and a stored hash, in feed order (a seal's leaves).
#[derive(Debug, Clone)]
pub(crate) struct PositionHash {
    pub position: i64,
    pub hash: Vec<u8>,
}

impl ScanRow for PositionHash {
    const COLUMNS: &'static str = "position, hash";

    fn read<C: Columns>(c: &mut C) -> Result<Self, StoreError> {
        Ok(PositionHash {
            position: c.int()?,
            hash: c.blob()?,
        })
    }
}

/// A SQLite row's columns, from the first.
struct SqliteColumns<'r, 's> {
    row: &'r rusqlite::Row<'s>,
    at: usize,
}

impl SqliteColumns<'_, '_> {
    fn next<T: rusqlite::types::FromSql>(&mut self) -> Result<T, StoreError> {
        let value = self.row.get(self.at).map_err(scan_error)?;
        self.at += 1;
        Ok(value)
    }
}

impl Columns for SqliteColumns<'_, '_> {
    fn int(&mut self) -> Result<i64, StoreError> {
        self.next()
    }

    fn text(&mut self) -> Result<String, StoreError> {
        self.next()
    }

    fn blob(&mut self) -> Result<Vec<u8>, StoreError> {
        self.next()
    }
}

/// The rows of `SELECT {COLUMNS} FROM events WHERE {filter} ORDER BY
/// {order}`, in batches. `filter` and `order` are written by this crate
/// with integers only (a `COPY` takes no bind parameters).
pub(crate) fn scan<T: ScanRow>(
    db: &Db,
    filter: String,
    order: &'static str,
) -> mpsc::Receiver<Result<Vec<T>, StoreError>> {
    let sql = format!(
        "SELECT {} FROM events WHERE {filter} ORDER BY {order}",
        T::COLUMNS
    );
    let (tx, rx) = mpsc::channel(AHEAD);
    match db {
        Db::Sqlite { wal, .. } => {
            let file = wal.with_file_name("agon.db");
            tokio::task::spawn_blocking(move || {
                if let Err(e) = scan_sqlite(&file, &sql, &tx) {
                    let _ = tx.blocking_send(Err(e));
                }
            });
        }
        Db::Postgres(pool) => {
            let pool = pool.clone();
            tokio::spawn(async move {
                let copy = format!("COPY ({sql}) TO STDOUT (FORMAT binary)");
                if let Err(e) = scan_postgres(&pool, &copy, &tx).await {
                    let _ = tx.send(Err(e)).await;
                }
            });
        }
    }
    rx
}

fn scan_sqlite<T: ScanRow>(
    file: &PathBuf,
    sql: &str,
    tx: &mpsc::Sender<Result<Vec<T>, StoreError>>,
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
    let mut batch = Vec::with_capacity(BATCH);
    while let Some(row) = rows.next().map_err(scan_error)? {
        batch.push(T::read(&mut SqliteColumns { row, at: 0 })?);
        if batch.len() == BATCH {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            if tx.blocking_send(Ok(full)).is_err() {
                return Ok(()); // The checker stopped at a problem.
            }
        }
    }
    if !batch.is_empty() {
        let _ = tx.blocking_send(Ok(batch));
    }
    Ok(())
}

async fn scan_postgres<T: ScanRow>(
    pool: &sqlx::PgPool,
    copy: &str,
    tx: &mpsc::Sender<Result<Vec<T>, StoreError>>,
) -> Result<(), StoreError> {
    let mut read = pool.begin().await?;
    // The rows are wanted in the order of an index (`events_pkey` or
    // `events_feed`) that returns them sorted already; left to itself the
    // planner may read the table and sort it, on disk past `work_mem` (it
    // did, with a table not yet analysed: 23.7 ms against 5.1 for 20 000
    // events, and the first row only once all were sorted).
    sqlx::query("SET LOCAL enable_sort = off")
        .execute(&mut *read)
        .await?;
    let mut chunks = read.copy_out_raw(copy).await?;
    // The server sends one message per row: rows are gathered into batches
    // across messages, and the buffer is compacted only now and then.
    let mut buffer: Vec<u8> = Vec::new();
    let mut at = 0;
    let mut header_done = false;
    let mut batch = Vec::with_capacity(BATCH);
    while let Some(chunk) = chunks.next().await {
        buffer.extend_from_slice(&chunk?);
        if !header_done {
            match copy_header_len(&buffer)? {
                Some(len) => (at, header_done) = (len, true),
                None => continue,
            }
        }
        while let Some((row, len)) = next_tuple::<T>(&buffer[at..])? {
            at += len;
            match row {
                Some(row) => batch.push(row),
                None => break, // The trailer.
            }
        }
        if at > COMPACT_AT {
            buffer.drain(..at);
            at = 0;
        }
        if batch.len() >= BATCH {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            if tx.send(Ok(full)).await.is_err() {
                return Ok(()); // The checker stopped at a problem.
            }
        }
    }
    drop(chunks);
    if !batch.is_empty() {
        let _ = tx.send(Ok(batch)).await;
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

/// The next tuple of `data` and its length, `None` when `data` does not
/// hold all of it yet; the row is `None` for the trailer.
#[allow(clippy::type_complexity)]
fn next_tuple<T: ScanRow>(data: &[u8]) -> Result<Option<(Option<T>, usize)>, StoreError> {
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
    let mut fields = Fields {
        data: &data[2..end],
    };
    Ok(Some((Some(T::read(&mut fields)?), end)))
}

/// The fields of one binary `COPY` tuple, read in order.
pub(crate) struct Fields<'a> {
    data: &'a [u8],
}

impl<'a> Fields<'a> {
    fn bytes(&mut self) -> Result<&'a [u8], StoreError> {
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

impl Columns for Fields<'_> {
    fn int(&mut self) -> Result<i64, StoreError> {
        let bytes: [u8; 8] = self
            .bytes()?
            .try_into()
            .map_err(|_| copy_error("a BIGINT column is not 8 bytes"))?;
        Ok(i64::from_be_bytes(bytes))
    }

    fn text(&mut self) -> Result<String, StoreError> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| copy_error("text is not UTF-8"))
    }

    fn blob(&mut self) -> Result<Vec<u8>, StoreError> {
        Ok(self.bytes()?.to_vec())
    }
}

fn read_u32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

fn copy_error(what: &str) -> StoreError {
    StoreError::Scan(format!("PostgreSQL binary COPY: {what}"))
}

fn scan_error(e: rusqlite::Error) -> StoreError {
    StoreError::Scan(format!("SQLite: {e}"))
}
