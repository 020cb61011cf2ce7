//! Black-box and conformance tests: one binary, a module per area.
//!
//! Every store test runs twice, against SQLite and against a real PostgreSQL
//! (`AGON_TEST_DATABASE_URL`, started by `ops/test.sh`); bus tests run against
//! real nats-server processes (`AGON_TEST_NATS_SERVER`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod accounts;
mod audit;
mod auth;
mod authz;
mod backup_storage;
mod backups;
mod cli;
mod code_review;
mod connections;
mod consumers;
mod debate_as_of;
mod debates;
mod deltas;
mod docs;
mod dr;
mod erasure;
mod feed;
mod gallery;
mod hardening;
mod lockout;
mod mail_links;
mod nats;
mod nats_deploy;
mod outages;
mod outside;
mod platform;
mod projection_lag;
mod providers;
mod ratelimit;
mod receipts;
mod request_ids;
mod restore;
mod schemas;
mod scm;
mod serve;
mod signup;
mod sso;
#[cfg(feature = "saml")]
mod sso_saml;
mod store;
mod tables;
mod tamper;
mod ui;
mod verify;
mod webhooks;
mod ws;
