//! Whether a projection is behind: it has an event to apply past its
//! checkpoint. Comparing the checkpoint with the feed head alone would call
//! idle projections `behind`, since they save their checkpoint over events
//! they ignore at most once a second (and not at all after the last batch).

use agon_projections::{Cursor, EventRecord};

use crate::store::{EventLog, StoreError};

/// Events read per query while looking past a checkpoint.
const PAGE: i64 = 500;
/// Most events looked at; a projection this far below the head counts as
/// behind without reading further.
const MOST: usize = 10_000;

/// Whether `name` would change anything with the events in
/// (`checkpoint`, `head`].
pub(super) async fn behind(
    log: &EventLog,
    name: &str,
    checkpoint: Cursor,
    head: Cursor,
) -> Result<bool, StoreError> {
    let mut after = checkpoint;
    let mut seen = 0;
    while after < head {
        let page = log.read_feed(after, PAGE).await?;
        let Some(last) = page.last() else {
            return Ok(false);
        };
        after = last.cursor();
        seen += page.len();
        for event in page {
            if event.cursor() > head {
                return Ok(false);
            }
            if applies(name, &event.into_record()?) {
                return Ok(true);
            }
        }
        if seen >= MOST {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The projections' own filters: what their runners do not skip.
fn applies(name: &str, event: &EventRecord) -> bool {
    // An unknown name: only the head can tell.
    crate::projection::registry::find(name).is_none_or(|p| (p.relevant)(event))
}
