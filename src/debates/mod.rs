//! The debates area: the application service the HTTP API and the `agon
//! debate` command share ([`Debates`]), and the rules a request must meet
//! before it becomes a command ([`rules`]).

mod cache;
mod gallery;
pub mod rules;
mod search;
mod service;

/// A page of the debates list as stored: items to serve unparsed, and the total.
pub use crate::projection::reads::DebatePage;
pub use cache::ReadCacheSettings;
pub use gallery::GalleryError;
pub use rules::{CreateError, DebateLimits, NewDebate, auto_agents, protocol_for};
pub use search::{SearchError, TopicSearch};
pub use service::{DebateOutcome, Debates};
