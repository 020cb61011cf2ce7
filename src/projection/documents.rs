//! Runs document projections (one JSON document per key) and reads their
//! documents.
//!
//! Per batch, in one transaction: for each event, the stream guard first
//! (it also serializes two replicas handling the same event: the second one
//! waits on the guard row and then skips), then the touched document is
//! loaded, folded and written back. An event it cannot decode ends the
//! batch before it (`commit_until_undecodable`).

use std::collections::HashMap;
use std::marker::PhantomData;
use std::time::Duration;

use agon_projections::{Changes, DocumentProjection, EventRecord};
use async_trait::async_trait;

use super::{IdleCheckpoint, Member, Undecodable, guards};
use crate::store::db::{Tx, with_pool, with_tx};
use crate::store::{EventLog, StoreError};

/// How often a waiting request looks again without being woken.
const WAIT_RECHECK: Duration = Duration::from_millis(50);

/// Documents loaded per statement.
const LOAD_CHUNK: usize = 200;

/// What follows the rows of the documents' multi-row upsert.
const UPSERT_CONFLICT: &str = " ON CONFLICT (projection, doc_key) \
     DO UPDATE SET owner = excluded.owner, lookup = excluded.lookup, doc = excluded.doc, \
     state = excluded.state, sort_key = excluded.sort_key";

/// One document as the batch leaves it, ready for the upsert.
struct Written<'a> {
    key: &'a String,
    owner: Option<String>,
    lookup: Option<String>,
    doc: String,
    state: Option<String>,
    sort_key: Option<String>,
}

/// A document projection hooked to the store as a bus consumer.
pub struct DocumentRunner<P: DocumentProjection> {
    log: EventLog,
    idle: IdleCheckpoint,
    _projection: PhantomData<P>,
}

impl<P: DocumentProjection> DocumentRunner<P> {
    pub fn new(log: EventLog) -> Self {
        Self {
            log,
            idle: IdleCheckpoint::default(),
            _projection: PhantomData,
        }
    }
}

super::projection_consumer!(DocumentRunner, DocumentProjection);

#[async_trait]
impl<P: DocumentProjection> Member for DocumentRunner<P> {
    fn relevant(&self, event: &EventRecord) -> bool {
        super::registry::has_key::<P>(event)
    }

    fn idle(&self) -> &IdleCheckpoint {
        &self.idle
    }

    async fn fold(
        &self,
        tx: &mut Tx,
        batch: &[EventRecord],
    ) -> Result<Option<Undecodable>, StoreError> {
        // The events with a document, by index in the batch.
        let mut relevant: Vec<(usize, &EventRecord, String)> = Vec::new();
        for (at, event) in batch.iter().enumerate() {
            match P::key(event) {
                Ok(Some(key)) => relevant.push((at, event, key)),
                Ok(None) => {}
                Err(error) => return Ok(Some((at, error))),
            }
        }
        let events: Vec<&EventRecord> = relevant.iter().map(|(_, event, _)| *event).collect();
        with_tx!(tx, tx => {
            let fresh = guards::fresh_events(tx, P::NAME, &events).await?;
            let mut keys: Vec<&str> = relevant
                .iter()
                .zip(&fresh)
                .filter(|(_, fresh)| **fresh)
                .map(|((_, _, key), _)| key.as_str())
                .collect();
            keys.sort_unstable();
            keys.dedup();
            // Documents touched by this batch, as they stand after it.
            let mut touched: HashMap<String, Option<P::Doc>> = HashMap::new();
            for chunk in keys.chunks(LOAD_CHUNK) {
                let list = (0..chunk.len())
                    .map(|i| format!("${}", i + 2))
                    .collect::<Vec<_>>()
                    .join(", ");
                let sql = format!(
                    "SELECT doc_key, doc FROM documents WHERE projection = $1 AND doc_key IN ({list})"
                );
                let mut query = sqlx::query_as::<_, (String, String)>(&sql).bind(P::NAME);
                for key in chunk {
                    query = query.bind(*key);
                }
                for (key, text) in query.fetch_all(&mut **tx).await? {
                    touched.insert(key, Some(serde_json::from_str(&text)?));
                }
            }
            // What the batch starts from, for the rows beside the documents.
            let before: HashMap<String, Option<P::Doc>> = if P::TABLES.is_empty() {
                HashMap::new()
            } else {
                keys.iter()
                    .map(|key| {
                        let doc = touched.get(*key).cloned().flatten();
                        ((*key).to_owned(), doc)
                    })
                    .collect()
            };
            for ((at, event, key), fresh) in relevant.iter().zip(&fresh) {
                if *fresh {
                    let current = touched.remove(key).flatten();
                    match P::apply(current, event) {
                        Ok(doc) => touched.insert(key.clone(), doc),
                        // Dropping the transaction rolls it back.
                        Err(error) => return Ok(Some((*at, error))),
                    };
                }
            }
            if !P::TABLES.is_empty() {
                let mut changes = Changes::default();
                for (key, after) in &touched {
                    let before = before.get(key).and_then(Option::as_ref);
                    P::rows(before, after.as_ref(), &mut changes);
                }
                super::tables::write_changes!(*tx, changes);
            }
            let mut written = Vec::with_capacity(touched.len());
            for (key, doc) in &touched {
                match doc {
                    Some(doc) => written.push(Written {
                        key,
                        owner: P::owner(doc),
                        lookup: P::lookup(doc),
                        doc: serde_json::to_string(doc)?,
                        state: P::state(doc),
                        sort_key: P::sort_key(doc),
                    }),
                    None => {
                        sqlx::query("DELETE FROM documents WHERE projection = $1 AND doc_key = $2")
                            .bind(P::NAME)
                            .bind(key)
                            .execute(&mut **tx)
                            .await?;
                    }
                }
            }
            for chunk in written.chunks(LOAD_CHUNK) {
                let mut upsert = sqlx::QueryBuilder::new(
                    "INSERT INTO documents (projection, doc_key, owner, lookup, doc, state, sort_key) ",
                );
                upsert.push_values(chunk, |mut row, w| {
                    row.push_bind(P::NAME)
                        .push_bind(w.key.as_str())
                        .push_bind(w.owner.as_deref())
                        .push_bind(w.lookup.as_deref())
                        .push_bind(w.doc.as_str())
                        .push_bind(w.state.as_deref())
                        .push_bind(w.sort_key.as_deref());
                });
                upsert.push(UPSERT_CONFLICT);
                upsert.build().execute(&mut **tx).await?;
            }
        });
        Ok(None)
    }
}

