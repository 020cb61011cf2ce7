//! One typed settings tree, read once at start from the environment.
//!
//! Invalid configuration stops the start with a one-line message naming the
//! variable; secrets live in [`Secret`], whose `Debug` form never prints them.

mod agents;
mod audit;
mod auth;
mod backup;
mod http;
mod outside;
mod push;
mod scm;
mod sso;
mod values;
mod web;
mod webhooks;

use std::path::PathBuf;
use std::time::Duration;

pub use agents::{AgentSettings, ProviderSettings};
pub use audit::AuditSettings;
pub use auth::{AuthSettings, MAX_ACCESS_HOURS};
pub use backup::BackupSettings;
pub use http::{
    ConnectionSettings, HttpSettings, MAX_PER_MINUTE, NamedLimits, PageSettings, RateLimitSettings,
    ReadCacheSettings,
};
pub use outside::PublicStreamSettings;
pub use push::{ConnectionCaps, PushSettings};
pub use scm::ScmSettings;
pub use sso::{OAuthSettings, OidcClient, SamlSettings, SsoProtocol, SsoSettings};
use values::Vars;
pub use values::{ConfigError, Environment, LogLevel, Secret};
pub use web::WebSettings;
pub use webhooks::WebhookSettings;

/// Everything the service reads from its environment.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `SERVICE_ENV`: `production` turns on the production checks.
    pub environment: Environment,
    /// `SERVICE_DATA_DIR`: SQLite file, generated keys. Default `.nomic`.
    pub data_dir: PathBuf,
    /// `DATABASE_URL`: PostgreSQL; unset means the embedded SQLite store.
    pub database_url: Option<Secret>,
    /// `SERVICE_DATABASE_MAX_CONNECTIONS`: PostgreSQL pool size. Default 16.
    pub database_max_connections: u32,
    /// `SERVICE_DATABASE_ACQUIRE_TIMEOUT_MS`: how long a statement waits for
    /// a PostgreSQL connection (and a connect for the server) before the
    /// request answers 503. Default 1000.
    pub database_acquire_timeout: Duration,
    /// `SERVICE_READ_MODEL_WAIT_MS`: how long a command's answer waits for
    /// its effect to show in the read models (then it answers anyway and
    /// readers catch up). Default 5000.
    pub read_model_wait: Duration,
    /// `SERVICE_NATS_URL`: NATS JetStream bus; unset means the in-process bus.
    pub nats_url: Option<String>,
    /// `SERVICE_REPLICA_ID`: this replica's stable name (it holds its debate
    /// leases under it, so a restart reclaims them at once); unset: a name
    /// generated once and kept in `SERVICE_DATA_DIR/replica-id`.
    pub replica_id: Option<String>,
    /// `SERVICE_DEPLOYMENT_ID`: names this deployment's NATS stream, subjects
    /// and consumers (1 to 32 of `A-Za-z0-9_-`); unset: generated at the
    /// first start with NATS and kept in the database.
    pub deployment_id: Option<String>,
    /// `SERVICE_REQUIRE_DISTRIBUTED` (formerly `SERVICE_REQUIRE_DISTRIBUTED_STATE`):
    /// refuse to start without PostgreSQL and NATS.
    pub require_distributed: bool,
    /// `SERVICE_SIGNING_KEY`: hex ed25519 seed for seals; generated when unset.
    pub signing_key: Option<Secret>,
    /// `SERVICE_SEAL_INTERVAL_SECONDS`: how often new events are sealed. Default 60.
    pub seal_interval: Duration,
    /// `SERVICE_RECEIPT_RETENTION_DAYS`: days a decision receipt is served
    /// after its debate finished. Default 2555 (seven years).
    pub receipt_retention_days: u32,
    /// `SERVICE_RECEIPT_CLEANUP_INTERVAL_HOURS`: how often expired receipts
    /// are looked for. Default 24.
    pub receipt_cleanup_interval: Duration,
    /// `SERVICE_LOG_LEVEL`: DEBUG, INFO (default), WARNING or ERROR.
    pub log_level: LogLevel,
    /// `SERVICE_LOG_FORMAT`: `json` for JSON lines, else human-readable text.
    pub log_json: bool,
    pub http: HttpSettings,
    pub rate_limits: RateLimitSettings,
    pub auth: AuthSettings,
    pub agents: AgentSettings,
    /// `SERVICE_WS_*`: the WebSocket push.
    pub push: PushSettings,
    /// `SERVICE_CONSUMER_RETRY_ATTEMPTS` (default 5),
    /// `SERVICE_CONSUMER_RETRY_BASE_MS` (100) and `SERVICE_CONSUMER_RETRY_MAX_MS`
    /// (30000): how consumers' transient failures are retried (exponential
    /// back-off) before their event is dead-lettered.
    pub consumer_retry: crate::bus::RetryPolicy,
    /// `SERVICE_WEBHOOK_*`: outgoing webhook deliveries.
    pub webhooks: WebhookSettings,
    /// `SERVICE_UI_*`: the web UI's pages.
    pub web: WebSettings,
    /// `SERVICE_NATS_PUBLIC_*`: the stream outside subscribers read.
    pub public_stream: PublicStreamSettings,
    /// `SCM_*`, `SERVICE_SCM_*`, `SERVICE_REVIEW_*`: the source-host
    /// webhook receiver, pull request and code reviews.
    pub scm: ScmSettings,
    /// `SERVICE_BACKUP_*`, `SERVICE_DR_*`: backups and recovery drills.
    pub backup: BackupSettings,
    /// Things worth a warning at start (deprecated names in use).
    pub warnings: Vec<String>,
    /// `SERVICE_AUDIT_*`: pages and exports of the audit API.
    pub audit: AuditSettings,
    /// `EXTIDP_OAUTH_*`, `OAUTH_*`, `SERVICE_SSO_*`: sign-in through
    /// identity providers.
    pub oauth: OAuthSettings,
}

