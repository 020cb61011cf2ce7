//! TOTP second factor: setup, enable with backup codes, disable, admin reset.

use agon_aggregates::account::{AccountCommand, SecondFactor};
use agon_aggregates::ids::UserId;
use serde::Serialize;
use utoipa::ToSchema;

use super::attempts::{Gate, credential_of, detached};
use super::login::backup_code_hash;
use super::{Auth, AuthError, Caller};
use crate::crypto::secrets::backup_codes;
use crate::crypto::totp;

/// Backup codes issued when MFA is enabled.
pub const BACKUP_CODE_COUNT: usize = 10;
/// The issuer shown by authenticator apps.
const ISSUER: &str = "Agon";

/// A fresh TOTP secret for the caller to load into an authenticator app.
#[derive(Debug, Serialize, ToSchema)]
pub struct MfaSetup {
    /// Base32 secret.
    pub secret: String,
    /// `otpauth://totp/...` URI (render it as a QR code).
    pub otpauth_uri: String,
}

impl Auth {
    /// Starts MFA setup: a new secret, stored encrypted, pending a first code.
    #[tracing::instrument(level = "debug", skip_all, fields(user_id = %user_id), err(level = "debug"))]
    pub async fn begin_mfa(&self, user_id: &str) -> Result<MfaSetup, AuthError> {
        let account = self.account(user_id).await?;
        let secret = totp::new_secret();
        let otpauth_uri = totp::otpauth_uri(&secret, &account.email, ISSUER)?;
        let begin = AccountCommand::BeginMfaSetup {
            secret: self.cipher().encrypt(&secret),
            at: self.clock().now(),
        };
        self.command(user_id, begin, user_id).await?;
        Ok(MfaSetup {
            secret,
            otpauth_uri,
        })
    }

    /// Turns MFA on once `code` matches the pending secret; returns the
    /// backup codes, shown this once. A wrong code counts against the
    /// caller's credential (see [`Auth::change_password`]).
    #[tracing::instrument(level = "debug", skip_all, fields(user_id = %caller.user_id), err(level = "debug"))]
    pub async fn enable_mfa(&self, caller: &Caller, code: &str) -> Result<Vec<String>, AuthError> {
        let account = self.account(&caller.user_id).await?;
        if account.mfa.enabled {
            return Err(AuthError::Conflict("MFA is already enabled".to_owned()));
        }
        if account.mfa.secret.is_none() {
            return Err(AuthError::Conflict(
                "MFA setup has not been started: POST /api/auth/mfa/setup first".to_owned(),
            ));
        }
        self.code_check(caller, code, CodeUse::Enable)
            .await?
            .ok_or_else(|| AuthError::Invariant("MFA enable returned no codes"))
    }

    /// Turns MFA off; needs a current code or a backup code, counted like
    /// [`Auth::enable_mfa`]'s.
    #[tracing::instrument(level = "debug", skip_all, fields(user_id = %caller.user_id), err(level = "debug"))]
    pub async fn disable_mfa(&self, caller: &Caller, code: &str) -> Result<(), AuthError> {
        let account = self.account(&caller.user_id).await?;
        if !account.mfa.enabled {
            return Err(AuthError::Conflict("MFA is not enabled".to_owned()));
        }
        self.code_check(caller, code, CodeUse::Disable).await?;
        Ok(())
    }

    /// Reserves a check of `code` on the caller's credential, makes it and
    /// records the outcome; returns the backup codes when enabling.
    async fn code_check(
        &self,
        caller: &Caller,
        code: &str,
        usage: CodeUse,
    ) -> Result<Option<Vec<String>>, AuthError> {
        let credential = credential_of(caller)?;
        let (auth, caller, code) = (self.clone(), caller.clone(), code.to_owned());
        detached(async move {
            let gate = auth.inner.attempts.gate(&caller.user_id);
            let result = auth
                .code_check_gated(&gate, &caller, credential, &code, usage)
                .await;
            auth.inner.attempts.release(&caller.user_id, gate);
            result
        })
        .await
    }

    async fn code_check_gated(
        &self,
        gate: &Gate,
        caller: &Caller,
        credential: String,
        code: &str,
        usage: CodeUse,
    ) -> Result<Option<Vec<String>>, AuthError> {
        let user_id = &caller.user_id;
        let (attempt_id, account) = self
            .reserve(gate, user_id, Some(credential.clone()))
            .await?;
        let factor = match self.second_factor(&account, code) {
            Ok(factor) => factor,
            Err(e) => {
                self.end_attempt(gate, user_id, &attempt_id).await;
                return Err(e);
            }
        };
        let attempt = Some(attempt_id.clone());
        let at = self.clock().now();
        let (command, codes) = match (usage, factor) {
            (CodeUse::Enable, Some(SecondFactor::Totp { step })) => {
                let codes = backup_codes(BACKUP_CODE_COUNT);
                let enable = AccountCommand::EnableMfa {
                    totp_step: step,
                    backup_code_hashes: codes
                        .iter()
                        .map(|c| backup_code_hash(user_id, c))
                        .collect(),
                    attempt,
                    at,
                };
                (enable, Some(codes))
            }
            (CodeUse::Disable, Some(second_factor)) => {
                let disable = AccountCommand::DisableMfa {
                    second_factor,
                    attempt,
                    at,
                };
                (disable, None)
            }
            _ => {
                return Err(self
                    .reauth_failed(
                        gate,
                        caller,
                        credential,
                        &attempt_id,
                        AuthError::InvalidCode,
                    )
                    .await);
            }
        };
        match self.gated(gate, user_id, command).await {
            Ok(_) => Ok(codes),
            // A replayed code: as wrong as any other.
            Err(AuthError::InvalidCode) => Err(self
                .reauth_failed(
                    gate,
                    caller,
                    credential,
                    &attempt_id,
                    AuthError::InvalidCode,
                )
                .await),
            Err(e) => {
                self.end_attempt(gate, user_id, &attempt_id).await;
                Err(e)
            }
        }
    }

    /// An admin clears `user_id`'s MFA (a lost device).
    pub async fn reset_mfa(&self, admin: &UserId, user_id: &UserId) -> Result<(), AuthError> {
        self.existing(user_id).await?;
        let reset = AccountCommand::ResetMfa {
            by: admin.as_str().to_owned(),
            at: self.clock().now(),
        };
        self.command(user_id, reset, admin).await?;
        Ok(())
    }
}

/// What a code check is for.
#[derive(Debug, Clone, Copy)]
enum CodeUse {
    Enable,
    Disable,
}
