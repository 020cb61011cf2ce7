//! The Account aggregate: decides sign-in, lockout, sessions, MFA and keys.

use chrono::Duration;
use cqrs_es::Aggregate;
use cqrs_es::event_sink::EventSink;

use super::commands::AccountCommand;
use super::error::AccountError;
use super::events::{AccountEvent, KeyRevokeReason, LoginMethod, RevokeReason, SecondFactor};
use super::state::{Account, lock_seconds};
use crate::Decide;

impl Decide for Account {
    fn decide(&self, command: AccountCommand) -> Result<Vec<AccountEvent>, AccountError> {
        use AccountCommand as C;
        use AccountEvent as E;
        let events = match command {
            C::Register {
                user_id,
                email,
                name,
                email_index,
                password_hash,
                role,
                email_verified,
                identity,
                at,
            } => {
                if self.created_at.is_some() {
                    return Err(AccountError::AlreadyRegistered);
                }
                let mut events = vec![E::Registered {
                    user_id,
                    email,
                    name,
                    email_index: Some(email_index),
                    password_hash,
                    role,
                    email_verified,
                    at,
                }];
                events.extend(identity.map(|identity| E::IdentityLinked {
                    provider: identity.provider,
                    subject_index: identity.subject_index,
                    provisioned: true,
                    at,
                }));
                events
            }
            C::IssueVerification {
                token_hash,
                expires_at,
                at,
            } => {
                self.ensure_exists()?;
                if self.email_verified {
                    return Err(AccountError::AlreadyVerified);
                }
                vec![E::VerificationIssued {
                    token_hash,
                    expires_at,
                    at,
                }]
            }
            C::VerifyEmail { token_hash, at } => {
                self.ensure_exists()?;
                if self.email_verified {
                    return Err(AccountError::AlreadyVerified);
                }
                let pending = self
                    .verification
                    .as_ref()
                    .filter(|pending| pending.token_hash == token_hash)
                    .ok_or(AccountError::InvalidVerificationToken)?;
                if pending.expires_at <= at {
                    return Err(AccountError::VerificationExpired);
                }
                vec![E::EmailVerified { at }]
            }
            C::BeginAttempt {
                attempt_id,
                credential,
                at,
            } => self.decide_begin_attempt(attempt_id, credential, at)?,
            C::EndAttempt { attempt_id, at } => {
                self.settle(Some(&attempt_id), at).into_iter().collect()
            }
            C::RecordLoginFailure {
                reason,
                attempt,
                at,
            } => {
                self.ensure_exists()?;
                let mut events: Vec<_> = self.settle(attempt.as_ref(), at).into_iter().collect();
                // A reserved check was made: its failure counts even if a
                // stale reservation let a lock begin meanwhile.
                if events.is_empty()
                    && let Some(remaining_seconds) = self.lock_remaining(at)
                {
                    return Err(AccountError::Locked { remaining_seconds });
                }
                let failed_login_count = self.failed_login_count.saturating_add(1);
                let locked_until =
                    lock_seconds(failed_login_count).map(|seconds| at + Duration::seconds(seconds));
                events.push(E::LoginFailed {
                    reason,
                    failed_login_count,
                    locked_until,
                    at,
                });
                events
            }
            C::RecordReauthFailure {
                credential,
                attempt,
                at,
            } => self.decide_reauth_failure(credential, attempt.as_ref(), at)?,
            C::Login {
                session_id,
                device,
                second_factor,
                step_token,
                attempt,
                max_sessions,
                refresh_expires_at,
                via,
                at,
            } => {
                self.ensure_usable(at)?;
                if let Some(identity) = &via {
                    self.ensure_linked(identity)?;
                }
                if let Some(token) = &step_token
                    && self.step_token_spent(&token.token_id)
                {
                    return Err(AccountError::StepTokenSpent);
                }
                let method = match (&second_factor, self.mfa.enabled) {
                    (_, false) => LoginMethod::Password,
                    (None, true) => return Err(AccountError::MfaRequired),
                    (Some(SecondFactor::Totp { .. }), true) => LoginMethod::PasswordAndTotp,
                    (Some(SecondFactor::BackupCode { .. }), true) => {
                        LoginMethod::PasswordAndBackupCode
                    }
                };
                let second_factor = second_factor.filter(|_| self.mfa.enabled);
                if let Some(factor) = &second_factor {
                    self.check_second_factor(factor)?;
                }
                let mut events: Vec<_> = self.settle(attempt.as_ref(), at).into_iter().collect();
                events.push(match via {
                    None => E::LoginSucceeded {
                        session_id: session_id.clone(),
                        method,
                        second_factor,
                        at,
                    },
                    Some(identity) => E::ProviderLoginSucceeded {
                        session_id: session_id.clone(),
                        provider: identity.provider,
                        subject_index: identity.subject_index,
                        second_factor,
                        at,
                    },
                });
                events.extend(step_token.map(|token| E::MfaTokenSpent {
                    token_id: token.token_id,
                    expires_at: token.expires_at,
                    at,
                }));
                let excess = (self.sessions.len() + 1).saturating_sub(max_sessions.max(1));
                events.extend(
                    self.sessions_by_age()
                        .into_iter()
                        .take(excess)
                        .map(|session_id| E::SessionRevoked {
                            session_id,
                            reason: RevokeReason::Evicted,
                            at,
                        }),
                );
                events.push(E::SessionStarted {
                    session_id,
                    device,
                    refresh_expires_at,
                    at,
                });
                events
            }
            C::Refresh {
                session_id,
                generation,
                refresh_expires_at,
                at,
            } => {
                self.ensure_active()?;
                let session = self
                    .sessions
                    .get(&session_id)
                    .ok_or(AccountError::SessionNotActive)?;
                if generation < session.refresh_generation {
                    // A rotated token came back: whoever holds it, end the session.
                    vec![E::SessionRevoked {
                        session_id,
                        reason: RevokeReason::RefreshReuse,
                        at,
                    }]
                } else if generation > session.refresh_generation
                    || session.refresh_expires_at <= at
                {
                    return Err(AccountError::SessionNotActive);
                } else {
                    vec![E::SessionRefreshed {
                        session_id,
                        generation: generation + 1,
                        refresh_expires_at,
                        at,
                    }]
                }
            }
            C::EndSession {
                session_id,
                reason,
                at,
            } => {
                self.ensure_exists()?;
                if !self.sessions.contains_key(&session_id) {
                    return Err(AccountError::SessionNotActive);
                }
                vec![E::SessionRevoked {
                    session_id,
                    reason,
                    at,
                }]
            }
            C::RevokeOtherSessions { keep, at } => {
                self.ensure_exists()?;
                self.revocations(Some(&keep), RevokeReason::OthersRevoked, at)
            }
            C::RevokeAll { at, .. } => {
                self.ensure_exists()?;
                let mut events = self.revocations(None, RevokeReason::AdminRevokeAll, at);
                events.extend(self.key_revocations(KeyRevokeReason::AdminRevokeAll, at));
                events
            }
            C::Unlock { by, at } => {
                self.ensure_exists()?;
                if self.failed_login_count == 0 && self.locked_until.is_none() {
                    Vec::new()
                } else {
                    vec![E::AccountUnlocked { by, at }]
                }
            }
            C::ChangePassword {
                password_hash,
                attempt,
                at,
            } => {
                self.ensure_active()?;
                let mut events: Vec<_> = self.settle(attempt.as_ref(), at).into_iter().collect();
                events.push(E::PasswordChanged { password_hash, at });
                events.extend(self.revocations(None, RevokeReason::PasswordChanged, at));
                events
            }
            C::BeginMfaSetup { secret, at } => {
                self.ensure_active()?;
                if self.mfa.enabled {
                    return Err(AccountError::MfaAlreadyEnabled);
                }
                vec![E::MfaSetupStarted { secret, at }]
            }
            C::EnableMfa {
                totp_step,
                backup_code_hashes,
                attempt,
                at,
            } => {
                self.ensure_active()?;
                if self.mfa.enabled {
                    return Err(AccountError::MfaAlreadyEnabled);
                }
                if self.mfa.secret.is_none() {
                    return Err(AccountError::MfaSetupNotStarted);
                }
                let mut events: Vec<_> = self.settle(attempt.as_ref(), at).into_iter().collect();
                events.push(E::MfaEnabled {
                    backup_code_hashes,
                    totp_step,
                    at,
                });
                events
            }
            C::DisableMfa {
                second_factor,
                attempt,
                at,
            } => {
                self.ensure_active()?;
                if !self.mfa.enabled {
                    return Err(AccountError::MfaNotEnabled);
                }
                self.check_second_factor(&second_factor)?;
                let mut events: Vec<_> = self.settle(attempt.as_ref(), at).into_iter().collect();
                events.push(E::MfaDisabled { at });
                events
            }
            C::ResetMfa { by, at } => {
                self.ensure_exists()?;
                if !self.mfa.enabled && self.mfa.secret.is_none() {
                    return Err(AccountError::MfaNotEnabled);
                }
                vec![E::MfaReset { by, at }]
            }
            C::CreateApiKey {
                key_id,
                key_hash,
                max_keys,
                at,
            } => self.decide_create_default_key(key_id, key_hash, max_keys, at)?,
            C::CreateNamedApiKey {
                key_id,
                name,
                key_hash,
                max_keys,
                at,
            } => self.decide_create_named_key(key_id, &name, key_hash, max_keys, at)?,
            C::RevokeApiKey { at } => {
                let key_id = self
                    .default_key()
                    .ok_or(AccountError::NoApiKey)?
                    .key_id
                    .clone();
                self.decide_revoke_key(&key_id, at)?
            }
            C::RevokeApiKeyById { key_id, at } => self.decide_revoke_key(&key_id, at)?,
            C::Disable { by, at } => {
                self.ensure_exists()?;
                if self.disabled {
                    return Ok(Vec::new());
                }
                let mut events = vec![E::UserDisabled { by, at }];
                events.extend(self.revocations(None, RevokeReason::Disabled, at));
                events.extend(self.key_revocations(KeyRevokeReason::Disabled, at));
                events
            }
            C::Erase { by, at } => {
                if self.erased {
                    return Ok(Vec::new());
                }
                self.ensure_exists()?;
                let mut events = self.revocations(None, RevokeReason::Deleted, at);
                events.extend(self.key_revocations(KeyRevokeReason::Revoked, at));
                events.push(E::Erased { by, at });
                events
            }
            C::Enable { by, at } => {
                self.ensure_exists()?;
                if self.disabled {
                    vec![E::UserEnabled { by, at }]
                } else {
                    Vec::new()
                }
            }
            C::ChangeRole { role, by, at } => {
                self.ensure_exists()?;
                if role == self.role {
                    Vec::new()
                } else {
                    vec![E::RoleChanged { role, by, at }]
                }
            }
            C::LinkIdentity { identity, at } => self.decide_link(identity, at)?,
            C::UnlinkIdentity { provider, at } => self.decide_unlink(&provider, at)?,
            C::RefuseProviderLogin {
                identity,
                reason,
                at,
            } => {
                self.ensure_exists()?;
                vec![E::ProviderLoginRefused {
                    provider: identity.provider,
                    subject_index: identity.subject_index,
                    reason,
                    at,
                }]
            }
            C::JoinOrganization {
                org_id,
                org_role,
                at,
            } => {
                self.ensure_exists()?;
                if self.org_id.is_some() {
                    return Err(AccountError::AlreadyInOrganization);
                }
                vec![E::JoinedOrganization {
                    org_id,
                    org_role,
                    at,
                }]
            }
        };
        Ok(events)
    }
}

impl Aggregate for Account {
    const TYPE: &'static str = "account";
    type Command = AccountCommand;
    type Event = AccountEvent;
    type Error = AccountError;
    type Services = ();

    async fn handle(
        &mut self,
        command: AccountCommand,
        _services: &(),
        sink: &EventSink<Self>,
    ) -> Result<(), AccountError> {
        crate::record(self, command, sink).await
    }

    fn apply(&mut self, event: AccountEvent) {
        self.apply_event(event);
    }
}
