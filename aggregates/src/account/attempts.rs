//! Reserving password and code checks before they are made, so that a burst
//! of guesses cannot outrun the lockout: the reservation is an event, and the
//! stream's sequence serializes reservations across replicas.

use chrono::{DateTime, Duration, Utc};

use super::error::AccountError;
use super::events::{AccountEvent, KeyRevokeReason, RevokeReason};
use super::state::{
    API_KEY_CREDENTIAL_PREFIX, ATTEMPT_TIMEOUT_SECONDS, Account, PendingAttempt, REAUTH_LIMIT,
    lock_seconds, next_lock_at,
};

impl Account {
    /// Checks of `credential` (`None`: sign-ins) still in flight at `now`.
    pub fn attempts_in_flight(&self, credential: Option<&str>, now: DateTime<Utc>) -> u32 {
        let count = self
            .attempts
            .values()
            .filter(|a| a.credential.as_deref() == credential && is_live(a, now))
            .count();
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    /// Whether MFA step token `token_id` already finished a sign-in.
    pub fn step_token_spent(&self, token_id: &str) -> bool {
        self.spent_step_tokens.contains_key(token_id)
    }

    pub(super) fn decide_begin_attempt(
        &self,
        attempt_id: String,
        credential: Option<String>,
        at: DateTime<Utc>,
    ) -> Result<Vec<AccountEvent>, AccountError> {
        self.ensure_exists()?;
        match &credential {
            None => {
                if let Some(remaining_seconds) = self.lock_remaining(at) {
                    return Err(AccountError::Locked { remaining_seconds });
                }
                // The checks in flight may all fail: once they would reach
                // the next lock, later ones wait for it like a real lock.
                let next = next_lock_at(self.failed_login_count);
                let in_flight = self.attempts_in_flight(None, at);
                if self.failed_login_count.saturating_add(in_flight) >= next {
                    return Err(AccountError::Locked {
                        remaining_seconds: lock_seconds(next).unwrap_or(1),
                    });
                }
            }
            Some(credential) => {
                self.ensure_active()?;
                // An ended credential's counters went with it: a request let
                // in before the end showed must not start its budget again.
                if !self.credential_live(credential) {
                    return Err(AccountError::SessionNotActive);
                }
                let failures = self.reauth_failures.get(credential).copied().unwrap_or(0);
                if failures >= REAUTH_LIMIT {
                    return Err(AccountError::CredentialExhausted);
                }
                let in_flight = self.attempts_in_flight(Some(credential), at);
                if failures.saturating_add(in_flight) >= REAUTH_LIMIT {
                    return Err(AccountError::AttemptsInFlight);
                }
            }
        }
        Ok(vec![AccountEvent::AttemptStarted {
            attempt_id,
            credential,
            at,
        }])
    }

    /// The event ending check `attempt`, if it is in flight.
    pub(super) fn settle(
        &self,
        attempt: Option<&String>,
        at: DateTime<Utc>,
    ) -> Option<AccountEvent> {
        attempt
            .filter(|id| self.attempts.contains_key(id.as_str()))
            .map(|id| AccountEvent::AttemptEnded {
                attempt_id: id.clone(),
                at,
            })
    }

    pub(super) fn decide_reauth_failure(
        &self,
        credential: String,
        attempt: Option<&String>,
        at: DateTime<Utc>,
    ) -> Result<Vec<AccountEvent>, AccountError> {
        self.ensure_exists()?;
        let failures = self
            .reauth_failures
            .get(&credential)
            .copied()
            .unwrap_or(0)
            .saturating_add(1);
        let mut events: Vec<_> = self.settle(attempt, at).into_iter().collect();
        let end = failures >= REAUTH_LIMIT;
        let ending = end.then(|| self.credential_end(&credential, at)).flatten();
        events.push(AccountEvent::ReauthFailed {
            credential,
            failures,
            at,
        });
        events.extend(ending);
        Ok(events)
    }

    /// Whether `credential` (a session id, or `api_key:<key id>`) is live.
    fn credential_live(&self, credential: &str) -> bool {
        match credential.strip_prefix(API_KEY_CREDENTIAL_PREFIX) {
            Some(key_id) => self.api_keys.contains_key(key_id),
            None => self.sessions.contains_key(credential),
        }
    }

    /// The event ending `credential` (a session or an API key), if it is live.
    fn credential_end(&self, credential: &str, at: DateTime<Utc>) -> Option<AccountEvent> {
        if self.sessions.contains_key(credential) {
            return Some(AccountEvent::SessionRevoked {
                session_id: credential.to_owned(),
                reason: RevokeReason::ReauthFailed,
                at,
            });
        }
        let key_id = credential.strip_prefix(API_KEY_CREDENTIAL_PREFIX)?;
        self.key_revocation(key_id, KeyRevokeReason::ReauthFailed, at)
    }

    pub(super) fn apply_attempt_started(
        &mut self,
        attempt_id: String,
        credential: Option<String>,
        at: DateTime<Utc>,
    ) {
        // Checks whose process died never end: forget them once stale.
        self.attempts.retain(|_, a| is_live(a, at));
        self.attempts.insert(
            attempt_id,
            PendingAttempt {
                credential,
                started_at: at,
            },
        );
    }

    pub(super) fn apply_step_token_spent(
        &mut self,
        token_id: String,
        expires_at: DateTime<Utc>,
        at: DateTime<Utc>,
    ) {
        // An expired token is refused by its signature check anyway.
        self.spent_step_tokens.retain(|_, expiry| *expiry > at);
        self.spent_step_tokens.insert(token_id, expires_at);
    }

    /// A credential that ended takes its counters with it.
    pub(super) fn forget_credential(&mut self, credential: &str) {
        self.reauth_failures.remove(credential);
        self.attempts
            .retain(|_, a| a.credential.as_deref() != Some(credential));
    }
}

fn is_live(attempt: &PendingAttempt, now: DateTime<Utc>) -> bool {
    attempt.started_at + Duration::seconds(ATTEMPT_TIMEOUT_SECONDS) > now
}
