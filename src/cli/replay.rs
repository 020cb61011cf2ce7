//! `agon replay`: rebuilds read models from the log (all, or the one
//! named), for a projection whose rules changed or whose data was lost.

use crate::projection;
use crate::store::EventLog;

/// Rebuilds `only` (or every projection), printing how many events each
/// read; the error names an unknown projection or the store's failure.
pub async fn replay(log: &EventLog, only: Option<String>) -> Result<(), String> {
    let names: Vec<String> = match only {
        Some(name) => vec![name],
        None => projection::registry::names().map(str::to_owned).collect(),
    };
    for name in names {
        match projection::rebuild(log, &name).await {
            Ok(Some(events)) => println!("{name}: rebuilt from {events} events"),
            Ok(None) => {
                return Err(format!(
                    "unknown projection {name:?}; known: {}",
                    projection::registry::names().collect::<Vec<_>>().join(", ")
                ));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}
