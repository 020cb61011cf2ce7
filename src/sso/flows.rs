//! A sign-in under way at a provider, between the redirect there and the
//! callback: kept in the database as a one-use ticket under the state
//! token's hash, so any replica finishes what another started, a state works
//! once, and the PKCE verifier, nonce or SAML request id never travel through
//! the browser. A SAML assertion's id is claimed here too, so it is accepted
//! once whichever replica receives it.

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
    #[serde(flatten)]
    pub proof: Proof,
}

/// What ties the provider's answer to the request we sent.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Proof {
    /// OpenID Connect: the PKCE verifier and the ID token's nonce.
    Oidc {
        pkce_verifier: String,
        nonce: String,
    },
    /// SAML: the `ID` of our request, which the response's `InResponseTo`
    /// must name.
    Saml { saml_request_id: String },
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

/// Claims the id of a SAML assertion from `issuer`; false when it was
/// already accepted (a replay). Kept until `until` (Unix seconds), after
/// which the assertion is too old to pass anyway.
pub async fn claim_assertion(
    log: &EventLog,
    clock: &Clock,
    issuer: &str,
    assertion_id: &str,
    until: i64,
) -> Result<bool, SsoError> {
    let key = sha256_hex(&format!("saml-assertion:{issuer}\n{assertion_id}"));
    let now = clock.now().timestamp_millis();
    Ok(log
        .claim_ticket(&key, "saml-assertion", until.saturating_mul(1_000), now)
        .await?)
}
