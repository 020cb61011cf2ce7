//! Reads of the `audit_log` rows: entries filtered by actor, subject, type
//! and time and paged by cursor, counts for the statistics, and the list of
//! trails. A caller who is not an admin sees only subjects they own.

use agon_projections::audit::{ENTRIES_TABLE, TRAILS_TABLE};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use super::{Audit, AuditError, Viewer};
use crate::store::db::with_pool;

/// One audit entry: an event, who caused it, through which request, when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct Entry {
    pub position: i64,
    pub trail_id: Option<String>,
    pub subject_type: Option<String>,
    pub subject_id: Option<String>,
    pub sequence: Option<i64>,
    pub event_type: Option<String>,
    pub actor: Option<String>,
    pub request_id: Option<String>,
    pub recorded_at: Option<String>,
}

/// What `GET /api/audit/events` filters on; every field optional.
#[derive(Debug, Clone, Default)]
pub struct EntryFilter {
    pub actor: Option<String>,
    /// A trail id (`debate:<id>`).
    pub subject: Option<String>,
    pub subject_type: Option<String>,
    pub event_type: Option<String>,
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    /// Entries after this position (the previous page's `next_cursor`).
    pub after: Option<i64>,
}

/// A page of entries, oldest first, and where the next one starts.
#[derive(Debug, Clone)]
pub struct EntryPage {
    pub entries: Vec<Entry>,
    /// `None` on the last page.
    pub next_cursor: Option<i64>,
}

/// One subject's trail as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct TrailSummary {
    pub trail_id: String,
    pub subject_type: Option<String>,
    pub subject_id: Option<String>,
    pub owner: Option<String>,
    pub entries: Option<i64>,
    pub first_position: Option<i64>,
    pub last_position: Option<i64>,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
}

/// Counts over the entries a viewer may see.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EntryStats {
    pub total_entries: i64,
    pub trails: i64,
    pub by_event_type: Vec<(String, i64)>,
    pub by_subject_type: Vec<(String, i64)>,
    pub first_recorded_at: Option<String>,
    pub last_recorded_at: Option<String>,
}

/// A time as the log records it (RFC 3339, microseconds, `Z`), so that text
/// order is time order.
fn stamp(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Micros, true)
}

const OWNED: &str = "trail_id IN (SELECT trail_id FROM audit_trails WHERE owner = ";

/// The `WHERE` clause for `filter` seen by `viewer`, and its values in order.
fn conditions(filter: &EntryFilter, viewer: &Viewer) -> (String, Vec<String>) {
    let mut clauses: Vec<String> = Vec::new();
    let mut values: Vec<String> = Vec::new();
    let mut add = |clause: &str, value: String| {
        values.push(value);
        clauses.push(clause.replace('?', &format!("${}", values.len())));
    };
    if let Some(owner) = viewer.owner() {
        add(&format!("{OWNED}?)"), owner.to_owned());
    }
    let text = [
        ("actor = ?", &filter.actor),
        ("trail_id = ?", &filter.subject),
        ("subject_type = ?", &filter.subject_type),
        ("event_type = ?", &filter.event_type),
    ];
    for (clause, value) in text {
        if let Some(value) = value {
            add(clause, value.clone());
        }
    }
    if let Some(since) = filter.since {
        add("recorded_at >= ?", stamp(since));
    }
    if let Some(until) = filter.until {
        add("recorded_at <= ?", stamp(until));
    }
    let clause = if clauses.is_empty() {
        "1 = 1".to_owned()
    } else {
        clauses.join(" AND ")
    };
    (clause, values)
}

impl Audit {
    /// Entries matching `filter`, oldest first, `limit` at most.
    pub async fn entries(
        &self,
        viewer: &Viewer,
        filter: &EntryFilter,
        limit: u32,
    ) -> Result<EntryPage, AuditError> {
        let (clause, values) = conditions(filter, viewer);
        let sql = format!(
            "SELECT event_position AS position, trail_id, subject_type, subject_id, sequence, \
             event_type, actor, request_id, recorded_at FROM {ENTRIES_TABLE} \
             WHERE {clause} AND event_position > ${} ORDER BY event_position LIMIT ${}",
            values.len() + 1,
            values.len() + 2
        );
        let after = filter.after.unwrap_or(i64::MIN);
        let fetch = i64::from(limit) + 1;
        let mut entries: Vec<Entry> = with_pool!(self.log().db().reader(), pool => {
            let mut query = sqlx::query_as(&sql);
            for value in &values {
                query = query.bind(value);
            }
            query.bind(after).bind(fetch).fetch_all(pool).await.map_err(crate::store::StoreError::from)?
        });
        let more = entries.len() > limit as usize;
        entries.truncate(limit as usize);
        let next_cursor = more.then(|| entries.last().map(|e| e.position)).flatten();
        Ok(EntryPage {
            entries,
            next_cursor,
        })
    }

