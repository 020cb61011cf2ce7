//! Refresh, sign-out, the caller's own sessions and password change.

use agon_aggregates::account::{AccountCommand, AccountEvent, Password, RevokeReason};
use agon_projections::Sessions;
use agon_projections::accounts::SessionView;
use chrono::{DateTime, Duration, Utc};

use super::attempts::{Gate, credential_of, detached};
use super::tokens::TokenPair;
use super::{Auth, AuthError, Caller};
use crate::crypto::jwt::TokenType;

impl Auth {
    /// Exchanges a refresh token for a new pair; a reused one ends its session.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn refresh(&self, refresh_token: &str) -> Result<TokenPair, AuthError> {
        let claims = self.check_token(refresh_token, TokenType::Refresh)?;
        let generation = claims.generation.ok_or(AuthError::InvalidToken)?;
        self.check_activity(&claims.sub, &claims.jti).await?;
        let now = self.clock().now();
        let refresh = AccountCommand::Refresh {
            session_id: claims.jti.clone(),
            generation,
            refresh_expires_at: self.refresh_expiry(now),
            at: now,
        };
        // A disabled or erased account's sessions were revoked with it: its
        // refresh tokens are simply invalid.
        let (account, events) = match self.command(&claims.sub, refresh, &claims.sub).await {
            Err(AuthError::Disabled | AuthError::NotFound { .. }) => {
                return Err(AuthError::InvalidToken);
            }
            other => other?,
        };
        let Some(session) = account.sessions.get(&claims.jti) else {
            self.await_revocations(&events).await?;
            tracing::warn!(user_id = %claims.sub, session_id = %claims.jti, "refresh token reused; session revoked");
            return Err(AuthError::InvalidToken);
        };
        self.issue_pair(&account, &claims.jti, session.refresh_generation)
    }

    /// Ends the caller's own session (or another of the caller's sessions).
    pub async fn end_session(
        &self,
        caller: &Caller,
        session_id: &str,
        reason: RevokeReason,
    ) -> Result<(), AuthError> {
        let account = self.account(&caller.user_id).await?;
        if !account.sessions.contains_key(session_id) {
            return Err(AuthError::NotFound {
                resource_type: "session",
                resource_id: session_id.to_owned(),
            });
        }
        let end = AccountCommand::EndSession {
            session_id: session_id.to_owned(),
            reason,
            at: self.clock().now(),
        };
        let (_, events) = self.command(&caller.user_id, end, &caller.user_id).await?;
        self.await_revocations(&events).await
    }

    /// Ends every session of the caller but the current one; returns how many.
    pub async fn end_other_sessions(&self, caller: &Caller) -> Result<usize, AuthError> {
        let keep = caller.session_id().unwrap_or_default().to_owned();
        let revoke = AccountCommand::RevokeOtherSessions {
            keep,
            at: self.clock().now(),
        };
        let (_, events) = self
            .command(&caller.user_id, revoke, &caller.user_id)
            .await?;
        self.await_revocations(&events).await?;
        Ok(events.len())
    }

    /// The caller's open sessions, newest first.
    pub async fn sessions(
        &self,
        user_id: &str,
    ) -> Result<Vec<(SessionView, Option<i64>)>, AuthError> {
        let mut open: Vec<SessionView> = self
            .docs()
            .owned_by::<Sessions>(user_id)
            .await?
            .into_iter()
            .filter(|s| s.revoked_at.is_none())
            .collect();
        open.sort_by_key(|s| std::cmp::Reverse(s.created_at));
        let mut listed = Vec::with_capacity(open.len());
        for session in open {
            let last = self.last_activity(&session.session_id).await?;
            listed.push((session, last));
        }
        Ok(listed)
    }

    /// Changes the caller's password after checking the current one; every
    /// session ends, this one included. Returns how many ended. The check
    /// is counted against the caller's credential, not the account's lock:
    /// someone else's failed sign-ins do not stop the owner, and a stolen
    /// session gets [`agon_aggregates::account::REAUTH_LIMIT`] guesses before it ends.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn change_password(
        &self,
        caller: &Caller,
        current: &str,
        new: &str,
    ) -> Result<usize, AuthError> {
        Password::parse(new)?;
        let credential = credential_of(caller)?;
        let (auth, caller) = (self.clone(), caller.clone());
        let (current, new) = (current.to_owned(), new.to_owned());
        detached(async move {
            let gate = auth.inner.attempts.gate(&caller.user_id);
            let result = auth
                .change_password_gated(&gate, &caller, credential, current, new)
                .await;
            auth.inner.attempts.release(&caller.user_id, gate);
            result
        })
        .await
    }

    async fn change_password_gated(
        &self,
        gate: &Gate,
        caller: &Caller,
        credential: String,
        current: String,
        new: String,
    ) -> Result<usize, AuthError> {
        let user_id = &caller.user_id;
        let (attempt_id, account) = self
            .reserve(gate, user_id, Some(credential.clone()))
            .await?;
        let same = current == new;
        let matches = self
            .hasher()
            .verify(current, Some(account.password_hash.clone()))
            .await;
        if !matches {
            let wrong = AuthError::Forbidden("Current password is incorrect".to_owned());
            return Err(self
                .reauth_failed(gate, caller, credential, &attempt_id, wrong)
                .await);
        }
        if same {
            self.end_attempt(gate, user_id, &attempt_id).await;
            return Err(AuthError::Invalid(
                "New password must differ from the current one".to_owned(),
            ));
        }
        let hashed = self.hasher().hash(new).await;
        let password_hash = match hashed {
            Ok(hash) => hash,
            Err(e) => {
                self.end_attempt(gate, user_id, &attempt_id).await;
                return Err(e.into());
            }
        };
        let change = AccountCommand::ChangePassword {
            password_hash,
            attempt: Some(attempt_id.clone()),
            at: self.clock().now(),
        };
        let events = match self.gated(gate, user_id, change).await {
            Ok((_, events)) => events,
            Err(e) => {
                self.end_attempt(gate, user_id, &attempt_id).await;
                return Err(e);
            }
        };
        self.await_revocations(&events).await?;
        Ok(events
            .iter()
            .filter(|e| matches!(e, AccountEvent::SessionRevoked { .. }))
            .count())
    }
}

impl Auth {
    /// When a refresh token issued at `now` stops working.
    pub(super) fn refresh_expiry(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        now + Duration::from_std(self.settings().refresh_ttl).unwrap_or(Duration::MAX)
    }
}