impl Settings {
    /// Reads the settings from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the settings through `lookup`, so tests need not touch the environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let vars = Vars(lookup);
        let mut warnings = Vec::new();
        let environment = match vars
            .get("SERVICE_ENV")
            .map(|v| v.to_ascii_lowercase())
            .as_deref()
        {
            None | Some("development" | "dev" | "test" | "staging" | "local") => {
                Environment::Development
            }
            Some("production" | "prod") => Environment::Production,
            Some(other) => {
                return Err(ConfigError::new(
                    "SERVICE_ENV",
                    format!("must be development, test, staging or production, not {other:?}"),
                ));
            }
        };
        let log_level = match vars
            .get("SERVICE_LOG_LEVEL")
            .map(|v| v.to_ascii_uppercase())
            .as_deref()
        {
            None | Some("INFO") => LogLevel::Info,
            Some("DEBUG") => LogLevel::Debug,
            Some("WARNING" | "WARN") => LogLevel::Warning,
            Some("ERROR") => LogLevel::Error,
            Some(other) => {
                return Err(ConfigError::new(
                    "SERVICE_LOG_LEVEL",
                    format!("must be DEBUG, INFO, WARNING or ERROR, not {other:?}"),
                ));
            }
        };
        let require_distributed = if vars.get("SERVICE_REQUIRE_DISTRIBUTED").is_some() {
            vars.flag("SERVICE_REQUIRE_DISTRIBUTED", false)?
        } else if vars.get("SERVICE_REQUIRE_DISTRIBUTED_STATE").is_some() {
            warnings.push(
                "SERVICE_REQUIRE_DISTRIBUTED_STATE is deprecated; it is read as SERVICE_REQUIRE_DISTRIBUTED, please rename it".to_owned(),
            );
            vars.flag("SERVICE_REQUIRE_DISTRIBUTED_STATE", false)?
        } else {
            false
        };
        let auth = AuthSettings::read(&vars, &mut warnings)?;
        let oauth = OAuthSettings::read(&vars, &auth.public_url)?;
        let settings = Self {
            environment,
            data_dir: vars
                .get("SERVICE_DATA_DIR")
                .map_or_else(|| PathBuf::from(".nomic"), PathBuf::from),
            database_url: vars.get("DATABASE_URL").map(Secret::new),
            database_max_connections: vars.within_u32(
                "SERVICE_DATABASE_MAX_CONNECTIONS",
                1,
                10_000,
                16,
            )?,
            database_acquire_timeout: Duration::from_millis(vars.within(
                "SERVICE_DATABASE_ACQUIRE_TIMEOUT_MS",
                50,
                600_000,
                1_000,
            )?),
            read_model_wait: Duration::from_millis(vars.within(
                "SERVICE_READ_MODEL_WAIT_MS",
                10,
                600_000,
                5_000,
            )?),
            nats_url: vars.get("SERVICE_NATS_URL"),
            replica_id: vars.get("SERVICE_REPLICA_ID"),
            deployment_id: nats_name(&vars, "SERVICE_DEPLOYMENT_ID")?,
            require_distributed,
            signing_key: vars.get("SERVICE_SIGNING_KEY").map(Secret::new),
            seal_interval: Duration::from_secs(
                vars.within_u32("SERVICE_SEAL_INTERVAL_SECONDS", 1, 86_400, 60)?
                    .into(),
            ),
            receipt_retention_days: vars.within_u32(
                "SERVICE_RECEIPT_RETENTION_DAYS",
                1,
                36_500,
                2_555,
            )?,
            receipt_cleanup_interval: Duration::from_secs(
                u64::from(vars.within_u32(
                    "SERVICE_RECEIPT_CLEANUP_INTERVAL_HOURS",
                    1,
                    8_760,
                    24,
                )?) * 3_600,
            ),
            log_level,
            log_json: vars
                .get("SERVICE_LOG_FORMAT")
                .is_some_and(|v| v.eq_ignore_ascii_case("json")),
            http: HttpSettings::read(&vars)?,
            rate_limits: RateLimitSettings::read(&vars)?,
            auth,
            agents: AgentSettings::read(&vars)?,
            push: PushSettings::read(&vars)?,
            consumer_retry: crate::bus::RetryPolicy {
                attempts: vars.within_u32("SERVICE_CONSUMER_RETRY_ATTEMPTS", 1, 100, 5)?,
                first_delay: Duration::from_millis(vars.within(
                    "SERVICE_CONSUMER_RETRY_BASE_MS",
                    1,
                    600_000,
                    100,
                )?),
                max_delay: Duration::from_millis(vars.within(
                    "SERVICE_CONSUMER_RETRY_MAX_MS",
                    1,
                    3_600_000,
                    30_000,
                )?),
            },
            webhooks: WebhookSettings::read(&vars)?,
            web: WebSettings::read(&vars)?,
            public_stream: PublicStreamSettings::read(&vars)?,
            scm: ScmSettings::read(&vars, environment == Environment::Production)?,
            backup: BackupSettings::read(
                &vars,
                &vars
                    .get("SERVICE_DATA_DIR")
                    .map_or_else(|| PathBuf::from(".nomic"), PathBuf::from),
            )?,
            warnings,
            audit: AuditSettings::read(&vars)?,
            oauth,
        };
        settings.check_deployment()?;
        Ok(settings)
    }

    /// The checks that depend on how the service is deployed.
    fn check_deployment(&self) -> Result<(), ConfigError> {
        if self.require_distributed {
            if self.database_url.is_none() {
                return Err(ConfigError::new(
                    "SERVICE_REQUIRE_DISTRIBUTED",
                    "is true but DATABASE_URL (PostgreSQL) is not set",
                ));
            }
            if self.nats_url.is_none() {
                return Err(ConfigError::new(
                    "SERVICE_REQUIRE_DISTRIBUTED",
                    "is true but SERVICE_NATS_URL (NATS JetStream) is not set",
                ));
            }
        }
        if self.environment == Environment::Production && self.auth.jwt_secret.is_none() {
            return Err(ConfigError::new(
                "SERVICE_JWT_SECRET",
                "is required when SERVICE_ENV=production (at least 32 characters)",
            ));
        }
        // Replicas on one database must read each other's sealed fields and
        // find each other's email index: a key file per data directory
        // would differ between them.
        if self.environment == Environment::Production && self.database_url.is_some() {
            if self.auth.encryption.is_none() {
                return Err(ConfigError::new(
                    "SERVICE_ENCRYPTION_KEY",
                    "is required when SERVICE_ENV=production with DATABASE_URL (every replica needs the same key)",
                ));
            }
            if self.auth.blind_index.is_none() {
                return Err(ConfigError::new(
                    "SERVICE_BLIND_INDEX_KEY",
                    "is required when SERVICE_ENV=production with DATABASE_URL (every replica needs the same key)",
                ));
            }
        }
        Ok(())
    }
}

/// A name NATS can carry in stream names and subject tokens, or unset.
fn nats_name<F: Fn(&str) -> Option<String>>(
    vars: &Vars<F>,
    variable: &'static str,
) -> Result<Option<String>, ConfigError> {
    match vars.get(variable) {
        Some(value) if !crate::bus::nats::valid_name(&value) => Err(ConfigError::new(
            variable,
            format!("must be 1 to 32 of A-Z, a-z, 0-9, _ and -, not {value:?}"),
        )),
        value => Ok(value),
    }
}

#[cfg(test)]
mod tests;
