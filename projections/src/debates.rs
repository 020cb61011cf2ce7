//! The `debates` read model: one document per debate, folded by the same
//! function the aggregate uses, so a debate reads exactly as it was decided;
//! beside it the list's and the gallery's tables.

use agon_aggregates::debate::{Debate, DebateEvent};

use crate::debate_list::{COUNT_TABLE, LIST_TABLE, list_rows};
use crate::gallery::{GALLERY_TABLE, gallery_rows};
use crate::tables::Changes;
use crate::{DecodeError, DocumentProjection, EventRecord};

pub use crate::admin_stats::DEBATE_AGGREGATE;

/// Projection behind every debate read: detail, list, messages, consensus.
pub struct Debates;

impl DocumentProjection for Debates {
    const NAME: &'static str = "debates";
    type Doc = Debate;

    fn key(event: &EventRecord) -> Result<Option<String>, DecodeError> {
        Ok((event.aggregate_type == DEBATE_AGGREGATE).then(|| event.aggregate_id.clone()))
    }

    fn apply(doc: Option<Debate>, event: &EventRecord) -> Result<Option<Debate>, DecodeError> {
        let change: DebateEvent = event.decode()?;
        let mut debate = doc.unwrap_or_default();
        debate.apply_event(change);
        Ok(Some(debate))
    }

    fn owner(doc: &Debate) -> Option<String> {
        doc.created_by.clone()
    }

    fn state(doc: &Debate) -> Option<String> {
        Some(doc.status.as_str().to_owned())
    }

    const TABLES: &'static [&'static str] = &[LIST_TABLE, COUNT_TABLE, GALLERY_TABLE];

    fn rows(before: Option<&Debate>, after: Option<&Debate>, changes: &mut Changes) {
        if let Some(after) = after {
            list_rows(before, after, changes);
            gallery_rows(before, after, changes);
        }
    }

    /// Creation time, then id: RFC 3339 in UTC with fixed precision sorts as text.
    fn sort_key(doc: &Debate) -> Option<String> {
        doc.created_at.map(|at| {
            format!(
                "{}|{}",
                at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                doc.id
            )
        })
    }
}
