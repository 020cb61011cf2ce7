//! The Receipt aggregate: what happens to a debate's decision receipt beyond
//! what the debate's own events say, one stream per debate id. Today that is
//! only its expiry under the retention policy: the receipt is no longer
//! served, while the events it was built from stay in the log, so the log
//! (and every seal) stays verifiable.

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::Decide;

/// The aggregate type of receipt streams (one per debate id; only expiry is recorded).
pub const RECEIPT: &str = "receipt";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    pub expired_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ReceiptCommand {
    /// The retention period of the debate's receipt has passed.
    Expire {
        receipt_id: String,
        debate_id: String,
        retention_days: u32,
        finished_at: DateTime<Utc>,
        at: DateTime<Utc>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ReceiptEvent {
    ReceiptExpired {
        receipt_id: String,
        debate_id: String,
        retention_days: u32,
        /// When the debate finished.
        finished_at: DateTime<Utc>,
        at: DateTime<Utc>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReceiptError {
    #[error("the retention period of this receipt has not passed")]
    NotDue,
}

impl Decide for Receipt {
    fn decide(&self, command: ReceiptCommand) -> Result<Vec<ReceiptEvent>, ReceiptError> {
        let ReceiptCommand::Expire {
            receipt_id,
            debate_id,
            retention_days,
            finished_at,
            at,
        } = command;
        if self.expired_at.is_some() {
            return Ok(Vec::new());
        }
        if finished_at + chrono::Duration::days(i64::from(retention_days)) > at {
            return Err(ReceiptError::NotDue);
        }
        Ok(vec![ReceiptEvent::ReceiptExpired {
            receipt_id,
            debate_id,
            retention_days,
            finished_at,
            at,
        }])
    }
}

impl Aggregate for Receipt {
    const TYPE: &'static str = RECEIPT;
    type Command = ReceiptCommand;
    type Event = ReceiptEvent;
    type Error = ReceiptError;
    type Services = ();

    async fn handle(
        &mut self,
        command: ReceiptCommand,
        _services: &(),
        sink: &EventSink<Self>,
    ) -> Result<(), ReceiptError> {
        crate::record(self, command, sink).await
    }

    fn apply(&mut self, event: ReceiptEvent) {
        let ReceiptEvent::ReceiptExpired { at, .. } = event;
        self.expired_at = Some(at);
    }
}

impl DomainEvent for ReceiptEvent {
    fn event_type(&self) -> String {
        "ReceiptExpired".to_owned()
    }

    fn event_version(&self) -> String {
        crate::wire::current_version(Receipt::TYPE, &self.event_type())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn expire(days: u32, finished: DateTime<Utc>, at: DateTime<Utc>) -> ReceiptCommand {
        ReceiptCommand::Expire {
            receipt_id: "rcpt_d".into(),
            debate_id: "d".into(),
            retention_days: days,
            finished_at: finished,
            at,
        }
    }

    #[test]
    fn a_receipt_expires_once_after_its_retention() {
        let finished = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let early = finished + chrono::Duration::days(9);
        let due = finished + chrono::Duration::days(10);
        let mut receipt = Receipt::default();
        assert_eq!(
            receipt.decide(expire(10, finished, early)),
            Err(ReceiptError::NotDue)
        );
        let events = receipt.decide(expire(10, finished, due)).unwrap();
        assert_eq!(events.len(), 1);
        receipt.apply(events[0].clone());
        assert_eq!(receipt.expired_at, Some(due));
        assert_eq!(receipt.decide(expire(10, finished, due)), Ok(Vec::new()));
    }
}
