//! TOTP second factor: setup, enable with backup codes, disable, admin reset.

use agon_aggregates::account::{AccountCommand, SecondFactor};
use serde::Serialize;
use utoipa::ToSchema;

use super::login::backup_code_hash;
use super::{Auth, AuthError};
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
    pub async fn begin_mfa(&self, user_id: &str) -> Result<MfaSetup, AuthError> {
        let account = self.account(user_id).await?;
        let secret = totp::new_secret();
        let otpauth_uri = totp::otpauth_uri(&secret, &account.email, ISSUER)
            .map_err(|e| AuthError::Internal(e.to_string()))?;
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
    /// backup codes, shown this once.
    pub async fn enable_mfa(&self, user_id: &str, code: &str) -> Result<Vec<String>, AuthError> {
        let account = self.account(user_id).await?;
        if account.mfa.enabled {
            return Err(AuthError::Conflict("MFA is already enabled".to_owned()));
        }
        if account.mfa.secret.is_none() {
            return Err(AuthError::Conflict(
                "MFA setup has not been started: POST /api/auth/mfa/setup first".to_owned(),
            ));
        }
        let Some(SecondFactor::Totp { step }) = self.second_factor(&account, code)? else {
            return Err(AuthError::InvalidCode);
        };
        let codes = backup_codes(BACKUP_CODE_COUNT);
        let enable = AccountCommand::EnableMfa {
            totp_step: step,
            backup_code_hashes: codes.iter().map(|c| backup_code_hash(user_id, c)).collect(),
            attempt: None,
            at: self.clock().now(),
        };
        self.command(user_id, enable, user_id).await?;
        Ok(codes)
    }

    /// Turns MFA off; needs a current code or a backup code.
    pub async fn disable_mfa(&self, user_id: &str, code: &str) -> Result<(), AuthError> {
        let account = self.account(user_id).await?;
        if !account.mfa.enabled {
            return Err(AuthError::Conflict("MFA is not enabled".to_owned()));
        }
        let factor = self
            .second_factor(&account, code)?
            .ok_or(AuthError::InvalidCode)?;
        let disable = AccountCommand::DisableMfa {
            second_factor: factor,
            attempt: None,
            at: self.clock().now(),
        };
        self.command(user_id, disable, user_id).await?;
        Ok(())
    }

    /// An admin clears `user_id`'s MFA (a lost device).
    pub async fn reset_mfa(&self, admin: &str, user_id: &str) -> Result<(), AuthError> {
        self.existing(user_id).await?;
        let reset = AccountCommand::ResetMfa {
            by: admin.to_owned(),
            at: self.clock().now(),
        };
        self.command(user_id, reset, admin).await?;
        Ok(())
    }
}