/// Which documents a listing returns.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListFilter<'a> {
    pub owner: Option<&'a str>,
    pub state: Option<&'a str>,
}

/// Reads the documents of projection `P`.
#[derive(Debug, Clone)]
pub struct Documents {
    log: EventLog,
}

impl Documents {
    pub fn new(log: EventLog) -> Self {
        Self { log }
    }

    /// The document `key`, if it exists.
    pub async fn get<P: DocumentProjection>(
        &self,
        key: &str,
    ) -> Result<Option<P::Doc>, StoreError> {
        self.one::<P>("doc_key", key).await
    }

    /// The document found by its second key.
    pub async fn by_lookup<P: DocumentProjection>(
        &self,
        lookup: &str,
    ) -> Result<Option<P::Doc>, StoreError> {
        self.one::<P>("lookup", lookup).await
    }

    /// Part of document `key`: `T` names the fields it needs (the rest of
    /// the document is skipped, not built), for hot reads of large documents.
    pub async fn get_part<P: DocumentProjection, T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
    ) -> Result<Option<T>, StoreError> {
        self.one_as::<P, T>("doc_key", key).await
    }

    async fn one<P: DocumentProjection>(
        &self,
        column: &'static str,
        value: &str,
    ) -> Result<Option<P::Doc>, StoreError> {
        self.one_as::<P, P::Doc>(column, value).await
    }

    async fn one_as<P: DocumentProjection, T: serde::de::DeserializeOwned>(
        &self,
        column: &'static str,
        value: &str,
    ) -> Result<Option<T>, StoreError> {
        let sql = format!("SELECT doc FROM documents WHERE projection = $1 AND {column} = $2");
        let text: Option<String> = with_pool!(self.log.db().reader(), pool => {
            sqlx::query_scalar(&sql).bind(P::NAME).bind(value).fetch_optional(pool).await?
        });
        Ok(text.map(|t| serde_json::from_str(&t)).transpose()?)
    }

    /// Every document `owner` has in `P`.
    pub async fn owned_by<P: DocumentProjection>(
        &self,
        owner: &str,
    ) -> Result<Vec<P::Doc>, StoreError> {
        let texts: Vec<String> = with_pool!(self.log.db().reader(), pool => {
            sqlx::query_scalar(
                "SELECT doc FROM documents WHERE projection = $1 AND owner = $2 ORDER BY doc_key",
            )
            .bind(P::NAME)
            .bind(owner)
            .fetch_all(pool)
            .await?
        });
        Ok(texts
            .iter()
            .map(|t| serde_json::from_str(t))
            .collect::<Result<_, _>>()?)
    }

    /// A page of `P`'s documents in `sort_key` order, newest first, with
    /// the number of documents matching; `owner` and `state` filter when set.
    pub async fn list<P: DocumentProjection>(
        &self,
        filter: ListFilter<'_>,
        limit: u32,
        offset: u64,
    ) -> Result<(Vec<P::Doc>, u64), StoreError> {
        let matching = "SELECT doc, doc_key, sort_key FROM documents WHERE projection = $1 \
             AND ($2 IS NULL OR owner = $2) AND ($3 IS NULL OR state = $3)";
        let (page_sql, count_sql) = (
            page_sql(matching, "sort_key DESC, doc_key DESC", "$4", "$5"),
            count_sql(matching),
        );
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        let (texts, total): (Vec<String>, i64) = with_pool!(self.log.db().reader(), pool => {
            let rows: Vec<(i64, String)> = sqlx::query_as(&page_sql)
                .bind(P::NAME)
                .bind(filter.owner)
                .bind(filter.state)
                .bind(i64::from(limit))
                .bind(offset)
                .fetch_all(pool)
                .await?;
            let total = match rows.first() {
                Some((total, _)) => *total,
                None => sqlx::query_scalar(&count_sql)
                    .bind(P::NAME)
                    .bind(filter.owner)
                    .bind(filter.state)
                    .fetch_one(pool)
                    .await?,
            };
            (rows.into_iter().map(|(_, doc)| doc).collect(), total)
        });
        let docs = texts
            .iter()
            .map(|t| serde_json::from_str(t))
            .collect::<Result<_, _>>()?;
        Ok((docs, u64::try_from(total).unwrap_or(0)))
    }

    /// The documents with these keys that exist, in no particular order.
    pub async fn many<P: DocumentProjection>(
        &self,
        keys: &[String],
    ) -> Result<Vec<P::Doc>, StoreError> {
        let mut docs = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(doc) = self.get::<P>(key).await? {
                docs.push(doc);
            }
        }
        Ok(docs)
    }

    /// Waits until document `key` satisfies `done`, so that a command's
    /// effect is visible to every replica before its response goes out.
    /// Gives up after `SERVICE_READ_MODEL_WAIT_MS` (the command stands;
    /// readers catch up later).
    pub async fn wait_for<P: DocumentProjection>(
        &self,
        key: &str,
        done: impl Fn(&P::Doc) -> bool,
    ) -> Result<bool, StoreError> {
        self.wait_for_within::<P>(key, self.log.read_model_wait(), done)
            .await
    }

    /// [`Self::wait_for`], giving up after `limit`.
    pub async fn wait_for_within<P: DocumentProjection>(
        &self,
        key: &str,
        limit: Duration,
        done: impl Fn(&P::Doc) -> bool,
    ) -> Result<bool, StoreError> {
        wait_until(&self.log, limit, P::NAME, key, || async {
            Ok(self.get::<P>(key).await?.is_some_and(|doc| done(&doc)))
        })
        .await
    }
}

