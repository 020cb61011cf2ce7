//! Agon's pure domain: aggregates decide, events record what was decided.
//!
//! This crate depends on no database, HTTP or message-bus crate, and reads no
//! clock and draws no random ids: time, ids and the acting user arrive in the
//! command or its [`CommandMeta`]. One module per aggregate joins it as the
//! later issues build them (`debate/`, ...).

pub mod account;
pub mod email_claim;
pub mod meta;
pub mod organization;

pub use meta::CommandMeta;
