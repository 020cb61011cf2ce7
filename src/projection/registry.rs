//! The one list of projections the service runs: name, version, kind and
//! runner. Starting, rebuilding, `agon replay` and the health report all
//! read it, so a projection is added in one place. Raising a version
//! rebuilds that projection from the log at the next start.

use std::sync::Arc;

use agon_projections::{
    Accounts, AdminStats, ApiKeys, AuditLog, Debates, DocumentProjection, EventRecord, Leaderboard,
    Organizations, Projection, Reviews, Sessions, TableProjection, WebhookSubscriptions,
};

use super::documents::DocumentRunner;
use super::tables::TableRunner;
use super::{Member, ProjectionRunner, checkpoint_name};
use crate::store::db::with_pool;
use crate::store::{EventLog, StoreError};

/// One registered projection.
#[derive(Clone, Copy)]
pub struct Registered {
    pub name: &'static str,
    /// The rules its stored read model was built by; a change rebuilds it.
    pub version: i64,
    /// The tables a table projection owns (none for the other kinds).
    pub tables: &'static [&'static str],
    /// Whether an event can change its read model (what its runner does not skip).
    pub relevant: fn(&EventRecord) -> bool,
    pub runner: fn(&EventLog) -> Arc<dyn Member>,
}

impl std::fmt::Debug for Registered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} v{}", self.name, self.version)
    }
}

fn view_runner<P: Projection>(log: &EventLog) -> Arc<dyn Member> {
    Arc::new(ProjectionRunner::<P>::new(log.clone()))
}

fn document_runner<P: DocumentProjection>(log: &EventLog) -> Arc<dyn Member> {
    Arc::new(DocumentRunner::<P>::new(log.clone()))
}

fn table_runner<P: TableProjection>(log: &EventLog) -> Arc<dyn Member> {
    Arc::new(TableRunner::<P>::new(log.clone()))
}

/// Whether a document projection takes `event`; one whose key cannot be
/// decoded stops the projection there, so it counts.
pub(super) fn has_key<P: DocumentProjection>(event: &EventRecord) -> bool {
    !matches!(P::key(event), Ok(None))
}

/// A projection keeping one JSON view.
const fn view<P: Projection>(version: i64) -> Registered {
    Registered {
        name: P::NAME,
        version,
        tables: &[],
        relevant: P::relevant,
        runner: view_runner::<P>,
    }
}

/// A projection keeping one JSON document per key.
const fn documents<P: DocumentProjection>(version: i64) -> Registered {
    Registered {
        name: P::NAME,
        version,
        tables: P::TABLES,
        relevant: has_key::<P>,
        runner: document_runner::<P>,
    }
}

/// A projection owning tables.
const fn tables<P: TableProjection>(version: i64) -> Registered {
    Registered {
        name: P::NAME,
        version,
        tables: P::TABLES,
        relevant: P::relevant,
        runner: table_runner::<P>,
    }
}

/// Every projection the service runs. Raise a version when a fold's rules
/// change what it stores (version 2 of `admin_stats`: its view became
/// tables; version 2 of `debates`: it writes the list's tables too;
/// version 3: the list's folded topic for search, and the gallery).
pub const REGISTRY: [Registered; 12] = [
    tables::<AdminStats>(2),
    documents::<Accounts>(1),
    documents::<Sessions>(1),
    documents::<ApiKeys>(1),
    documents::<Organizations>(1),
    documents::<Debates>(3),
    view::<Leaderboard>(1),
    tables::<WebhookSubscriptions>(1),
    documents::<Reviews>(1),
    documents::<agon_projections::BackupCatalog>(1),
    documents::<agon_projections::DrillHistory>(1),
    tables::<AuditLog>(1),
];

/// The projection named `name`.
pub fn find(name: &str) -> Option<&'static Registered> {
    REGISTRY.iter().find(|r| r.name == name)
}

/// The names of every projection, in registry order.
pub fn names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|r| r.name)
}

/// Empties `projection`'s read model, guards and checkpoint (and its
/// tables), in one transaction, and records `version` as the one it is
/// rebuilt by (`None`: keep the recorded one).
pub(super) async fn clear(
    log: &EventLog,
    projection: &Registered,
    version: Option<i64>,
) -> Result<(), StoreError> {
    let name = projection.name;
    with_pool!(log.db().writer(), pool => {
        let mut tx = pool.begin().await?;
        for sql in [
            "DELETE FROM projection_views WHERE projection = $1",
            "DELETE FROM documents WHERE projection = $1",
            "DELETE FROM projection_states WHERE projection = $1",
            "DELETE FROM projection_guards WHERE projection = $1",
        ] {
            sqlx::query(sql).bind(name).execute(&mut *tx).await?;
        }
        for table in projection.tables {
            sqlx::query(&format!("DELETE FROM {table}")).execute(&mut *tx).await?;
        }
        sqlx::query("DELETE FROM checkpoints WHERE consumer = $1")
            .bind(checkpoint_name(name))
            .execute(&mut *tx)
            .await?;
        if let Some(version) = version {
            sqlx::query(
                "INSERT INTO projection_versions (projection, version) VALUES ($1, $2) \
                 ON CONFLICT (projection) DO UPDATE SET version = excluded.version",
            )
            .bind(name)
            .bind(version)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
    });
    Ok(())
}

/// Empties every projection whose stored version differs from its
/// registered one (a missing record is version 1, from before versions
/// were recorded), so that its runner rebuilds it from the start of the
/// log. Returns their names. A projection that never ran (no record, no
/// checkpoint: a new database) just gets its version recorded.
pub async fn reset_changed(log: &EventLog) -> Result<Vec<&'static str>, StoreError> {
    let (stored, started): (Vec<(String, i64)>, Vec<(String,)>) = with_pool!(log.db().reader(), pool => {
        let stored = sqlx::query_as("SELECT projection, version FROM projection_versions")
            .fetch_all(pool)
            .await?;
        let started = sqlx::query_as("SELECT consumer FROM checkpoints")
            .fetch_all(pool)
            .await?;
        (stored, started)
    });
    let mut reset = Vec::new();
    for projection in &REGISTRY {
        let recorded = stored
            .iter()
            .find(|(name, _)| name == projection.name)
            .map(|(_, v)| *v);
        let ran = started
            .iter()
            .any(|(consumer,)| *consumer == checkpoint_name(projection.name));
        if recorded.is_none() && !ran {
            // Nothing was built, so nothing is rebuilt (or announced).
            clear(log, projection, Some(projection.version)).await?;
            continue;
        }
        let version = recorded.unwrap_or(1);
        if version != projection.version {
            tracing::info!(
                projection = projection.name,
                from = version,
                to = projection.version,
                "projection version changed; rebuilding it from the log"
            );
            clear(log, projection, Some(projection.version)).await?;
            reset.push(projection.name);
        }
    }
    Ok(reset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = names().collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), REGISTRY.len());
    }
}
