//! The user directory for admins: a page of the `accounts` read model,
//! newest first, optionally narrowed to users whose email or name contains
//! a search text (without regard to case).
//!
//! Accounts registered since sealing hold email and name sealed, which SQL
//! cannot search: a search reads the plaintext matches and every sealed
//! account from the database, opens the sealed ones and filters them here.
//! That is a pass over the sealed accounts per search (admins only); a page
//! without a search stays one indexed statement.

use agon_projections::Accounts;
use agon_projections::DocumentProjection;
use agon_projections::accounts::AccountView;

use super::{Auth, AuthError};
use crate::crypto::subject_keys::is_sealed;
use crate::projection::{count_sql, page_sql};
use crate::store::StoreError;
use crate::store::db::{PoolRef, with_pool};

/// Longest search text accepted.
pub const MAX_SEARCH_CHARS: usize = 254;

// The documents table keeps each account as JSON text; email and name are
// read out of it with each back end's JSON functions. `instr`/`strpos`
// rather than LIKE, so that `%` and `_` in a search mean themselves. The
// page and its total come from one statement, so they see the same
// snapshot while the projection keeps writing; the count alone serves a
// page past the end.
const SQLITE_MATCH: &str = "SELECT doc, doc_key FROM documents WHERE projection = $1 AND ($2 IS NULL \
     OR instr(lower(json_extract(doc, '$.email')), $2) > 0 \
     OR instr(lower(json_extract(doc, '$.name')), $2) > 0)";
const POSTGRES_MATCH: &str = "SELECT doc, doc_key FROM documents WHERE projection = $1 AND ($2::text IS NULL \
     OR strpos(lower(doc::jsonb ->> 'email'), $2) > 0 \
     OR strpos(lower(doc::jsonb ->> 'name'), $2) > 0)";
// What a search may match: plaintext documents matching in SQL, and every
// sealed document (the filter runs after opening it).
const SQLITE_CANDIDATES: &str = "SELECT doc FROM documents WHERE projection = $1 \
     AND (substr(json_extract(doc, '$.email'), 1, 12) = 'agon:sealed:' \
     OR instr(lower(json_extract(doc, '$.email')), $2) > 0 \
     OR instr(lower(json_extract(doc, '$.name')), $2) > 0)";
const POSTGRES_CANDIDATES: &str = "SELECT doc FROM documents WHERE projection = $1 \
     AND (left(doc::jsonb ->> 'email', 12) = 'agon:sealed:' \
     OR strpos(lower(doc::jsonb ->> 'email'), $2) > 0 \
     OR strpos(lower(doc::jsonb ->> 'name'), $2) > 0)";
const SQLITE_ORDER: &str = "json_extract(doc, '$.created_at') DESC, doc_key";
const POSTGRES_ORDER: &str = "doc::jsonb ->> 'created_at' DESC, doc_key";

impl Auth {
    /// A page of users (newest first) and how many match in all.
    pub async fn list_users(
        &self,
        search: Option<&str>,
        limit: u32,
        offset: u64,
    ) -> Result<(Vec<AccountView>, u64), AuthError> {
        let search = search
            .map(|s| s.trim().to_lowercase())
            .filter(|s| !s.is_empty());
        if search
            .as_ref()
            .is_some_and(|s| s.chars().count() > MAX_SEARCH_CHARS)
        {
            return Err(AuthError::Invalid(format!(
                "search must be at most {MAX_SEARCH_CHARS} characters"
            )));
        }
        if let Some(text) = search {
            return self.search_users(&text, limit, offset).await;
        }
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        let pool = self.log().db().reader();
        let (matching, order) = match pool {
            PoolRef::Sqlite(_) => (SQLITE_MATCH, SQLITE_ORDER),
            PoolRef::Postgres(_) => (POSTGRES_MATCH, POSTGRES_ORDER),
        };
        let (page, count) = (page_sql(matching, order, "$3", "$4"), count_sql(matching));
        let no_search: Option<&str> = None;
        let (texts, total): (Vec<String>, i64) = with_pool!(pool, pool => {
            let rows: Vec<(i64, String)> = sqlx::query_as(&page)
                .bind(Accounts::NAME)
                .bind(no_search)
                .bind(i64::from(limit))
                .bind(offset)
                .fetch_all(pool)
                .await
                .map_err(StoreError::from)?;
            let total = match rows.first() {
                Some((total, _)) => *total,
                None => sqlx::query_scalar(&count)
                    .bind(Accounts::NAME)
                    .bind(no_search)
                    .fetch_one(pool)
                    .await
                    .map_err(StoreError::from)?,
            };
            (rows.into_iter().map(|(_, doc)| doc).collect(), total)
        });
        let users = self.revealed_views(parse(&texts)?).await?;
        Ok((users, u64::try_from(total).unwrap_or(0)))
    }

    /// Users whose email or name contains `text` (lower case), newest first.
    async fn search_users(
        &self,
        text: &str,
        limit: u32,
        offset: u64,
    ) -> Result<(Vec<AccountView>, u64), AuthError> {
        let pool = self.log().db().reader();
        let query = match pool {
            PoolRef::Sqlite(_) => format!("{SQLITE_CANDIDATES} ORDER BY {SQLITE_ORDER}"),
            PoolRef::Postgres(_) => format!("{POSTGRES_CANDIDATES} ORDER BY {POSTGRES_ORDER}"),
        };
        let texts: Vec<String> = with_pool!(pool, pool => {
            sqlx::query_scalar(&query)
                .bind(Accounts::NAME)
                .bind(text)
                .fetch_all(pool)
                .await
                .map_err(StoreError::from)?
        });
        let candidates = parse(&texts)?;
        // Plaintext candidates matched in SQL; sealed ones are judged opened.
        let sealed: Vec<bool> = candidates.iter().map(|v| is_sealed(&v.email)).collect();
        let opened = self.revealed_views(candidates).await?;
        let matching: Vec<AccountView> = opened
            .into_iter()
            .zip(sealed)
            .filter(|(view, sealed)| {
                !sealed
                    || view.email.to_lowercase().contains(text)
                    || view.name.to_lowercase().contains(text)
            })
            .map(|(view, _)| view)
            .collect();
        let total = matching.len() as u64;
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        let page = matching
            .into_iter()
            .skip(skip)
            .take(limit as usize)
            .collect();
        Ok((page, total))
    }
}

fn parse(texts: &[String]) -> Result<Vec<AccountView>, AuthError> {
    Ok(texts
        .iter()
        .map(|text| serde_json::from_str(text))
        .collect::<Result<_, _>>()?)
}
