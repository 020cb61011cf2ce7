//! Verification of one stream (an audit trail): its chain from the first
//! event, the events a reader recorded for it (the audit rows) still there,
//! then every seal, recomputing those that cover one of its events. The
//! recorded positions catch a cut tail, which leaves the chain whole.

use std::collections::HashSet;

use super::chains::{checked_hash, event_problem};
use super::row::ChainRow;
use super::{Check, Problem, Scope, VerifyReport};
use crate::store::chain::GENESIS;
use crate::store::{EventLog, StoreError};

impl EventLog {
    /// Checks the stream's chain, that each of `recorded` (position,
    /// sequence) is still in it, then the seals over all of them.
    pub async fn verify_stream(
        &self,
        trusted_key: &str,
        aggregate_type: &str,
        aggregate_id: &str,
        recorded: &[(i64, i64)],
    ) -> Result<VerifyReport, StoreError> {
        let mut report = VerifyReport::new(None);
        let events = self.load_stream(aggregate_type, aggregate_id, 0).await?;
        report.streams_checked = u64::from(!events.is_empty());
        let mut head = (0, GENESIS);
        for event in &events {
            report.events_checked += 1;
            let row = ChainRow::from(event);
            match checked_hash(&row, head.0, &head.1) {
                Ok(hash) => head = (event.sequence, hash),
                Err((check, fault)) => {
                    report.problem = Some(event_problem(&row, check, fault));
                    return Ok(report);
                }
            }
        }
        let mut positions: HashSet<i64> = events.iter().map(|e| e.position).collect();
        let stored: HashSet<(i64, i64)> = events.iter().map(|e| (e.position, e.sequence)).collect();
        if let Some(&(position, sequence)) = recorded.iter().find(|r| !stored.contains(r)) {
            report.problem = Some(Problem::Event {
                aggregate_type: aggregate_type.to_owned(),
                aggregate_id: aggregate_id.to_owned(),
                sequence,
                position,
                check: Check::SequenceGap,
                fault: "recorded in the audit log but no longer stored at this position".to_owned(),
            });
            return Ok(report);
        }
        positions.extend(recorded.iter().map(|(position, _)| *position));
        match self
            .verify_seals(
                trusted_key,
                self.seals().await?,
                &Scope::Positions(&positions),
                None,
                &mut report,
            )
            .await?
        {
            Ok(sealed_to) => {
                report.unsealed_events =
                    events.iter().filter(|e| e.cursor() > sealed_to).count() as u64;
            }
            Err(problem) => report.problem = Some(problem),
        }
        Ok(report)
    }
}
