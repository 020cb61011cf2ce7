//! A minimal aggregate for exercising the store through cqrs-es.

use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Tally {
    pub total: i64,
}

#[derive(Debug)]
pub struct Add(pub i64);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TallyEvent {
    Added { n: i64 },
}

impl DomainEvent for TallyEvent {
    fn event_type(&self) -> String {
        "Added".to_owned()
    }
    fn event_version(&self) -> String {
        "1".to_owned()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("cannot add zero")]
pub struct AddZero;

impl Aggregate for Tally {
    const TYPE: &'static str = "tally";
    type Command = Add;
    type Event = TallyEvent;
    type Error = AddZero;
    type Services = ();

    async fn handle(
        &mut self,
        command: Add,
        _: &(),
        sink: &EventSink<Self>,
    ) -> Result<(), AddZero> {
        if command.0 == 0 {
            return Err(AddZero);
        }
        sink.write(TallyEvent::Added { n: command.0 }, self).await;
        Ok(())
    }

    fn apply(&mut self, event: TallyEvent) {
        match event {
            TallyEvent::Added { n } => self.total += n,
        }
    }
}
