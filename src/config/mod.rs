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
mod values;
mod webhooks;

use std::path::PathBuf;
use std::time::Duration;

pub use agents::{AgentSettings, ProviderSettings};
pub use audit::AuditSettings;
pub use auth::{AuthSettings, MAX_ACCESS_HOURS};
pub use backup::BackupSettings;
pub use http::{
    ConnectionSettings, HttpSettings, MAX_PER_MINUTE, NamedLimits, RateLimitSettings,
    ReadCacheSettings,
};
pub use outside::PublicStreamSettings;
pub use push::{ConnectionCaps, PushSettings};
pub use scm::ScmSettings;
use values::Vars;
pub use values::{ConfigError, Environment, LogLevel, Secret};
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
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(vars: &[(&str, &str)]) -> Result<Settings, ConfigError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Settings::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn defaults_are_the_embedded_back_end() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.data_dir, PathBuf::from(".nomic"));
        assert!(s.database_url.is_none() && s.nats_url.is_none());
        assert_eq!(s.log_level, LogLevel::Info);
        assert_eq!(s.seal_interval, Duration::from_secs(60));
    }

    #[test]
    fn log_levels_follow_the_spec_names() {
        assert_eq!(
            settings(&[("SERVICE_LOG_LEVEL", "warning")])
                .unwrap()
                .log_level,
            LogLevel::Warning
        );
        let err = settings(&[("SERVICE_LOG_LEVEL", "LOUD")]).unwrap_err();
        assert_eq!(err.variable, "SERVICE_LOG_LEVEL");
    }

    #[test]
    fn bad_numbers_name_their_variable() {
        let err = settings(&[("SERVICE_SEAL_INTERVAL_SECONDS", "0")]).unwrap_err();
        assert_eq!(err.variable, "SERVICE_SEAL_INTERVAL_SECONDS");
    }

    #[test]
    fn production_on_a_shared_database_requires_the_field_keys() {
        let long = "j".repeat(32);
        let key = "ab".repeat(32);
        let base = [
            ("SERVICE_ENV", "production"),
            ("SERVICE_JWT_SECRET", long.as_str()),
            ("DATABASE_URL", "postgres://db/agon"),
        ];
        let err = settings(&base).unwrap_err();
        assert_eq!(err.variable, "SERVICE_ENCRYPTION_KEY");
        let mut with_one = base.to_vec();
        with_one.push(("SERVICE_ENCRYPTION_KEY", key.as_str()));
        assert_eq!(
            settings(&with_one).unwrap_err().variable,
            "SERVICE_BLIND_INDEX_KEY"
        );
        with_one.push(("SERVICE_BLIND_INDEX_KEY", key.as_str()));
        assert!(settings(&with_one).is_ok());
        // The embedded store has one process: its key files are enough.
        assert!(settings(&base[..2]).is_ok());
    }

    #[test]
    fn production_requires_a_long_jwt_secret() {
        let err = settings(&[("SERVICE_ENV", "production")]).unwrap_err();
        assert_eq!(err.variable, "SERVICE_JWT_SECRET");
        let err = settings(&[("SERVICE_JWT_SECRET", "short")]).unwrap_err();
        assert_eq!(err.variable, "SERVICE_JWT_SECRET");
        let long = "x".repeat(32);
        let s = settings(&[("SERVICE_ENV", "production"), ("SERVICE_JWT_SECRET", &long)]).unwrap();
        assert_eq!(s.environment, Environment::Production);
    }

    #[test]
    fn wildcard_and_malformed_origins_are_refused() {
        for bad in [
            "*",
            "https://*.example.com",
            "example.com",
            "https://a.example/path",
        ] {
            let err = settings(&[("SERVICE_ALLOWED_ORIGINS", bad)]).unwrap_err();
            assert_eq!(err.variable, "SERVICE_ALLOWED_ORIGINS", "{bad}");
        }
        let s = settings(&[(
            "SERVICE_ALLOWED_ORIGINS",
            "https://a.example, http://localhost:3000",
        )])
        .unwrap();
        assert_eq!(
            s.http.allowed_origins,
            ["https://a.example", "http://localhost:3000"]
        );
    }

    #[test]
    fn the_old_distributed_name_maps_to_the_new_one_with_a_warning() {
        let err = settings(&[("SERVICE_REQUIRE_DISTRIBUTED_STATE", "true")]).unwrap_err();
        assert_eq!(err.variable, "SERVICE_REQUIRE_DISTRIBUTED");
        let s = settings(&[
            ("SERVICE_REQUIRE_DISTRIBUTED_STATE", "true"),
            ("DATABASE_URL", "postgres://h/db"),
            ("SERVICE_NATS_URL", "nats://h:4222"),
        ])
        .unwrap();
        assert!(s.require_distributed);
        assert!(s.warnings[0].contains("SERVICE_REQUIRE_DISTRIBUTED_STATE"));
        let err = settings(&[
            ("SERVICE_REQUIRE_DISTRIBUTED", "true"),
            ("DATABASE_URL", "postgres://h/db"),
        ])
        .unwrap_err();
        assert!(err.problem.contains("SERVICE_NATS_URL"));
    }

    #[test]
    fn rate_limit_settings_parse_and_name_their_variable() {
        let s = settings(&[
            ("SERVICE_TRUSTED_PROXIES", "10.0.0.0/8, 127.0.0.1"),
            ("SERVICE_BURST_MULTIPLIER", "1.5"),
            ("SERVICE_RATE_LIMIT", "70"),
        ])
        .unwrap();
        assert_eq!(s.rate_limits.trusted_proxies.len(), 2);
        assert_eq!(s.rate_limits.burst_multiplier, 1.5);
        assert_eq!(s.rate_limits.default_per_minute, 70);
        assert_eq!(s.rate_limits.ip_per_minute, 120);
        for (name, value) in [
            ("SERVICE_TRUSTED_PROXIES", "not-a-net"),
            ("SERVICE_BURST_MULTIPLIER", "0.5"),
            ("SERVICE_RATE_LIMIT_FAIL_OPEN", "maybe"),
            ("SERVICE_IP_RATE_LIMIT", "-1"),
        ] {
            assert_eq!(settings(&[(name, value)]).unwrap_err().variable, name);
        }
    }

    #[test]
    fn secrets_do_not_print() {
        let s = settings(&[
            ("DATABASE_URL", "postgres://u:hunter2@h/db"),
            ("SERVICE_API_TOKEN", "static-hunter3-token"),
            ("SERVICE_SMTP_URL", "smtp://u:hunter4@mail:25"),
        ])
        .unwrap();
        let printed = format!("{s:?}");
        for secret in ["hunter2", "hunter3", "hunter4"] {
            assert!(!printed.contains(secret), "{secret} printed");
        }
    }

    #[test]
    fn token_settings_follow_the_spec_defaults() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.auth.access_ttl, Duration::from_secs(3_600));
        assert_eq!(s.auth.refresh_ttl, Duration::from_secs(7 * 86_400));
        assert_eq!(s.auth.max_sessions, 10);
        assert_eq!(s.auth.max_api_keys, 25);
        assert_eq!(s.auth.inactivity_timeout, Duration::from_secs(86_400));
        assert_eq!(s.auth.jwt_algorithm.as_str(), "HS256");
        let s = settings(&[("SERVICE_REFRESH_TOKEN_EXPIRY_DAYS", "30")]).unwrap();
        assert_eq!(s.auth.refresh_ttl, Duration::from_secs(30 * 86_400));
        let s = settings(&[
            ("SERVICE_REFRESH_TOKEN_EXPIRY_DAYS", "30"),
            ("SERVICE_JWT_REFRESH_EXPIRY_DAYS", "2"),
        ])
        .unwrap();
        assert_eq!(s.auth.refresh_ttl, Duration::from_secs(2 * 86_400));
    }

    #[test]
    fn the_api_key_cap_is_range_checked() {
        let s = settings(&[("SERVICE_MAX_API_KEYS_PER_USER", "3")]).unwrap();
        assert_eq!(s.auth.max_api_keys, 3);
        for bad in ["0", "1001", "many"] {
            let e = settings(&[("SERVICE_MAX_API_KEYS_PER_USER", bad)]).unwrap_err();
            assert_eq!(e.variable, "SERVICE_MAX_API_KEYS_PER_USER", "{bad}");
        }
    }

    #[test]
    fn access_lifetime_is_capped_with_a_warning() {
        let s = settings(&[("SERVICE_JWT_EXPIRY_HOURS", "500")]).unwrap();
        assert_eq!(s.auth.access_ttl, Duration::from_secs(168 * 3_600));
        assert!(
            s.warnings
                .iter()
                .any(|w| w.contains("SERVICE_JWT_EXPIRY_HOURS"))
        );
    }

    #[test]
    fn only_hmac_algorithms_and_good_keys_are_accepted() {
        for bad in ["none", "RS256", "hs1"] {
            let e = settings(&[("SERVICE_JWT_ALGORITHM", bad)]).unwrap_err();
            assert_eq!(e.variable, "SERVICE_JWT_ALGORITHM");
        }
        assert!(settings(&[("SERVICE_JWT_ALGORITHM", "hs512")]).is_ok());
        let key = "ab".repeat(32);
        assert!(settings(&[("SERVICE_ENCRYPTION_KEY", &key)]).is_ok());
        for bad in ["abc", &"zz".repeat(32), &format!("{key},")] {
            let e = settings(&[("SERVICE_ENCRYPTION_KEY", bad)]);
            if let Err(e) = e {
                assert_eq!(e.variable, "SERVICE_ENCRYPTION_KEY");
                assert!(!e.to_string().contains(&key), "the key is echoed");
            } else {
                panic!("{bad:?} accepted");
            }
        }
        let e = settings(&[("SERVICE_API_TOKEN", "short")]).unwrap_err();
        assert_eq!(e.variable, "SERVICE_API_TOKEN");
    }
}
