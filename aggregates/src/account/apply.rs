//! How each event changes an account's state.

use chrono::{DateTime, Utc};

use super::events::{AccountEvent, SecondFactor};
use super::keys::DEFAULT_KEY_NAME;
use super::state::{
    API_KEY_CREDENTIAL_PREFIX, Account, ApiKeyState, ERASED, MfaState, PendingVerification,
    SessionState,
};

impl Account {
    /// Folds one event into the state.
    pub(super) fn apply_event(&mut self, event: AccountEvent) {
        use AccountEvent as E;
        match event {
            E::Registered {
                user_id,
                email,
                name,
                email_index,
                password_hash,
                role,
                email_verified,
                at,
            } => {
                self.user_id = user_id;
                self.email = email;
                self.name = name;
                self.email_index = email_index;
                self.password_hash = password_hash;
                self.role = role;
                self.email_verified = email_verified;
                self.created_at = Some(at);
            }
            E::VerificationIssued {
                token_hash,
                expires_at,
                ..
            } => {
                self.verification = Some(PendingVerification {
                    token_hash,
                    expires_at,
                });
            }
            E::EmailVerified { .. } => {
                self.email_verified = true;
                self.verification = None;
            }
            E::LoginFailed {
                failed_login_count,
                locked_until,
                ..
            } => {
                self.failed_login_count = failed_login_count;
                self.locked_until = locked_until;
            }
            E::AccountUnlocked { .. } => {
                self.failed_login_count = 0;
                self.locked_until = None;
            }
            E::LoginSucceeded {
                second_factor, at, ..
            }
            | E::ProviderLoginSucceeded {
                second_factor, at, ..
            } => {
                self.failed_login_count = 0;
                self.locked_until = None;
                self.last_login_at = Some(at);
                self.consume(second_factor);
            }
            E::SessionStarted {
                session_id,
                refresh_expires_at,
                at,
                ..
            } => {
                self.sessions.insert(
                    session_id,
                    SessionState {
                        started_at: at,
                        refresh_generation: 0,
                        refresh_expires_at,
                    },
                );
            }
            E::SessionRefreshed {
                session_id,
                generation,
                refresh_expires_at,
                ..
            } => {
                if let Some(session) = self.sessions.get_mut(&session_id) {
                    session.refresh_generation = generation;
                    session.refresh_expires_at = refresh_expires_at;
                }
            }
            E::SessionRevoked { session_id, .. } => {
                self.sessions.remove(&session_id);
                self.forget_credential(&session_id);
            }
            E::PasswordChanged { password_hash, .. } => {
                self.password_hash = password_hash;
                self.password_unset = false;
            }
            E::IdentityLinked {
                provider,
                subject_index,
                provisioned,
                ..
            } => {
                self.identities.insert(provider, subject_index);
                self.password_unset |= provisioned;
            }
            E::IdentityUnlinked { provider, .. } => {
                self.identities.remove(&provider);
            }
            E::ProviderLoginRefused { .. } => {}
            E::MfaSetupStarted { secret, .. } => {
                self.mfa = MfaState {
                    secret: Some(secret),
                    last_totp_step: self.mfa.last_totp_step,
                    ..MfaState::default()
                };
            }
            E::MfaEnabled {
                backup_code_hashes,
                totp_step,
                ..
            } => {
                self.mfa.enabled = true;
                self.mfa.backup_code_hashes = backup_code_hashes;
                self.mfa.last_totp_step = self.mfa.last_totp_step.max(totp_step);
            }
            E::MfaDisabled { .. } | E::MfaReset { .. } => {
                self.mfa = MfaState {
                    last_totp_step: self.mfa.last_totp_step,
                    ..MfaState::default()
                };
            }
            E::ApiKeyCreated {
                key_id,
                key_hash,
                at,
            } => self.add_key(key_id, key_hash, DEFAULT_KEY_NAME.to_owned(), at),
            E::NamedApiKeyCreated {
                key_id,
                name,
                key_hash,
                at,
            } => self.add_key(key_id, key_hash, name, at),
            E::ApiKeyRevoked { key_id, .. } => {
                self.api_keys.remove(&key_id);
                self.forget_credential(&format!("{API_KEY_CREDENTIAL_PREFIX}{key_id}"));
            }
            E::UserDisabled { .. } => self.disabled = true,
            E::UserEnabled { .. } => self.disabled = false,
            E::AttemptStarted {
                attempt_id,
                credential,
                at,
            } => self.apply_attempt_started(attempt_id, credential, at),
            E::AttemptEnded { attempt_id, .. } => {
                self.attempts.remove(&attempt_id);
            }
            E::ReauthFailed {
                credential,
                failures,
                ..
            } => {
                self.reauth_failures.insert(credential, failures);
            }
            E::MfaTokenSpent {
                token_id,
                expires_at,
                at,
            } => self.apply_step_token_spent(token_id, expires_at, at),
            E::RoleChanged { role, .. } => self.role = role,
            E::JoinedOrganization {
                org_id, org_role, ..
            } => {
                self.org_id = Some(org_id);
                self.org_role = Some(org_role);
            }
            E::Erased { .. } => {
                self.erased = true;
                self.email = ERASED.to_owned();
                self.name = ERASED.to_owned();
                self.password_hash.clear();
                self.mfa = MfaState::default();
                self.verification = None;
                self.identities.clear();
            }
        }
    }

    fn add_key(&mut self, key_id: String, key_hash: String, name: String, at: DateTime<Utc>) {
        let key = ApiKeyState {
            key_id: key_id.clone(),
            key_hash,
            name,
            created_at: at,
        };
        self.api_keys.insert(key_id, key);
    }

    /// A second factor works once: the TOTP step moves on, the backup code goes.
    fn consume(&mut self, factor: Option<SecondFactor>) {
        match factor {
            Some(SecondFactor::Totp { step }) => {
                self.mfa.last_totp_step = self.mfa.last_totp_step.max(step);
            }
            Some(SecondFactor::BackupCode { code_hash }) => {
                self.mfa
                    .backup_code_hashes
                    .retain(|hash| *hash != code_hash);
            }
            None => {}
        }
    }
}
