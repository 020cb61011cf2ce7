//! The ScmDelivery aggregate: one stream per source-host delivery id, so a
//! redelivered webhook (the host retries, or someone presses "redeliver")
//! is recognised after any restart, and what each delivery led to is kept:
//! a review queued, a triage debate, a push or installation tracked.

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::Decide;

/// What the receiver did with a delivery, and what it noted of it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    pub delivery_id: String,
    /// The host's event name (`X-GitHub-Event`).
    pub event: String,
    pub action: Option<String>,
    pub repository: Option<String>,
    pub installation_id: Option<u64>,
    /// The pushed ref (`push` only).
    pub reference: Option<String>,
    /// The head commit: of the push, or of the pull request.
    pub head_sha: Option<String>,
    /// `review_queued`, `triage_queued`, `tracked`, `acknowledged` or `ignored`.
    pub outcome: String,
    pub review_id: Option<String>,
    pub debate_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScmDelivery {
    /// What the first delivery of this id was taken as.
    pub receipt: Option<Receipt>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ScmDeliveryCommand {
    Receive { receipt: Receipt, at: DateTime<Utc> },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ScmDeliveryEvent {
    DeliveryReceived {
        #[serde(flatten)]
        receipt: Receipt,
        at: DateTime<Utc>,
    },
}

impl DomainEvent for ScmDeliveryEvent {
    fn event_type(&self) -> String {
        "DeliveryReceived".to_owned()
    }

    fn event_version(&self) -> String {
        crate::wire::current_version(<ScmDelivery as Aggregate>::TYPE, &self.event_type())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ScmDeliveryError {
    #[error("this delivery was already received")]
    Duplicate,
}

crate::rejections!(ScmDeliveryError {
    Self::Duplicate => Conflict, "SCM_DELIVERY_DUPLICATE",
});

impl Decide for ScmDelivery {
    fn decide(
        &self,
        command: ScmDeliveryCommand,
    ) -> Result<Vec<ScmDeliveryEvent>, ScmDeliveryError> {
        let ScmDeliveryCommand::Receive { receipt, at } = command;
        if self.receipt.is_some() {
            return Err(ScmDeliveryError::Duplicate);
        }
        Ok(vec![ScmDeliveryEvent::DeliveryReceived { receipt, at }])
    }
}

impl Aggregate for ScmDelivery {
    const TYPE: &'static str = "scm_delivery";
    type Command = ScmDeliveryCommand;
    type Event = ScmDeliveryEvent;
    type Error = ScmDeliveryError;
    type Services = ();

    async fn handle(
        &mut self,
        command: ScmDeliveryCommand,
        _services: &(),
        sink: &EventSink<Self>,
    ) -> Result<(), ScmDeliveryError> {
        crate::record(self, command, sink).await
    }

    fn apply(&mut self, event: ScmDeliveryEvent) {
        let ScmDeliveryEvent::DeliveryReceived { receipt, .. } = event;
        self.receipt = Some(receipt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use cqrs_es::test::TestFramework;

    #[tokio::test]
    async fn a_delivery_is_received_once() {
        let at = Utc.with_ymd_and_hms(2027, 1, 15, 8, 0, 0).unwrap();
        let receipt = Receipt {
            delivery_id: "d1".to_owned(),
            event: "ping".to_owned(),
            outcome: "acknowledged".to_owned(),
            ..Receipt::default()
        };
        let received = ScmDeliveryEvent::DeliveryReceived {
            receipt: receipt.clone(),
            at,
        };
        TestFramework::<ScmDelivery>::with(())
            .given_no_previous_events()
            .when_async(ScmDeliveryCommand::Receive {
                receipt: receipt.clone(),
                at,
            })
            .await
            .then_expect_events(vec![received.clone()]);
        TestFramework::<ScmDelivery>::with(())
            .given(vec![received])
            .when_async(ScmDeliveryCommand::Receive { receipt, at })
            .await
            .then_expect_error(ScmDeliveryError::Duplicate);
    }
}
