//! Accounts and sign-in: the application service between the HTTP handlers
//! and the Account, Organization and EmailClaim aggregates.
//!
//! Hashing, token signing, clocks and mail happen here; the aggregates only
//! decide. Reads that must be current (sign-in, refresh) load the aggregate
//! from the log; lists and per-request checks read the projections, and
//! commands that revoke something wait until the projection shows it, so
//! that every replica refuses the token once the response is out.

pub mod activity;
pub mod admin;
pub mod api_keys;
mod attempts;
pub mod authenticate;
pub mod caller;
pub mod device;
pub mod directory;
pub mod erase;
pub mod error;
pub mod login;
pub mod mfa;
pub mod providers;
pub mod rbac;
pub mod sessions;
pub mod signup;
pub mod tokens;

use std::sync::Arc;

use agon_aggregates::CommandMeta;
use agon_aggregates::account::{Account, AccountCommand, AccountEvent};
use agon_aggregates::email_claim::{EmailClaim, normalize_email};
use agon_projections::accounts::AccountView;
use agon_projections::{ApiKeys, Sessions};
use ipnet::IpNet;

pub use authenticate::{Presented, ServiceClaims};
pub use caller::{Caller, Credential};
pub use error::AuthError;

use crate::clock::Clock;
use crate::config::{AuthSettings, Settings};
use crate::crypto::fields::FieldCipher;
use crate::crypto::jwt::JwtKeys;
use crate::crypto::password::PasswordHasher;
use crate::crypto::signing::{KeyError, key_file};
use crate::crypto::subject_keys::{BlindIndex, SubjectKeys};
use crate::mail::{MailError, Mailer};
use crate::projection::Documents;
use crate::store::EventLog;

/// The key file used for field encryption when `SERVICE_ENCRYPTION_KEY` is unset.
const FIELD_KEY_FILE: &str = "field-encryption.key";
/// The key file of the email blind index when `SERVICE_BLIND_INDEX_KEY` is unset.
const BLIND_INDEX_KEY_FILE: &str = "blind-index.key";

