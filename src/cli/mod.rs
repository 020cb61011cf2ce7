//! The `agon` command's subcommands, one module each, so that `main.rs`
//! only parses arguments and dispatches: `serve` ([`serve`]), `replay`
//! ([`replay`]), `debate` on the local store ([`debate`]) or against a
//! server ([`remote`]), and `verify`, `seal`, `keys public` ([`verify`]),
//! which open an existing store without building the service.

pub mod backup;
pub mod debate;
pub mod receipt;
pub mod remote;
pub mod replay;
pub mod serve;
pub mod verify;

pub use debate::{CliError, DebateRequest, run_local};
pub use remote::run_remote;
