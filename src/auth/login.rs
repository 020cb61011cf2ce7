//! Registration and sign-in (with its second factor).

use std::time::Instant;

use agon_aggregates::account::{
    Account, AccountCommand, Device, DisplayName, Email, FailureReason, MAX_EMAIL_CHARS, Password,
    ProviderIdentity, Role, SecondFactor, StepToken, ValueError,
};
use agon_aggregates::email_claim::EmailClaimCommand;
use agon_aggregates::{CommandMeta, email_claim::EmailClaim};
use agon_projections::Sessions;
use chrono::DateTime;

use super::attempts::{DECOY_ACCOUNT, Gate, detached};
use super::tokens::TokenPair;
use super::{Auth, AuthError};
use crate::crypto::jwt::TokenType;
use crate::crypto::secrets::{normalize_backup_code, sha256_hex};
use crate::crypto::totp;

/// What a sign-in produced: tokens, or the demand for a second factor.
#[derive(Debug)]
pub enum LoginOutcome {
    Signed {
        tokens: TokenPair,
        account: Box<Account>,
    },
    SecondFactorRequired {
        mfa_token: String,
    },
}

/// The fields of a registration as sent.
#[derive(Debug)]
pub struct NewAccount<'a> {
    pub email: &'a str,
    pub password: &'a str,
    pub name: &'a str,
}

/// A registration whose fields meet the rules.
#[derive(Debug)]
pub struct Registration {
    pub email: Email,
    pub password: Password,
    pub name: DisplayName,
}

impl NewAccount<'_> {
    /// The registration, or the first rule it breaks (email, then name,
    /// then password).
    pub fn parse(&self) -> Result<Registration, ValueError> {
        Ok(Registration {
            email: Email::parse(self.email)?,
            name: DisplayName::parse(self.name)?,
            password: Password::parse(self.password)?,
        })
    }
}

