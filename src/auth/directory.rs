//! The user directory for admins: a page of the `accounts` read model,
//! newest first, optionally narrowed to users whose email or name contains
//! a search text (without regard to case).

use agon_projections::Accounts;
use agon_projections::DocumentProjection;
use agon_projections::accounts::AccountView;

use super::{Auth, AuthError};
use crate::store::StoreError;
use crate::store::db::{PoolRef, with_pool};

/// Longest search text accepted.
pub const MAX_SEARCH_CHARS: usize = 254;

// The documents table keeps each account as JSON text; email and name are
// read out of it with each back end's JSON functions. `instr`/`strpos`
// rather than LIKE, so that `%` and `_` in a search mean themselves.
const SQLITE_PAGE: &str = "SELECT doc FROM documents WHERE projection = $1 AND ($2 IS NULL \
     OR instr(lower(json_extract(doc, '$.email')), $2) > 0 \
     OR instr(lower(json_extract(doc, '$.name')), $2) > 0) \
     ORDER BY json_extract(doc, '$.created_at') DESC, doc_key LIMIT $3 OFFSET $4";
const SQLITE_COUNT: &str = "SELECT COUNT(*) FROM documents WHERE projection = $1 AND ($2 IS NULL \
     OR instr(lower(json_extract(doc, '$.email')), $2) > 0 \
     OR instr(lower(json_extract(doc, '$.name')), $2) > 0)";
const POSTGRES_PAGE: &str = "SELECT doc FROM documents WHERE projection = $1 AND ($2::text IS NULL \
     OR strpos(lower(doc::jsonb ->> 'email'), $2) > 0 \
     OR strpos(lower(doc::jsonb ->> 'name'), $2) > 0) \
     ORDER BY doc::jsonb ->> 'created_at' DESC, doc_key LIMIT $3 OFFSET $4";
const POSTGRES_COUNT: &str = "SELECT COUNT(*) FROM documents WHERE projection = $1 AND ($2::text IS NULL \
     OR strpos(lower(doc::jsonb ->> 'email'), $2) > 0 \
     OR strpos(lower(doc::jsonb ->> 'name'), $2) > 0)";

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
        let (page_sql, count_sql) = match pool {
            PoolRef::Sqlite(_) => (SQLITE_PAGE, SQLITE_COUNT),
            PoolRef::Postgres(_) => (POSTGRES_PAGE, POSTGRES_COUNT),
        };
        let (texts, total): (Vec<String>, i64) = with_pool!(pool, pool => {
            let texts = sqlx::query_scalar(page_sql)
                .bind(Accounts::NAME)
                .bind(search.as_deref())
                .bind(i64::from(limit))
                .bind(offset)
                .fetch_all(pool)
                .await
                .map_err(StoreError::from)?;
            let total = sqlx::query_scalar(count_sql)
                .bind(Accounts::NAME)
                .bind(search.as_deref())
                .fetch_one(pool)
                .await
                .map_err(StoreError::from)?;
            (texts, total)
        });
        let users = texts
            .iter()
            .map(|text| serde_json::from_str(text))
            .collect::<Result<_, _>>()
            .map_err(|e| AuthError::Internal(format!("account document: {e}")))?;
        Ok((users, u64::try_from(total).unwrap_or(0)))
    }
}
