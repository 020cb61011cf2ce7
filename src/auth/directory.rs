//! The user directory for admins: a page of the `accounts` read model,
//! newest first, optionally narrowed to users whose email or name contains
//! a search text (without regard to case).

use agon_projections::Accounts;
use agon_projections::DocumentProjection;
use agon_projections::accounts::AccountView;

use super::{Auth, AuthError};
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
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        let pool = self.log().db().reader();
        let (matching, order) = match pool {
            PoolRef::Sqlite(_) => (SQLITE_MATCH, SQLITE_ORDER),
            PoolRef::Postgres(_) => (POSTGRES_MATCH, POSTGRES_ORDER),
        };
        let (page, count) = (page_sql(matching, order, "$3", "$4"), count_sql(matching));
        let (texts, total): (Vec<String>, i64) = with_pool!(pool, pool => {
            let rows: Vec<(i64, String)> = sqlx::query_as(&page)
                .bind(Accounts::NAME)
                .bind(search.as_deref())
                .bind(i64::from(limit))
                .bind(offset)
                .fetch_all(pool)
                .await
                .map_err(StoreError::from)?;
            let total = match rows.first() {
                Some((total, _)) => *total,
                None => sqlx::query_scalar(&count)
                    .bind(Accounts::NAME)
                    .bind(search.as_deref())
                    .fetch_one(pool)
                    .await
                    .map_err(StoreError::from)?,
            };
            (rows.into_iter().map(|(_, doc)| doc).collect(), total)
        });
        let users = texts
            .iter()
            .map(|text| serde_json::from_str(text))
            .collect::<Result<_, _>>()?;
        Ok((users, u64::try_from(total).unwrap_or(0)))
    }
}