impl Auth {
    /// Creates an account; the email is claimed first so that two
    /// registrations of one address cannot both succeed.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn register(
        &self,
        new: NewAccount<'_>,
        email_verified: bool,
    ) -> Result<Account, AuthError> {
        let Registration {
            email,
            password,
            name,
        } = new.parse()?;
        if self.account_by_email(email.as_str()).await?.is_some() {
            return Err(AuthError::Conflict(
                "Email is already registered".to_owned(),
            ));
        }
        let password_hash = self.hasher().hash(password.expose().to_owned()).await?;
        let fields = NewFields {
            email: &email,
            name: &name,
            password_hash,
            email_verified,
        };
        self.create_account(fields, None).await
    }

    /// Claims the address, then registers the account (with `identity`
    /// linked when a provider's sign-in provisions it).
    pub(super) async fn create_account(
        &self,
        fields: NewFields<'_>,
        identity: Option<ProviderIdentity>,
    ) -> Result<Account, AuthError> {
        let email = fields.email;
        let user_id = uuid::Uuid::new_v4().to_string();
        let email_index = self.email_index(email.as_str());
        self.log()
            .execute::<EmailClaim>(
                &email_index,
                EmailClaimCommand::Claim {
                    user_id: user_id.clone(),
                },
                CommandMeta::by(&user_id),
            )
            .await?;
        let role = if self
            .settings()
            .admin_emails
            .iter()
            .any(|e| e == email.as_str())
        {
            Role::Admin
        } else {
            Role::User
        };
        let now = self.clock().now();
        let key = self
            .subject_keys()
            .create(&user_id, &now.to_rfc3339())
            .await?;
        let register = AccountCommand::Register {
            user_id: user_id.clone(),
            email: key.seal(&user_id, email.as_str()),
            name: key.seal(&user_id, fields.name.as_str()),
            email_index,
            password_hash: fields.password_hash,
            role,
            email_verified: fields.email_verified,
            identity,
            at: now,
        };
        let (account, _) = self.command(&user_id, register, &user_id).await?;
        Ok(account)
    }

    /// Checks email and password; opens a session or asks for the second
    /// factor. The check is reserved first (see [`super::attempts`]) and
    /// runs as its own task, so a client hanging up cannot strand it.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn login(
        &self,
        email: &str,
        password: &str,
        device: Device,
    ) -> Result<LoginOutcome, AuthError> {
        let (auth, email, password) = (self.clone(), email.to_owned(), password.to_owned());
        detached(async move { auth.login_detached(&email, password, device).await }).await
    }

    async fn login_detached(
        &self,
        email: &str,
        password: String,
        device: Device,
    ) -> Result<LoginOutcome, AuthError> {
        let started = Instant::now();
        let user_id = if email.chars().count() <= MAX_EMAIL_CHARS {
            self.claimants(email).await?.into_iter().next()
        } else {
            None
        };
        let Some(user_id) = user_id else {
            // The same reads and Argon2 work as a known address; then, in
            // place of its store work (two reads, two appends), a wait
            // drawn from what that took lately: the answer time is this
            // Argon2 check plus a known address's store time.
            self.log().load::<Account>(DECOY_ACCOUNT).await?;
            let hashing = Instant::now();
            self.hasher().verify(password, None).await;
            let hashed = hashing.elapsed();
            let store = self.inner.attempts.pad();
            tokio::time::sleep_until((started + hashed + store).into()).await;
            return Err(AuthError::InvalidCredentials);
        };
        let gate = self.inner.attempts.gate(&user_id);
        let mut hashed = std::time::Duration::ZERO;
        let result = self
            .password_step(&gate, &user_id, password, device, &mut hashed)
            .await;
        self.inner.attempts.release(&user_id, gate);
        if matches!(result, Err(AuthError::InvalidCredentials)) {
            let store = started.elapsed().saturating_sub(hashed);
            self.inner.attempts.record_store_time(store);
        }
        result
    }

    async fn password_step(
        &self,
        gate: &Gate,
        user_id: &str,
        password: String,
        device: Device,
        hashed: &mut std::time::Duration,
    ) -> Result<LoginOutcome, AuthError> {
        let (attempt_id, account) = match self.reserve(gate, user_id, None).await {
            Err(AuthError::NotFound { .. }) => return Err(AuthError::InvalidCredentials),
            other => other?,
        };
        let stored = Some(account.password_hash.clone());
        let hashing = Instant::now();
        let matches = self.hasher().verify(password, stored).await;
        *hashed = hashing.elapsed();
        if !matches {
            let failure = AccountCommand::RecordLoginFailure {
                reason: FailureReason::Password,
                attempt: Some(attempt_id),
                at: self.clock().now(),
            };
            self.gated(gate, user_id, failure).await?;
            return Err(AuthError::InvalidCredentials);
        }
        let outcome = self
            .password_right(gate, account, &attempt_id, device)
            .await;
        if !matches!(outcome, Ok(LoginOutcome::Signed { .. })) {
            self.end_attempt(gate, user_id, &attempt_id).await;
        }
        outcome
    }

    async fn password_right(
        &self,
        gate: &Gate,
        account: Account,
        attempt_id: &str,
        device: Device,
    ) -> Result<LoginOutcome, AuthError> {
        if account.disabled {
            return Err(AuthError::Disabled);
        }
        let account = self.apply_admin_list(account).await?;
        if account.mfa.enabled {
            return Ok(LoginOutcome::SecondFactorRequired {
                mfa_token: self.issue_mfa_token(&account.user_id, None)?,
            });
        }
        let opening = Opening {
            device,
            second_factor: None,
            step_token: None,
            attempt_id: Some(attempt_id),
            via: None,
        };
        self.open_session(gate, &account.user_id, opening).await
    }

    /// Finishes a sign-in that needed a second factor. The code check is
    /// reserved like a password check and counts towards the same lock; the
    /// step token finishes one sign-in only.
    pub async fn login_second_factor(
        &self,
        mfa_token: &str,
        code: &str,
        device: Device,
    ) -> Result<LoginOutcome, AuthError> {
        let claims = self.check_token(mfa_token, TokenType::Mfa)?;
        let (auth, code) = (self.clone(), code.to_owned());
        detached(async move {
            let user_id = claims.sub.clone();
            let via = claims.via.clone();
            let gate = auth.inner.attempts.gate(&user_id);
            let step_token = StepToken {
                token_id: claims.jti,
                expires_at: DateTime::from_timestamp(claims.exp, 0).unwrap_or_default(),
            };
            let result = auth
                .second_factor_step(&gate, &user_id, step_token, &code, (device, via))
                .await;
            auth.inner.attempts.release(&user_id, gate);
            result
        })
        .await
    }

    async fn second_factor_step(
        &self,
        gate: &Gate,
        user_id: &str,
        step_token: StepToken,
        code: &str,
        (device, via): (Device, Option<ProviderIdentity>),
    ) -> Result<LoginOutcome, AuthError> {
        let (attempt_id, account) = match self.reserve(gate, user_id, None).await {
            Err(AuthError::NotFound { .. }) => return Err(AuthError::InvalidToken),
            other => other?,
        };
        let outcome = if account.step_token_spent(&step_token.token_id) {
            Err(AuthError::InvalidToken)
        } else {
            match self.second_factor(&account, code) {
                Ok(Some(factor)) => {
                    let opening = Opening {
                        device,
                        second_factor: Some(factor),
                        step_token: Some(step_token),
                        attempt_id: Some(&attempt_id),
                        via,
                    };
                    self.open_session(gate, user_id, opening).await
                }
                Ok(None) => Err(AuthError::InvalidCode),
                Err(e) => Err(e),
            }
        };
        match outcome {
            // A wrong or replayed code: a failed sign-in.
            Err(AuthError::InvalidCode) => {
                let failure = AccountCommand::RecordLoginFailure {
                    reason: FailureReason::SecondFactor,
                    attempt: Some(attempt_id),
                    at: self.clock().now(),
                };
                self.gated(gate, user_id, failure).await?;
                Err(AuthError::InvalidCode)
            }
            Ok(LoginOutcome::Signed { .. }) => outcome,
            other => {
                self.end_attempt(gate, user_id, &attempt_id).await;
                other
            }
        }
    }

    /// The second factor `code` stands for, if it matches `account`'s MFA.
    pub(super) fn second_factor(
        &self,
        account: &Account,
        code: &str,
    ) -> Result<Option<SecondFactor>, AuthError> {
        let code = code.trim();
        if code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit()) {
            let Some(secret) = &account.mfa.secret else {
                return Ok(None);
            };
            let secret = self.cipher().decrypt(secret)?;
            let now = u64::try_from(self.clock().unix()).unwrap_or_default();
            return Ok(
                totp::matching_step(&secret, code, now).map(|step| SecondFactor::Totp { step })
            );
        }
        let code_hash = backup_code_hash(&account.user_id, &normalize_backup_code(code));
        Ok(account
            .mfa
            .backup_code_hashes
            .contains(&code_hash)
            .then_some(SecondFactor::BackupCode { code_hash }))
    }

    /// Grants `admin` to accounts listed in `SERVICE_ADMIN_EMAILS`.
    async fn apply_admin_list(&self, account: Account) -> Result<Account, AuthError> {
        if account.role == Role::Admin || !self.settings().admin_emails.contains(&account.email) {
            return Ok(account);
        }
        let promote = AccountCommand::ChangeRole {
            role: Role::Admin,
            by: "SERVICE_ADMIN_EMAILS".to_owned(),
            at: self.clock().now(),
        };
        Ok(self.command(&account.user_id, promote, "system").await?.0)
    }

    pub(super) async fn open_session(
        &self,
        gate: &Gate,
        user_id: &str,
        opening: Opening<'_>,
    ) -> Result<LoginOutcome, AuthError> {
        let now = self.clock().now();
        let session_id = uuid::Uuid::new_v4().to_string();
        let login = AccountCommand::Login {
            session_id: session_id.clone(),
            device: opening.device,
            second_factor: opening.second_factor,
            step_token: opening.step_token,
            attempt: opening.attempt_id.map(str::to_owned),
            max_sessions: self.settings().max_sessions,
            refresh_expires_at: self.refresh_expiry(now),
            via: opening.via,
            at: now,
        };
        let (account, _) = self.gated(gate, user_id, login).await?;
        self.touch(&session_id, now.timestamp()).await?;
        // An evicted session must stop working, and the new one be listed,
        // before the tokens are handed out (events are projected in order, so
        // the new session's document comes after any eviction).
        self.docs()
            .wait_for::<Sessions>(&session_id, |_| true)
            .await?;
        let tokens = self.issue_pair(&account, &session_id, 0)?;
        Ok(LoginOutcome::Signed {
            tokens,
            account: Box::new(account),
        })
    }
}

/// The checked fields a new account is registered with.
pub(super) struct NewFields<'a> {
    pub email: &'a Email,
    pub name: &'a DisplayName,
    pub password_hash: String,
    pub email_verified: bool,
}

/// What a sign-in whose checks passed opens its session with.
pub(super) struct Opening<'a> {
    pub device: Device,
    pub second_factor: Option<SecondFactor>,
    pub step_token: Option<StepToken>,
    /// The password or code check this sign-in settles, if one was made.
    pub attempt_id: Option<&'a str>,
    /// The linked provider identity that signed in, in place of the password.
    pub via: Option<ProviderIdentity>,
}

/// A backup code is hashed with its user id, so equal codes of two users differ.
pub(super) fn backup_code_hash(user_id: &str, code: &str) -> String {
    sha256_hex(&format!("{user_id}:{code}"))
}
