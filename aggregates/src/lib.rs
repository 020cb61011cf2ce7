//! Agon's pure domain: aggregates decide, events record what was decided.
//!
//! This crate depends on no database, HTTP or message-bus crate, and reads no
//! clock and draws no random ids: time, ids and the acting user arrive in the
//! command or its [`CommandMeta`]. One module per aggregate joins it as the
//! later issues build them.

pub mod account;
pub mod backup;
pub mod backup_drill;
pub mod debate;
pub mod email_claim;
pub mod identity_claim;
pub mod ids;
pub mod meta;
pub mod money;
pub mod organization;
pub mod receipt;
pub mod rejection;
pub mod review;
pub mod webhook;
pub mod wire;

pub use meta::CommandMeta;
pub use rejection::{Refusal, Rejection, RejectionKind};

/// An aggregate that decides a command into events without touching itself;
/// its `Aggregate::handle` is then [`record`], so that every aggregate turns
/// decisions into applied events the same way.
pub trait Decide: cqrs_es::Aggregate {
    fn decide(&self, command: Self::Command) -> Result<Vec<Self::Event>, Self::Error>;
}

/// Decides `command` and writes each event to `sink` (which applies it).
pub async fn record<A: Decide>(
    aggregate: &mut A,
    command: A::Command,
    sink: &cqrs_es::event_sink::EventSink<A>,
) -> Result<(), A::Error> {
    for event in aggregate.decide(command)? {
        sink.write(event, aggregate).await;
    }
    Ok(())
}
