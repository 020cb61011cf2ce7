//! Agon's read models: pure functions from the ordered event feed to views.
//!
//! A projection never does IO. The service's projection runner (`src/projection`)
//! feeds it [`EventRecord`]s in feed order, skips any event it has already
//! applied (keyed by stream and sequence), and stores the view together with
//! the projection's checkpoint in one transaction, so a view can always be
//! rebuilt from zero by replaying the log.

pub mod admin_stats;
pub mod record;

pub use admin_stats::AdminStats;
pub use record::{Cursor, EventRecord};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A read model built from events.
pub trait Projection: Send + Sync + 'static {
    /// The name used for its checkpoint, its stored view and `agon replay --projection`.
    const NAME: &'static str;
    /// The view it maintains; stored as JSON.
    type View: Serialize + DeserializeOwned + Default + Send + Sync + 'static;

    /// Folds one event into the view. Called at most once per stream and sequence.
    fn apply(view: &mut Self::View, event: &EventRecord);
}
