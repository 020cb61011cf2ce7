//! Accounts and sign-in settings: tokens, sessions, the static API token,
//! field encryption and mail (§5.2, §5.6).

use std::time::Duration;

use super::values::{ConfigError, Secret, Vars};
use crate::crypto::fields::FieldCipher;
use crate::crypto::jwt::JwtAlgorithm;
use crate::crypto::subject_keys::BlindIndex;

/// Longest access-token lifetime accepted; larger settings are capped.
pub const MAX_ACCESS_HOURS: u32 = 168;

/// How the service signs in users and keeps their sessions.
#[derive(Debug, Clone)]
pub struct AuthSettings {
    /// `SERVICE_JWT_SECRET`: at least 32 characters; required in production.
    /// Unset elsewhere: a random secret per start (every restart signs out everyone).
    pub jwt_secret: Option<Secret>,
    /// `SERVICE_JWT_ALGORITHM`: HS256 (default), HS384 or HS512; nothing else.
    pub jwt_algorithm: JwtAlgorithm,
    /// `SERVICE_JWT_EXPIRY_HOURS`: access-token lifetime. Default 1, capped at 168.
    pub access_ttl: Duration,
    /// `SERVICE_JWT_REFRESH_EXPIRY_DAYS` (or `SERVICE_REFRESH_TOKEN_EXPIRY_DAYS`):
    /// refresh-token lifetime. Default 7.
    pub refresh_ttl: Duration,
    /// `SERVICE_MAX_SESSIONS_PER_USER`: open sessions per user. Default 10.
    pub max_sessions: usize,
    /// `SERVICE_MAX_API_KEYS_PER_USER`: live API keys per user, the singular
    /// route's `default` key included. Default 25, 1 to 1000.
    pub max_api_keys: usize,
    /// `SERVICE_SESSION_INACTIVITY_TIMEOUT`: seconds without use before a
    /// session ends. Default 86400.
    pub inactivity_timeout: Duration,
    /// `SERVICE_EMAIL_VERIFICATION_HOURS`: how long an email-verification
    /// link works. Default 24.
    pub verification_hours: u32,
    /// `SERVICE_INVITE_DAYS`: how long an organization invitation works.
    /// Default 7.
    pub invite_days: u32,
    /// `SERVICE_MFA_STEP_SECONDS`: how long a sign-in that passed its
    /// password (or identity provider) may take to give its second factor.
    /// Default 300.
    pub mfa_step_seconds: u32,
    /// `SERVICE_API_TOKEN`: a static bearer credential with the `admin` role.
    pub api_token: Option<Secret>,
    /// `SERVICE_ADMIN_EMAILS`: accounts with these emails get the `admin` role.
    pub admin_emails: Vec<String>,
    /// `SERVICE_ENCRYPTION_KEY`: AES-256-GCM keys, 64 hex characters each,
    /// comma-separated; the first encrypts. Unset: a key file in the data dir.
    pub encryption: Option<FieldCipher>,
    /// `SERVICE_BLIND_INDEX_KEY`: 64 hex characters, the HMAC key of the
    /// email blind index. Unset: a key file in the data dir.
    pub blind_index: Option<BlindIndex>,
    /// `SERVICE_SMTP_URL`: send mail through SMTP; unset writes it to `<data dir>/outbox`.
    pub smtp_url: Option<Secret>,
    /// `SERVICE_SMTP_TIMEOUT_SECONDS`: longest a mail may take to send
    /// before it counts as failed (shorter than the request timeout). Default 10.
    pub smtp_timeout: Duration,
    /// `SERVICE_MAIL_FROM`: the sender of the service's mail.
    pub mail_from: String,
    /// `SERVICE_PUBLIC_URL`: the address links in mails point at.
    pub public_url: String,
}

