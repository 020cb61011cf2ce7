//! Registration, sign-in (with its second factor), refresh, sign-out,
//! password change and the caller's own sessions.

use agon_aggregates::account::Device;
use agon_aggregates::account::{
    Account, AccountCommand, FailureReason, RevokeReason, Role, SecondFactor,
};
use agon_aggregates::email_claim::{EmailClaimCommand, normalize_email};
use agon_aggregates::{CommandMeta, email_claim::EmailClaim};
use agon_projections::Sessions;
use agon_projections::accounts::SessionView;
use chrono::{DateTime, Duration, Utc};

use super::tokens::TokenPair;
use super::{Auth, AuthError, Caller};
use crate::crypto::jwt::TokenType;
use crate::crypto::password::check_policy;
use crate::crypto::secrets::{normalize_backup_code, sha256_hex};
use crate::crypto::totp;

/// Longest accepted email address (RFC 5321's path limit).
const MAX_EMAIL_CHARS: usize = 254;
/// Longest display name.
const MAX_NAME_CHARS: usize = 200;

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

/// The validated fields of a registration.
#[derive(Debug)]
pub struct NewAccount<'a> {
    pub email: &'a str,
    pub password: &'a str,
    pub name: &'a str,
}

impl Auth {
    /// Creates an account; the email is claimed first so that two
    /// registrations of one address cannot both succeed.
    pub async fn register(
        &self,
        new: NewAccount<'_>,
        email_verified: bool,
    ) -> Result<Account, AuthError> {
        let email = normalize_email(new.email);
        check_email(&email)?;
        let name = new.name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
            return Err(AuthError::Invalid(format!(
                "Name must be 1 to {MAX_NAME_CHARS} characters"
            )));
        }
        check_policy(new.password).map_err(|e| AuthError::Invalid(e.to_string()))?;
        if self.account_by_email(&email).await?.is_some() {
            return Err(AuthError::Conflict(
                "Email is already registered".to_owned(),
            ));
        }
        let password_hash = self
            .hasher()
            .hash(new.password.to_owned())
            .await
            .map_err(|e| AuthError::Internal(e.to_string()))?;
        let user_id = uuid::Uuid::new_v4().to_string();
        self.log()
            .execute::<EmailClaim>(
                &email,
                EmailClaimCommand::Claim {
                    user_id: user_id.clone(),
                },
                CommandMeta::by(&user_id),
            )
            .await?;
        let role = if self.settings().admin_emails.contains(&email) {
            Role::Admin
        } else {
            Role::User
        };
        let register = AccountCommand::Register {
            user_id: user_id.clone(),
            email,
            name: name.to_owned(),
            password_hash,
            role,
            email_verified,
            at: self.clock().now(),
        };
        let (account, _) = self.command(&user_id, register, &user_id).await?;
        Ok(account)
    }

    /// Checks email and password; opens a session or asks for the second factor.
    pub async fn login(
        &self,
        email: &str,
        password: &str,
        device: Device,
    ) -> Result<LoginOutcome, AuthError> {
        let account = if email.chars().count() <= MAX_EMAIL_CHARS {
            self.account_by_email(email).await?
        } else {
            None
        };
        if let Some(account) = &account
            && let Some(remaining_seconds) = account.lock_remaining(self.clock().now())
        {
            return Err(AuthError::Locked { remaining_seconds });
        }
        let stored = account.as_ref().map(|a| a.password_hash.clone());
        let matches = self.hasher().verify(password.to_owned(), stored).await;
        let Some(account) = account else {
            return Err(AuthError::InvalidCredentials);
        };
        if !matches {
            self.record_failure(&account.user_id, FailureReason::Password)
                .await?;
            return Err(AuthError::InvalidCredentials);
        }
        if account.disabled {
            return Err(AuthError::Disabled);
        }
        let account = self.apply_admin_list(account).await?;
        if account.mfa.enabled {
            return Ok(LoginOutcome::SecondFactorRequired {
                mfa_token: self.issue_mfa_token(&account.user_id)?,
            });
        }
        self.open_session(&account.user_id, device, None).await
    }

    /// Finishes a sign-in that needed a second factor.
    pub async fn login_second_factor(
        &self,
        mfa_token: &str,
        code: &str,
        device: Device,
    ) -> Result<LoginOutcome, AuthError> {
        let claims = self.check_token(mfa_token, TokenType::Mfa)?;
        let account = self.account(&claims.sub).await?;
        if let Some(remaining_seconds) = account.lock_remaining(self.clock().now()) {
            return Err(AuthError::Locked { remaining_seconds });
        }
        let Some(factor) = self.second_factor(&account, code)? else {
            self.record_failure(&account.user_id, FailureReason::SecondFactor)
                .await?;
            return Err(AuthError::InvalidCode);
        };
        match self
            .open_session(&account.user_id, device, Some(factor))
            .await
        {
            Err(AuthError::InvalidCode) => {
                self.record_failure(&account.user_id, FailureReason::SecondFactor)
                    .await?;
                Err(AuthError::InvalidCode)
            }
            other => other,
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
            let secret = self
                .cipher()
                .decrypt(secret)
                .map_err(|e| AuthError::Internal(format!("MFA secret: {e}")))?;
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

    async fn record_failure(&self, user_id: &str, reason: FailureReason) -> Result<(), AuthError> {
        let failure = AccountCommand::RecordLoginFailure {
            reason,
            attempt: None,
            at: self.clock().now(),
        };
        match self.command(user_id, failure, user_id).await {
            // Locked by a concurrent attempt: the failure answer stands.
            Ok(_) | Err(AuthError::Locked { .. }) => Ok(()),
            Err(e) => Err(e),
        }
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

    async fn open_session(
        &self,
        user_id: &str,
        device: Device,
        second_factor: Option<SecondFactor>,
    ) -> Result<LoginOutcome, AuthError> {
        let now = self.clock().now();
        let session_id = uuid::Uuid::new_v4().to_string();
        let login = AccountCommand::Login {
            session_id: session_id.clone(),
            device,
            second_factor,
            step_token: None,
            attempt: None,
            max_sessions: self.settings().max_sessions,
            refresh_expires_at: self.refresh_expiry(now),
            at: now,
        };
        let (account, _) = self.command(user_id, login, user_id).await?;
        self.touch(&session_id, now.timestamp()).await?;
        // An evicted session must stop working, and the new one be listed,
        // before the tokens are handed out (events are projected in order, so
        // the new session's document comes after any eviction).
        self.docs()
            .wait_for::<Sessions>(&session_id, super::READ_MODEL_WAIT, |_| true)
            .await?;
        let tokens = self.issue_pair(&account, &session_id, 0)?;
        Ok(LoginOutcome::Signed {
            tokens,
            account: Box::new(account),
        })
    }

    /// Exchanges a refresh token for a new pair; a reused one ends its session.
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
        let (account, events) = self.command(&claims.sub, refresh, &claims.sub).await?;
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
    /// session ends, this one included. Returns how many ended.
    pub async fn change_password(
        &self,
        caller: &Caller,
        current: &str,
        new: &str,
    ) -> Result<usize, AuthError> {
        let account = self.account(&caller.user_id).await?;
        let matches = self
            .hasher()
            .verify(current.to_owned(), Some(account.password_hash.clone()))
            .await;
        if !matches {
            return Err(AuthError::Forbidden(
                "Current password is incorrect".to_owned(),
            ));
        }
        check_policy(new).map_err(|e| AuthError::Invalid(e.to_string()))?;
        let password_hash = self
            .hasher()
            .hash(new.to_owned())
            .await
            .map_err(|e| AuthError::Internal(e.to_string()))?;
        let change = AccountCommand::ChangePassword {
            password_hash,
            attempt: None,
            at: self.clock().now(),
        };
        let (_, events) = self
            .command(&caller.user_id, change, &caller.user_id)
            .await?;
        self.await_revocations(&events).await?;
        Ok(events.len().saturating_sub(1))
    }
}

impl Auth {
    /// When a refresh token issued at `now` stops working.
    fn refresh_expiry(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        now + Duration::from_std(self.settings().refresh_ttl).unwrap_or(Duration::MAX)
    }
}

/// A backup code is hashed with its user id, so equal codes of two users differ.
pub(super) fn backup_code_hash(user_id: &str, code: &str) -> String {
    sha256_hex(&format!("{user_id}:{code}"))
}

/// A plausible address: a local part, one last `@`, a domain; no spaces.
/// (Deliverability is what the verification mail is for.)
pub(super) fn check_email(email: &str) -> Result<(), AuthError> {
    let valid = email.chars().count() <= MAX_EMAIL_CHARS
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
        && email.rsplit_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && !domain.is_empty()
                && !domain.contains('@')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
        });
    if valid {
        Ok(())
    } else {
        Err(AuthError::Invalid("Email address is not valid".to_owned()))
    }
}
