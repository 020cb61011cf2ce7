//! A sign-in under way at a provider, between the redirect there and the
//! callback: kept in the database as a one-use ticket under the state
//! token's hash, so any replica finishes what another started, a state works
//! once, and the PKCE verifier and nonce never travel through the browser.

use serde::{Deserialize, Serialize};

use super::SsoError;
use crate::clock::Clock;
use crate::crypto::secrets::{random_token, sha256_hex};
use crate::store::EventLog;

/// What the callback of a flow does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Purpose {
    /// Sign in (or provision) whoever the provider vouches for.
    SignIn,
    /// Link the identity to the signed-in owner who asked.
    Link { user_id: String },
}

/// The flow as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pending {
    /// `extidp` or `sso`.
    pub provider: String,
    pub purpose: Purpose,
    /// Where the caller asked to land (host checked), else the default.
    pub redirect: Option<String>,
    pub pkce_verifier: String,
    pub nonce: String,
}

/// A new state token good for `ttl_seconds`: `<random>.<expiry in Unix
/// seconds>`. The expiry is read before the database, so an expired state
/// says so even after its row was swept, and altering it changes the hash,
/// which then finds nothing.
pub fn new_state(clock: &Clock, ttl_seconds: i64) -> String {
    let expires = clock.unix().saturating_add(ttl_seconds);
    format!("{}.{expires}", random_token(32))
}

/// Keeps `pending` under `state` until the state expires.
pub async fn keep(
    log: &EventLog,
    clock: &Clock,
    state: &str,
    pending: &Pending,
) -> Result<(), SsoError> {
    let expires = expiry(state).ok_or(SsoError::InvalidState)?;
    let holder = serde_json::to_string(pending).map_err(|e| SsoError::Flow(e.to_string()))?;
    let now = clock.now().timestamp_millis();
    log.keep_ticket(&hash(state), &holder, expires.saturating_mul(1_000), now)
        .await?;
    Ok(())
}

/// The flow `state` stands for, once.
pub async fn take(log: &EventLog, clock: &Clock, state: &str) -> Result<Pending, SsoError> {
    let expires = expiry(state).ok_or(SsoError::InvalidState)?;
    if expires <= clock.unix() {
        return Err(SsoError::StateExpired);
    }
    let now = clock.now().timestamp_millis();
    let holder = log
        .take_ticket(&hash(state), now)
        .await?
        .ok_or(SsoError::InvalidState)?;
    serde_json::from_str(&holder).map_err(|e| SsoError::Flow(e.to_string()))
}

fn expiry(state: &str) -> Option<i64> {
    state.rsplit_once('.')?.1.parse().ok()
}

fn hash(state: &str) -> String {
    sha256_hex(&format!("oauth-state:{state}"))
}
