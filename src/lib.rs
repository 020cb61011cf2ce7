//! Agon, a multi-agent debate service on an event-sourced CQRS core.
//!
//! Layout: [`store`] is the hash-chained event log (SQLite or PostgreSQL) and
//! its ordered feed; [`bus`] carries the feed to consumers (in-process or NATS
//! JetStream); [`projection`] runs the read models of `agon-projections`;
//! [`auth`] signs users in and decides what they may do;
//! [`http`] is the API face; [`app`] wires them from [`config`]. Pure domain
//! logic lives in the `agon-aggregates` crate and never sees this IO.

/// mimalloc rather than the system allocator: the service allocates many
/// small short-lived buffers (JSON, HTTP, SQL rows) from many threads, and
/// glibc's malloc took about a fifth of the CPU under the debate benchmark.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod agents;
pub mod app;
pub mod audit;
pub mod auth;
pub mod backup;
pub mod bus;
pub mod cli;
pub mod clock;
pub mod config;
pub mod crypto;
pub mod debates;
pub mod errors;
pub mod http;
pub mod mail;
pub mod markdown;
pub mod ops;
pub mod outside;
pub mod projection;
pub mod push;
pub mod receipts;
pub mod request;
pub mod review;
pub mod runner;
pub mod scm;
pub mod sso;
pub mod store;
pub mod views;
pub mod web;
pub mod webhooks;

#[cfg(test)]
mod layering_tests;
