//! Password and code checks are reserved before they are made (the
//! `BeginAttempt` command, an event on the account's stream), so that however
//! many guesses arrive at once, no more are checked than the lockout allows:
//! the stream's sequence serializes reservations across replicas, and a
//! per-account gate in this process queues them so that they do not all race
//! for the same sequence number and exhaust their retries.
//!
//! Known and unknown addresses must take equally long: an unknown one does
//! the same Argon2 work, and in place of a known one's store work (reads
//! and two appends) waits for a time drawn from what that work took in
//! recent failed sign-ins, so that both follow one distribution.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agon_aggregates::CommandMeta;
use agon_aggregates::account::{API_KEY_CREDENTIAL_PREFIX, Account, AccountCommand, AccountEvent};
use tokio::sync::Mutex as AsyncMutex;

use super::{Auth, AuthError, Caller, Credential};
use crate::store::{CommandError, Held};

/// How many recent known-address store times the unknown path draws from.
const PAD_SAMPLES: usize = 64;
/// The store time stood in for before any was measured (two appends).
const PAD_DEFAULT: Duration = Duration::from_millis(3);

/// One account's queue in this process, with its state as last seen.
pub(super) type Gate = Arc<AsyncMutex<Option<Held<Account>>>>;

/// The per-account gates of this process, and recent store times.
#[derive(Debug, Default)]
pub(super) struct Attempts {
    gates: Mutex<HashMap<String, Gate>>,
    appends: Mutex<VecDeque<Duration>>,
}

impl Attempts {
    /// The gate of `user_id`; hand it back with [`Attempts::release`].
    pub(super) fn gate(&self, user_id: &str) -> Gate {
        let mut gates = self.gates.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(gates.entry(user_id.to_owned()).or_default())
    }

    /// Forgets `user_id`'s gate once nobody else holds it.
    pub(super) fn release(&self, user_id: &str, gate: Gate) {
        drop(gate);
        let mut gates = self.gates.lock().unwrap_or_else(|e| e.into_inner());
        if gates
            .get(user_id)
            .is_some_and(|g| Arc::strong_count(g) == 1)
        {
            gates.remove(user_id);
        }
    }

    /// Remembers how long a known address's failed sign-in spent outside
    /// its Argon2 check.
    pub(super) fn record_store_time(&self, took: Duration) {
        let mut appends = self.appends.lock().unwrap_or_else(|e| e.into_inner());
        if appends.len() == PAD_SAMPLES {
            appends.pop_front();
        }
        appends.push_back(took);
    }

    /// A store time drawn from recent known-address failures.
    pub(super) fn pad(&self) -> Duration {
        let appends = self.appends.lock().unwrap_or_else(|e| e.into_inner());
        if appends.is_empty() {
            return PAD_DEFAULT;
        }
        let pick = getrandom::u32().unwrap_or_default() as usize % appends.len();
        appends.get(pick).copied().unwrap_or(PAD_DEFAULT)
    }
}

/// The credential whose re-authentications are counted: the session, or
/// the API key.
pub(super) fn credential_of(caller: &Caller) -> Result<String, AuthError> {
    match &caller.credential {
        Credential::Session { session_id } => Ok(session_id.to_string()),
        Credential::ApiKey { key_id } => Ok(format!("{API_KEY_CREDENTIAL_PREFIX}{key_id}")),
        Credential::StaticToken | Credential::ServiceHeaders => Err(AuthError::Forbidden(
            "This endpoint needs a user account's credential".to_owned(),
        )),
    }
}

impl Auth {
    /// Runs `command` on `user_id` through its gate, on the state the gate
    /// holds (reloaded after a concurrent write). A refusal on a state held
    /// from before is tried once more on the log's state: another command
    /// (a link, an admin's) may have changed what the refusal was about.
    pub(super) async fn gated(
        &self,
        gate: &Gate,
        user_id: &str,
        command: AccountCommand,
    ) -> Result<(Account, Vec<AccountEvent>), AuthError> {
        let mut slot = gate.lock().await;
        let mut held_before = slot.is_some();
        let done = loop {
            let held = match slot.as_mut() {
                Some(held) => held,
                None => slot.insert(self.log().load_held::<Account>(user_id).await?),
            };
            match self
                .log()
                .run(held, command.clone(), CommandMeta::by(user_id))
                .await
            {
                Ok(events) => break (held.state().clone(), events),
                Err(e) => {
                    if matches!(e, CommandError::Rejected(_)) {
                        *slot = None;
                        if std::mem::take(&mut held_before) {
                            continue;
                        }
                    }
                    return Err(e.into());
                }
            }
        };
        drop(slot);
        let (state, events) = done;
        Ok((self.revealed(state).await?, events))
    }

    /// Reserves a check on `user_id` (`credential` `None` for a sign-in);
    /// returns its id and the account as it stands.
    pub(super) async fn reserve(
        &self,
        gate: &Gate,
        user_id: &str,
        credential: Option<String>,
    ) -> Result<(String, Account), AuthError> {
        let attempt_id = uuid::Uuid::new_v4().to_string();
        let begin = AccountCommand::BeginAttempt {
            attempt_id: attempt_id.clone(),
            credential,
            at: self.clock().now(),
        };
        let (account, _) = self.gated(gate, user_id, begin).await?;
        Ok((attempt_id, account))
    }

    /// Ends check `attempt_id` if no outcome ended it (nothing is written then).
    pub(super) async fn end_attempt(&self, gate: &Gate, user_id: &str, attempt_id: &str) {
        let end = AccountCommand::EndAttempt {
            attempt_id: attempt_id.to_owned(),
            at: self.clock().now(),
        };
        if let Err(e) = self.gated(gate, user_id, end).await {
            // It lapses by itself after ATTEMPT_TIMEOUT_SECONDS.
            tracing::warn!(user_id, error = %e, "could not end a credential check");
        }
    }

    /// Records a wrong current password or code of `caller`; when it was the
    /// last one the credential may present, the credential ends and the
    /// answer says so.
    pub(super) async fn reauth_failed(
        &self,
        gate: &Gate,
        caller: &Caller,
        credential: String,
        attempt_id: &str,
        wrong: AuthError,
    ) -> AuthError {
        let failure = AccountCommand::RecordReauthFailure {
            credential,
            attempt: Some(attempt_id.to_owned()),
            at: self.clock().now(),
        };
        let events = match self.gated(gate, &caller.user_id, failure).await {
            Ok((_, events)) => events,
            Err(e) => return e,
        };
        let ended = events.iter().any(|e| {
            matches!(
                e,
                AccountEvent::SessionRevoked { .. } | AccountEvent::ApiKeyRevoked { .. }
            )
        });
        if !ended {
            return wrong;
        }
        tracing::warn!(user_id = %caller.user_id, "credential ended after repeated failed re-authentication");
        if let Err(e) = self.await_revocations(&events).await {
            return e;
        }
        AuthError::CredentialEnded
    }
}

/// Runs `work` as its own task, so that a client hanging up (which drops
/// the request's future) cannot leave a reserved check unsettled.
pub(super) async fn detached<T: Send + 'static>(
    work: impl Future<Output = Result<T, AuthError>> + Send + 'static,
) -> Result<T, AuthError> {
    crate::request::spawn_in_scope(work).await?
}

/// Stands in for an account stream when the address is unknown.
pub(super) const DECOY_ACCOUNT: &str = "00000000-0000-0000-0000-000000000000";