impl AuthSettings {
    pub(super) fn read<F: Fn(&str) -> Option<String>>(
        vars: &Vars<F>,
        warnings: &mut Vec<String>,
    ) -> Result<Self, ConfigError> {
        let jwt_secret = vars.get("SERVICE_JWT_SECRET").map(Secret::new);
        if let Some(secret) = &jwt_secret
            && secret.expose().chars().count() < 32
        {
            return Err(ConfigError::new(
                "SERVICE_JWT_SECRET",
                "must be at least 32 characters long",
            ));
        }
        let jwt_algorithm = match vars.get("SERVICE_JWT_ALGORITHM") {
            None => JwtAlgorithm::Hs256,
            Some(text) => text
                .parse()
                .map_err(|e: crate::crypto::jwt::UnsupportedAlgorithm| {
                    ConfigError::new("SERVICE_JWT_ALGORITHM", e.to_string())
                })?,
        };
        let mut access_hours = vars.positive("SERVICE_JWT_EXPIRY_HOURS", 1)?;
        if access_hours > MAX_ACCESS_HOURS {
            warnings.push(format!(
                "SERVICE_JWT_EXPIRY_HOURS={access_hours} is above the {MAX_ACCESS_HOURS}-hour maximum; using {MAX_ACCESS_HOURS}"
            ));
            access_hours = MAX_ACCESS_HOURS;
        }
        let refresh_days = if vars.get("SERVICE_JWT_REFRESH_EXPIRY_DAYS").is_some() {
            vars.within_u32("SERVICE_JWT_REFRESH_EXPIRY_DAYS", 1, 3_650, 7)?
        } else {
            vars.within_u32("SERVICE_REFRESH_TOKEN_EXPIRY_DAYS", 1, 3_650, 7)?
        };
        let api_token = vars.get("SERVICE_API_TOKEN").map(Secret::new);
        if let Some(token) = &api_token
            && token.expose().chars().count() < 16
        {
            return Err(ConfigError::new(
                "SERVICE_API_TOKEN",
                "must be at least 16 characters long",
            ));
        }
        let encryption = match vars.get("SERVICE_ENCRYPTION_KEY") {
            None => None,
            Some(text) => Some(
                FieldCipher::parse(&text)
                    .map_err(|e| ConfigError::new("SERVICE_ENCRYPTION_KEY", e.to_string()))?,
            ),
        };
        let blind_index = match vars.get("SERVICE_BLIND_INDEX_KEY") {
            None => None,
            Some(text) => Some(BlindIndex::parse(&text).ok_or_else(|| {
                ConfigError::new(
                    "SERVICE_BLIND_INDEX_KEY",
                    "must be 64 hexadecimal characters (32 bytes)",
                )
            })?),
        };
        Ok(Self {
            jwt_secret,
            jwt_algorithm,
            access_ttl: Duration::from_secs(u64::from(access_hours) * 3_600),
            refresh_ttl: Duration::from_secs(u64::from(refresh_days) * 86_400),
            max_sessions: vars.within_u32("SERVICE_MAX_SESSIONS_PER_USER", 1, 10_000, 10)? as usize,
            max_api_keys: vars.within_u32("SERVICE_MAX_API_KEYS_PER_USER", 1, 1_000, 25)? as usize,
            inactivity_timeout: Duration::from_secs(
                vars.within_u32("SERVICE_SESSION_INACTIVITY_TIMEOUT", 1, 31_536_000, 86_400)?
                    .into(),
            ),
            verification_hours: vars.within_u32(
                "SERVICE_EMAIL_VERIFICATION_HOURS",
                1,
                8_760,
                24,
            )?,
            invite_days: vars.within_u32("SERVICE_INVITE_DAYS", 1, 365, 7)?,
            mfa_step_seconds: vars.within_u32("SERVICE_MFA_STEP_SECONDS", 30, 3_600, 300)?,
            api_token,
            admin_emails: vars
                .list("SERVICE_ADMIN_EMAILS")
                .iter()
                .map(|e| agon_aggregates::email_claim::normalize_email(e))
                .collect(),
            encryption,
            blind_index,
            smtp_url: vars.get("SERVICE_SMTP_URL").map(Secret::new),
            smtp_timeout: Duration::from_secs(
                vars.within_u32("SERVICE_SMTP_TIMEOUT_SECONDS", 1, 3_600, 10)?
                    .into(),
            ),
            mail_from: vars
                .get("SERVICE_MAIL_FROM")
                .unwrap_or_else(|| "Agon <noreply@agon.localhost>".to_owned()),
            public_url: vars
                .get("SERVICE_PUBLIC_URL")
                .unwrap_or_else(|| "http://localhost:8080".to_owned())
                .trim_end_matches('/')
                .to_owned(),
        })
    }
}