    /// Counts over every entry `viewer` may see.
    pub async fn entry_stats(&self, viewer: &Viewer) -> Result<EntryStats, AuditError> {
        let (clause, values) = conditions(&EntryFilter::default(), viewer);
        let grouped = |column: &str| {
            format!(
                "SELECT {column}, COUNT(*) FROM {ENTRIES_TABLE} WHERE {clause} \
                 GROUP BY {column} ORDER BY {column}"
            )
        };
        let (by_type, by_subject) = (grouped("event_type"), grouped("subject_type"));
        let totals = format!(
            "SELECT COUNT(*), COUNT(DISTINCT trail_id), MIN(recorded_at), MAX(recorded_at) \
             FROM {ENTRIES_TABLE} WHERE {clause}"
        );
        type Totals = (i64, i64, Option<String>, Option<String>);
        type Counted = Vec<(Option<String>, i64)>;
        let (counts, types, subjects): (Totals, Counted, Counted) = with_pool!(self.log().db().reader(), pool => {
            let mut query = sqlx::query_as(&totals);
            for value in &values {
                query = query.bind(value);
            }
            let counts = query.fetch_one(pool).await.map_err(crate::store::StoreError::from)?;
            let mut query = sqlx::query_as(&by_type);
            for value in &values {
                query = query.bind(value);
            }
            let types = query.fetch_all(pool).await.map_err(crate::store::StoreError::from)?;
            let mut query = sqlx::query_as(&by_subject);
            for value in &values {
                query = query.bind(value);
            }
            let subjects = query.fetch_all(pool).await.map_err(crate::store::StoreError::from)?;
            (counts, types, subjects)
        });
        let named = |rows: Vec<(Option<String>, i64)>| {
            rows.into_iter()
                .map(|(name, count)| (name.unwrap_or_default(), count))
                .collect()
        };
        Ok(EntryStats {
            total_entries: counts.0,
            trails: counts.1,
            by_event_type: named(types),
            by_subject_type: named(subjects),
            first_recorded_at: counts.2,
            last_recorded_at: counts.3,
        })
    }

    /// Trails `viewer` may see, most recently changed first.
    pub async fn trails(
        &self,
        viewer: &Viewer,
        limit: u32,
        offset: u64,
    ) -> Result<(Vec<TrailSummary>, i64), AuditError> {
        // Admins pass no owner: every trail.
        let owned = "($1 IS NULL OR owner = $1)";
        let columns = "trail_id, subject_type, subject_id, owner, entries, first_position, \
                       last_position, created_at, updated_at";
        let list = format!(
            "SELECT {columns} FROM {TRAILS_TABLE} WHERE {owned} \
             ORDER BY last_position DESC LIMIT $2 OFFSET $3"
        );
        let count = format!("SELECT COUNT(*) FROM {TRAILS_TABLE} WHERE {owned}");
        let owner = viewer.owner().map(str::to_owned);
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        Ok(with_pool!(self.log().db().reader(), pool => {
            let rows: Vec<TrailSummary> = sqlx::query_as(&list)
                .bind(&owner)
                .bind(i64::from(limit))
                .bind(offset)
                .fetch_all(pool)
                .await
                .map_err(crate::store::StoreError::from)?;
            let total: i64 = sqlx::query_scalar(&count)
                .bind(&owner)
                .fetch_one(pool)
                .await
                .map_err(crate::store::StoreError::from)?;
            (rows, total)
        }))
    }

    /// The trail's row, when `viewer` may see it.
    pub async fn trail_summary(
        &self,
        viewer: &Viewer,
        trail_id: &str,
    ) -> Result<TrailSummary, AuditError> {
        let sql = format!(
            "SELECT trail_id, subject_type, subject_id, owner, entries, first_position, \
             last_position, created_at, updated_at FROM {TRAILS_TABLE} WHERE trail_id = $1"
        );
        let row: Option<TrailSummary> = with_pool!(self.log().db().reader(), pool => {
            sqlx::query_as(&sql)
                .bind(trail_id)
                .fetch_optional(pool)
                .await
                .map_err(crate::store::StoreError::from)?
        });
        match (row, viewer.owner()) {
            (Some(row), None) => Ok(row),
            (Some(row), Some(me)) if row.owner.as_deref() == Some(me) => Ok(row),
            _ => Err(AuditError::NoTrail(trail_id.to_owned())),
        }
    }

    /// Positions and sequences of the trail's events as the audit rows saw them.
    pub(super) async fn recorded(&self, trail_id: &str) -> Result<Vec<(i64, i64)>, AuditError> {
        let sql = format!(
            "SELECT event_position, sequence FROM {ENTRIES_TABLE} WHERE trail_id = $1 \
             ORDER BY event_position"
        );
        let rows: Vec<(i64, Option<i64>)> = with_pool!(self.log().db().reader(), pool => {
            sqlx::query_as(&sql)
                .bind(trail_id)
                .fetch_all(pool)
                .await
                .map_err(crate::store::StoreError::from)?
        });
        Ok(rows
            .into_iter()
            .filter_map(|(position, sequence)| Some((position, sequence?)))
            .collect())
    }
}
