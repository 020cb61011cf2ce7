//! The credentials open sockets stand on, so that
//! the push follows REST's access rules over time: when the log says a
//! session ended (logout, revoke-all, password change, disable, …), an API
//! key was revoked or a user was disabled, every socket standing on it is
//! closed (4401). (A ticket is checked against the credential when it is
//! redeemed, like any credential.)
//!
//! The hub sees every account event (it is a bus consumer) and calls
//! [`Ends::end`]. Registering a socket and ending a credential happen under
//! one lock, and ended credentials are remembered (bounded), so a socket
//! authenticated just before its session ended, but registered after the
//! hub saw the end, is refused rather than left open.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use agon_aggregates::account::AccountEvent;
use agon_projections::EventRecord;
use agon_projections::accounts::ACCOUNT_AGGREGATE;
use tokio_util::sync::CancellationToken;

use crate::auth::{Caller, Credential};
use crate::bus::ConsumerError;

/// Ended credentials remembered for sockets registering late; past it the
/// set starts afresh (REST's own check still refuses them at the upgrade).
const MAX_ENDED: usize = 65_536;

/// The names a caller's access ends under: its user, and its session or key.
fn names(caller: &Caller) -> Vec<String> {
    let mut names = vec![user(caller.user_id.as_str())];
    match &caller.credential {
        Credential::Session { session_id } => names.push(session(session_id.as_str())),
        Credential::ApiKey { key_id } => names.push(key(key_id)),
        Credential::StaticToken | Credential::ServiceHeaders => {}
    }
    names
}

fn user(id: &str) -> String {
    format!("user:{id}")
}

fn session(id: &str) -> String {
    format!("session:{id}")
}

fn key(id: &str) -> String {
    format!("key:{id}")
}

#[derive(Debug, Default)]
struct State {
    /// Open sockets by the names they end under.
    holders: HashMap<String, HashMap<u64, CancellationToken>>,
    ended: HashSet<String>,
}

/// The registry of credentials in use by sockets.
#[derive(Debug, Default)]
pub struct Ends {
    state: Mutex<State>,
    next: AtomicU64,
}

/// A socket's registration: `ended` fires when its credential ends, or
/// when its parent (the push's closing token) fires.
#[derive(Debug)]
pub struct Registration {
    id: u64,
    names: Vec<String>,
    pub ended: CancellationToken,
}

impl Ends {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a socket of `caller`, its token a child of `parent`; `None`
    /// when its credential already ended.
    pub fn register(&self, caller: &Caller, parent: &CancellationToken) -> Option<Registration> {
        let names = names(caller);
        let mut state = self.state();
        if names.iter().any(|name| state.ended.contains(name)) {
            return None;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let ended = parent.child_token();
        for name in &names {
            state
                .holders
                .entry(name.clone())
                .or_default()
                .insert(id, ended.clone());
        }
        Some(Registration { id, names, ended })
    }

    pub fn unregister(&self, registration: &Registration) {
        let mut state = self.state();
        for name in &registration.names {
            if let Some(holders) = state.holders.get_mut(name) {
                holders.remove(&registration.id);
                if holders.is_empty() {
                    state.holders.remove(name);
                }
            }
        }
    }

    /// Ends whatever an account event ends; other records pass.
    pub fn observe(&self, record: &EventRecord) -> Result<(), ConsumerError> {
        if record.aggregate_type != ACCOUNT_AGGREGATE {
            return Ok(());
        }
        let event = record
            .decode::<AccountEvent>()
            .map_err(|error| ConsumerError::undecodable(record, error))?;
        match event {
            AccountEvent::SessionRevoked { session_id, .. } => self.end(&session(&session_id)),
            AccountEvent::ApiKeyRevoked { key_id, .. } => self.end(&key(&key_id)),
            AccountEvent::UserDisabled { .. } => self.end(&user(&record.aggregate_id)),
            // Enabling a user again revives nothing (sessions and keys stay
            // ended), but lets new ones open sockets.
            AccountEvent::UserEnabled { .. } => {
                self.state().ended.remove(&user(&record.aggregate_id));
            }
            _ => {}
        }
        Ok(())
    }

    /// Closes every socket standing on `name` and drops its tickets.
    fn end(&self, name: &str) {
        let mut state = self.state();
        if state.ended.len() >= MAX_ENDED {
            state.ended.clear();
        }
        state.ended.insert(name.to_owned());
        for ended in state
            .holders
            .remove(name)
            .into_iter()
            .flat_map(|h| h.into_values())
        {
            ended.cancel();
        }
    }

    /// Whether `caller`'s credential is known here to have ended.
    pub fn has_ended(&self, caller: &Caller) -> bool {
        let state = self.state();
        names(caller).iter().any(|name| state.ended.contains(name))
    }
}
