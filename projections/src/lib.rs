//! Agon's read models: pure functions from the ordered event feed to views.
//!
//! A projection never does IO. The service's projection runner (`src/projection`)
//! feeds it [`EventRecord`]s in feed order, skips any event it has already
//! applied (keyed by stream and sequence), and stores the view together with
//! the projection's checkpoint in one transaction, so a view can always be
//! rebuilt from zero by replaying the log.

pub mod accounts;
pub mod admin_stats;
pub mod audit;
pub mod backups;
pub mod debate_list;
pub mod debates;
pub mod gallery;
pub mod leaderboard;
pub mod record;
pub mod reviews;
pub mod tables;
pub mod webhooks;

pub use accounts::{Accounts, ApiKeys, Organizations, Sessions};
pub use admin_stats::AdminStats;
pub use agon_aggregates::wire::DecodeError;
pub use audit::AuditLog;
pub use backups::{BackupCatalog, DrillHistory};
pub use debates::Debates;
pub use leaderboard::Leaderboard;
pub use record::{Cursor, EventRecord};
pub use reviews::Reviews;
pub use tables::{Changes, TableProjection};
pub use webhooks::WebhookSubscriptions;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A read model built from events.
pub trait Projection: Send + Sync + 'static {
    /// The name used for its checkpoint, its stored view and `agon replay --projection`.
    const NAME: &'static str;
    /// The view it maintains; stored as JSON.
    type View: Serialize + DeserializeOwned + Default + Send + Sync + 'static;

    /// Folds one event into the view. Called at most once per stream and
    /// sequence. An event it cannot decode is an error, never skipped: the
    /// runner stops there rather than let the view miss it.
    fn apply(view: &mut Self::View, event: &EventRecord) -> Result<(), DecodeError>;

    /// Whether `event` can change the view; batches with none skip the
    /// database (the view's own answer must stay `apply`'s).
    fn relevant(_event: &EventRecord) -> bool {
        true
    }
}

/// A read model kept as one JSON document per key: an account, a session.
///
/// Each event touches at most one document. The runner loads it, lets
/// [`DocumentProjection::apply`] fold the event in, and stores it with its
/// `owner` (to list a user's documents) and `lookup` (a second unique key).
pub trait DocumentProjection: Send + Sync + 'static {
    /// The name of its checkpoint, of its documents' `projection` column and
    /// of `agon replay --projection`.
    const NAME: &'static str;
    type Doc: Clone + Serialize + DeserializeOwned + Send + Sync + 'static;

    /// The key of the document `event` changes, if any; an error when
    /// telling needs the payload and it cannot be decoded.
    fn key(event: &EventRecord) -> Result<Option<String>, DecodeError>;

    /// Folds `event` into the document (`None` before its first event).
    /// An event it cannot decode is an error, never skipped.
    fn apply(doc: Option<Self::Doc>, event: &EventRecord)
    -> Result<Option<Self::Doc>, DecodeError>;

    /// The user the document belongs to.
    fn owner(doc: &Self::Doc) -> Option<String>;

    /// A second key the document can be found by.
    fn lookup(_doc: &Self::Doc) -> Option<String> {
        None
    }

    /// A status listings filter on.
    fn state(_doc: &Self::Doc) -> Option<String> {
        None
    }

    /// The order of listings (ascending text).
    fn sort_key(_doc: &Self::Doc) -> Option<String> {
        None
    }

    /// Tables the projection keeps beside its documents (emptied when it is
    /// rebuilt), written in the same transaction as the documents.
    const TABLES: &'static [&'static str] = &[];

    /// The rows of [`Self::TABLES`] that change when a batch takes a
    /// document from `before` to `after` (`None`: no document).
    fn rows(_before: Option<&Self::Doc>, _after: Option<&Self::Doc>, _changes: &mut Changes) {}
}
