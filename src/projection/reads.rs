//! Reads of the table projections: a page of the debates list and the
//! admin statistics, each one statement (one snapshot) served from indexes,
//! so their cost does not grow with the number of debates.

use agon_projections::admin_stats::{ACTIVE_DEBATES_TABLE, AdminStatsView, EVENT_COUNTS_TABLE};
use agon_projections::debate_list::{ANY, COUNT_TABLE, LIST_TABLE};

use super::ListFilter;
use crate::store::db::with_pool;
use crate::store::{EventLog, StoreError};

/// One page of the debates list: each item's JSON as stored, and how many
/// debates match the filter.
#[derive(Debug, Clone, Default)]
pub struct DebatePage {
    pub items: Vec<String>,
    pub total: u64,
}

/// The statement of a page of the list for `filter`: `(total, item)` rows
/// newest first. Its conditions name only the filter's columns (never
/// `$n IS NULL OR ...`), so each filter is read in order from its index.
pub fn debate_page_sql(filter: ListFilter<'_>) -> String {
    let mut conditions = Vec::new();
    if filter.owner.is_some() {
        conditions.push("owner = $1");
    }
    if filter.state.is_some() {
        conditions.push("status = $2");
    }
    let filtered = if conditions.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conditions.join(" AND "))
    };
    format!(
        "SELECT ({}), item FROM {LIST_TABLE}{filtered} ORDER BY sort_key DESC LIMIT $3 OFFSET $4",
        count_sql()
    )
}

/// The count of debates matching `$1` (owner or `*`) and `$2` (status or `*`).
fn count_sql() -> String {
    format!(
        "SELECT debates FROM {COUNT_TABLE} WHERE owner = COALESCE($1, '{ANY}') AND status = COALESCE($2, '{ANY}')"
    )
}

/// A page of the debates list in creation order, newest first.
pub async fn debate_page(
    log: &EventLog,
    filter: ListFilter<'_>,
    limit: u32,
    offset: u64,
) -> Result<DebatePage, StoreError> {
    let sql = debate_page_sql(filter);
    let offset = i64::try_from(offset).unwrap_or(i64::MAX);
    let (rows, total): (Vec<(Option<i64>, String)>, Option<i64>) = with_pool!(log.db().reader(), pool => {
        let rows: Vec<(Option<i64>, String)> = sqlx::query_as(&sql)
            .bind(filter.owner)
            .bind(filter.state)
            .bind(i64::from(limit))
            .bind(offset)
            .fetch_all(pool)
            .await?;
        let total = match rows.first() {
            Some((total, _)) => *total,
            // Past the last page: the total alone.
            None => sqlx::query_scalar(&count_sql())
                .bind(filter.owner)
                .bind(filter.state)
                .fetch_optional(pool)
                .await?,
        };
        (rows, total)
    });
    Ok(DebatePage {
        items: rows.into_iter().map(|(_, item)| item).collect(),
        total: total.and_then(|t| u64::try_from(t).ok()).unwrap_or(0),
    })
}

/// The admin statistics: events per aggregate type and active debates.
pub async fn admin_stats(log: &EventLog) -> Result<AdminStatsView, StoreError> {
    let sql = format!(
        "SELECT aggregate_type, events FROM {EVENT_COUNTS_TABLE} \
         UNION ALL SELECT NULL, COUNT(*) FROM {ACTIVE_DEBATES_TABLE}"
    );
    let rows: Vec<(Option<String>, i64)> = with_pool!(log.db().reader(), pool => {
        sqlx::query_as(&sql).fetch_all(pool).await?
    });
    let mut view = AdminStatsView::default();
    for (kind, n) in rows {
        let n = u64::try_from(n).unwrap_or(0);
        match kind {
            Some(kind) => {
                view.total_events += n;
                view.events_by_aggregate_type.insert(kind, n);
            }
            None => view.active_debates = n,
        }
    }
    Ok(view)
}

/// Document `key` of `P` as stored, unparsed (to tag it, or to serve it).
pub async fn document_text<P: agon_projections::DocumentProjection>(
    log: &EventLog,
    key: &str,
) -> Result<Option<String>, StoreError> {
    Ok(with_pool!(log.db().reader(), pool => {
        sqlx::query_scalar("SELECT doc FROM documents WHERE projection = $1 AND doc_key = $2")
            .bind(P::NAME)
            .bind(key)
            .fetch_optional(pool)
            .await?
    }))
}

impl super::TableRunner<agon_projections::AdminStats> {
    /// The statistics as this projection has stored them.
    pub async fn view(&self) -> Result<AdminStatsView, StoreError> {
        admin_stats(self.log()).await
    }
}

/// The owner of document `key` of `P` and the last sequence of its stream
/// (`aggregate_type`, `key`) that `P` applied: a version of the document
/// read without the document.
pub async fn document_version<P: agon_projections::DocumentProjection>(
    log: &EventLog,
    aggregate_type: &str,
    key: &str,
) -> Result<Option<(Option<String>, i64)>, StoreError> {
    const SQL: &str = "SELECT d.owner, g.last_sequence FROM documents d \
         JOIN projection_guards g ON g.projection = d.projection \
         AND g.aggregate_type = $2 AND g.aggregate_id = d.doc_key \
         WHERE d.projection = $1 AND d.doc_key = $3";
    Ok(with_pool!(log.db().reader(), pool => {
        sqlx::query_as(SQL)
            .bind(P::NAME)
            .bind(aggregate_type)
            .bind(key)
            .fetch_optional(pool)
            .await?
    }))
}