/// Why the accounts service could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    #[error("field encryption key: {0}")]
    Key(#[from] KeyError),
    #[error("field encryption key file is not a valid key: {0}")]
    KeyFile(String),
    #[error("blind index key file {0} is not 64 hexadecimal characters")]
    BlindIndexFile(String),
    #[error("mail: {0}")]
    Mail(#[from] MailError),
    #[error("cannot draw a random JWT secret")]
    Random,
}

/// The accounts service; cheap to clone.
#[derive(Debug, Clone)]
pub struct Auth {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    settings: AuthSettings,
    trusted_networks: Vec<IpNet>,
    keys: JwtKeys,
    hasher: PasswordHasher,
    cipher: FieldCipher,
    subject_keys: SubjectKeys,
    blind_index: BlindIndex,
    mailer: Mailer,
    log: EventLog,
    docs: Documents,
    clock: Clock,
    attempts: attempts::Attempts,
}

impl Auth {
    pub fn new(settings: &Settings, log: EventLog, clock: Clock) -> Result<Self, AuthSetupError> {
        let auth = &settings.auth;
        let secret = match &auth.jwt_secret {
            Some(secret) => secret.expose().as_bytes().to_vec(),
            None => {
                tracing::warn!(
                    "SERVICE_JWT_SECRET is not set: tokens are signed with a random secret that \
                     changes at every start, so every restart signs everyone out and replicas \
                     cannot check each other's tokens. Set it (32+ characters) for real use."
                );
                let mut secret = vec![0u8; 48];
                getrandom::fill(&mut secret).map_err(|_| AuthSetupError::Random)?;
                secret
            }
        };
        let cipher = match &auth.encryption {
            Some(cipher) => cipher.clone(),
            None => {
                let path = settings.data_dir.join(FIELD_KEY_FILE);
                let key = key_file(&path)?;
                tracing::warn!(
                    path = %path.display(),
                    "SERVICE_ENCRYPTION_KEY is not set: MFA secrets are encrypted with a key kept \
                     in the data directory; set SERVICE_ENCRYPTION_KEY when running several replicas"
                );
                FieldCipher::parse(&key).map_err(|e| AuthSetupError::KeyFile(e.to_string()))?
            }
        };
        let blind_index = match &auth.blind_index {
            Some(index) => index.clone(),
            None => {
                let path = settings.data_dir.join(BLIND_INDEX_KEY_FILE);
                BlindIndex::parse(&key_file(&path)?)
                    .ok_or_else(|| AuthSetupError::BlindIndexFile(path.display().to_string()))?
            }
        };
        let mailer = match &auth.smtp_url {
            Some(url) => Mailer::smtp(url.expose(), &auth.mail_from)?,
            None => Mailer::outbox(settings.data_dir.join("outbox")).with_from(&auth.mail_from)?,
        };
        tracing::info!(mail = %mailer.describe(), "mail delivery");
        Ok(Self {
            inner: Arc::new(Inner {
                settings: auth.clone(),
                trusted_networks: settings.rate_limits.trusted_proxies.clone(),
                keys: JwtKeys::new(&secret, auth.jwt_algorithm),
                hasher: PasswordHasher::new(),
                subject_keys: SubjectKeys::new(log.db().clone(), cipher.clone()),
                blind_index,
                cipher,
                mailer,
                docs: Documents::new(log.clone()),
                log,
                clock,
                attempts: attempts::Attempts::default(),
            }),
        })
    }

    pub fn settings(&self) -> &AuthSettings {
        &self.inner.settings
    }

    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }

    pub fn docs(&self) -> &Documents {
        &self.inner.docs
    }

    /// The account `user_id` as the log has it now (default state if none).
    /// Its personal fields are opened ([`erase`]).
    pub async fn account(&self, user_id: &str) -> Result<Account, AuthError> {
        let account = self.inner.log.load::<Account>(user_id).await?;
        self.revealed(account).await
    }

    /// The account registered under `email`, if any (an erased one is none).
    pub async fn account_by_email(&self, email: &str) -> Result<Option<Account>, AuthError> {
        for user_id in self.claimants(email).await? {
            let account = self.account(&user_id).await?;
            if account.exists() {
                return Ok(Some(account));
            }
        }
        Ok(None)
    }

    /// Who claimed `email`: in its blind-index stream (registrations since
    /// sealing), then in its plaintext stream (those from before).
    async fn claimants(&self, email: &str) -> Result<Vec<String>, AuthError> {
        let normalized = normalize_email(email);
        let mut found = Vec::new();
        for stream in [self.email_index(&normalized), normalized] {
            if let Some(user_id) = self.log().load::<EmailClaim>(&stream).await?.user_id {
                found.push(user_id);
            }
        }
        Ok(found)
    }

    /// The blind index of a normalized email; also its claim stream's id.
    fn email_index(&self, normalized: &str) -> String {
        self.inner.blind_index.of(normalized)
    }

    fn subject_keys(&self) -> &SubjectKeys {
        &self.inner.subject_keys
    }

    /// The public view of `user_id`, waiting briefly for a fresh account.
    pub async fn view(&self, user_id: &str) -> Result<AccountView, AuthError> {
        let docs = &self.inner.docs;
        if let Some(view) = docs.get::<agon_projections::Accounts>(user_id).await? {
            return self.revealed_view(view).await;
        }
        docs.wait_for::<agon_projections::Accounts>(user_id, |_| true)
            .await?;
        let view = docs
            .get::<agon_projections::Accounts>(user_id)
            .await?
            .ok_or_else(|| AuthError::NotFound {
                resource_type: "user",
                resource_id: user_id.to_owned(),
            })?;
        self.revealed_view(view).await
    }

    /// Runs `command` on account `user_id` on behalf of `actor`.
    pub async fn command(
        &self,
        user_id: &str,
        command: AccountCommand,
        actor: &str,
    ) -> Result<(Account, Vec<AccountEvent>), AuthError> {
        let done = self
            .inner
            .log
            .execute::<Account>(user_id, command, CommandMeta::by(actor))
            .await?;
        Ok((self.revealed(done.state).await?, done.events))
    }

    /// Waits until every session and API key `events` revoked shows as
    /// revoked. Each read model applies events in order, so the last
    /// revocation of each kind showing means all of them do.
    pub async fn await_revocations(&self, events: &[AccountEvent]) -> Result<(), AuthError> {
        let docs = &self.inner.docs;
        let last_session = events.iter().rev().find_map(|event| match event {
            AccountEvent::SessionRevoked { session_id, .. } => Some(session_id.as_str()),
            _ => None,
        });
        if let Some(session_id) = last_session {
            docs.wait_for::<Sessions>(session_id, |s| s.revoked_at.is_some())
                .await?;
        }
        let last_key = events.iter().rev().find_map(|event| match event {
            AccountEvent::ApiKeyRevoked { key_id, .. } => Some(key_id.as_str()),
            _ => None,
        });
        if let Some(key_id) = last_key {
            docs.wait_for::<ApiKeys>(key_id, |key| !key.is_live())
                .await?;
        }
        Ok(())
    }

    fn log(&self) -> &EventLog {
        &self.inner.log
    }

    /// The field cipher, for other services' secrets (webhook signing secrets).
    pub fn field_cipher(&self) -> FieldCipher {
        self.inner.cipher.clone()
    }

    fn cipher(&self) -> &FieldCipher {
        &self.inner.cipher
    }

    fn keys(&self) -> &JwtKeys {
        &self.inner.keys
    }

    fn hasher(&self) -> &PasswordHasher {
        &self.inner.hasher
    }

    fn mailer(&self) -> &Mailer {
        &self.inner.mailer
    }

    fn trusted_networks(&self) -> &[IpNet] {
        &self.inner.trusted_networks
    }
}