/// Waits until `check` holds, looking again whenever a read model of this
/// process moves; gives up after `limit` (`projection` and `key` name what
/// was waited for in the warning).
pub(crate) async fn wait_until<F, Fut>(
    log: &EventLog,
    limit: Duration,
    projection: &str,
    key: &str,
    check: F,
) -> Result<bool, StoreError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<bool, StoreError>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    let mut moved = log.subscribe_read_models();
    loop {
        if check().await? {
            return Ok(true);
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(projection, key, "read model did not catch up in time");
            return Ok(false);
        }
        // Woken by this process's projections, which see every event
        // (on PostgreSQL too); the timer is only a safety net.
        tokio::select! {
            _ = moved.changed() => {}
            () = tokio::time::sleep(WAIT_RECHECK) => {}
        }
    }
}

/// One statement yielding `(total, doc)` rows: a page of the rows
/// `matching` selects (which must select `doc`) in `order`, each carrying
/// how many match in all. One statement sees one snapshot, so the page and
/// its total agree while projections keep writing.
pub(crate) fn page_sql(matching: &str, order: &str, limit: &str, offset: &str) -> String {
    format!(
        "WITH m AS ({matching}) SELECT (SELECT COUNT(*) FROM m), doc FROM m \
         ORDER BY {order} LIMIT {limit} OFFSET {offset}"
    )
}

/// How many rows `matching` selects: the total for a page past the end.
pub(crate) fn count_sql(matching: &str) -> String {
    format!("SELECT COUNT(*) FROM ({matching}) AS m")
}
