//! Reads of the table projections: a page of the debates list and the
//! admin statistics, each one statement (one snapshot) served from indexes,
//! so their cost does not grow with the number of debates.

use agon_projections::admin_stats::{ACTIVE_DEBATES_TABLE, AdminStatsView, EVENT_COUNTS_TABLE};
use agon_projections::debate_list::{ANY, COUNT_TABLE, LIST_TABLE};
use agon_projections::gallery::GALLERY_TABLE;

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

/// The statement of a page of the list for `filter` among debates whose
/// folded topic is `LIKE $5` (a pattern from [`contains_pattern`]):
/// `(total, item)` rows newest first. It walks the filter's index in order
/// and tests each row's topic, so a page costs the rows it passes, and the
/// total the filter's rows; no index serves a substring of the topic.
pub fn debate_search_sql(filter: ListFilter<'_>) -> String {
    let mut conditions = Vec::new();
    if filter.owner.is_some() {
        conditions.push("owner = $1");
    }
    if filter.state.is_some() {
        conditions.push("status = $2");
    }
    conditions.push("topic_folded LIKE $5 ESCAPE '\\'");
    let filtered = conditions.join(" AND ");
    format!(
        "SELECT (SELECT COUNT(*) FROM {LIST_TABLE} WHERE {filtered}), item FROM {LIST_TABLE} \
         WHERE {filtered} ORDER BY sort_key DESC LIMIT $3 OFFSET $4"
    )
}

/// A `LIKE` pattern (escape character `\`) matching text that contains
/// `needle` literally: its `%`, `_` and `\` match only themselves.
pub fn contains_pattern(needle: &str) -> String {
    let mut pattern = String::with_capacity(needle.len() + 2);
    pattern.push('%');
    for c in needle.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
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

/// A page of the list among debates whose topic contains `needle` (folded
/// as the projection folds topics), newest first.
pub async fn debate_search_page(
    log: &EventLog,
    filter: ListFilter<'_>,
    needle: &str,
    limit: u32,
    offset: u64,
) -> Result<DebatePage, StoreError> {
    let sql = debate_search_sql(filter);
    let pattern = contains_pattern(&agon_projections::debate_list::fold(needle));
    let offset = i64::try_from(offset).unwrap_or(i64::MAX);
    let count = format!(
        "SELECT COUNT(*) FROM {LIST_TABLE} WHERE ($1 IS NULL OR owner = $1) \
         AND ($2 IS NULL OR status = $2) AND topic_folded LIKE $5 ESCAPE '\\'"
    );
    let (rows, total): (Vec<(i64, String)>, i64) = with_pool!(log.db().reader(), pool => {
        let rows: Vec<(i64, String)> = sqlx::query_as(&sql)
            .bind(filter.owner)
            .bind(filter.state)
            .bind(i64::from(limit))
            .bind(offset)
            .bind(&pattern)
            .fetch_all(pool)
            .await?;
        let total = match rows.first() {
            Some((total, _)) => *total,
            // Past the last page: the total alone.
            None => sqlx::query_scalar(&count)
                .bind(filter.owner)
                .bind(filter.state)
                .bind(0_i64)
                .bind(0_i64)
                .bind(&pattern)
                .fetch_one(pool)
                .await?,
        };
        (rows, total)
    });
    Ok(DebatePage {
        items: rows.into_iter().map(|(_, item)| item).collect(),
        total: u64::try_from(total).unwrap_or(0),
    })
}

/// A page of the public gallery, newest publication first: each item's
/// JSON as stored, and how many debates are published.
pub async fn gallery_page(
    log: &EventLog,
    limit: u32,
    offset: u64,
) -> Result<DebatePage, StoreError> {
    let count = format!("SELECT COUNT(*) FROM {GALLERY_TABLE}");
    let sql = format!(
        "SELECT ({count}), item FROM {GALLERY_TABLE} ORDER BY sort_key DESC LIMIT $1 OFFSET $2"
    );
    let offset = i64::try_from(offset).unwrap_or(i64::MAX);
    let (rows, total): (Vec<(i64, String)>, i64) = with_pool!(log.db().reader(), pool => {
        let rows: Vec<(i64, String)> = sqlx::query_as(&sql)
            .bind(i64::from(limit))
            .bind(offset)
            .fetch_all(pool)
            .await?;
        let total = match rows.first() {
            Some((total, _)) => *total,
            None => sqlx::query_scalar(&count).fetch_one(pool).await?,
        };
        (rows, total)
    });
    Ok(DebatePage {
        items: rows.into_iter().map(|(_, item)| item).collect(),
        total: u64::try_from(total).unwrap_or(0),
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
