//! One typed settings tree, read once at start from the environment.
//!
//! Invalid configuration stops the start with a one-line message naming the
//! variable; secrets live in [`Secret`], whose `Debug` form never prints them.

use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

/// A value that must never reach a log line.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// `SERVICE_LOG_LEVEL` as the spec names its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Debug,
    Info,
    Warning,
    Error,
}

impl LogLevel {
    /// The `tracing` filter directive for this level.
    pub fn directive(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warning => "warn",
            LogLevel::Error => "error",
        }
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
#[error("invalid configuration: {variable} {problem}")]
pub struct ConfigError {
    pub variable: &'static str,
    pub problem: String,
}

/// Everything the service reads from its environment.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `SERVICE_DATA_DIR`: SQLite file, generated keys. Default `.nomic`.
    pub data_dir: PathBuf,
    /// `DATABASE_URL`: PostgreSQL; unset means the embedded SQLite store.
    pub database_url: Option<Secret>,
    /// `SERVICE_DATABASE_MAX_CONNECTIONS`: PostgreSQL pool size. Default 16.
    pub database_max_connections: u32,
    /// `SERVICE_NATS_URL`: NATS JetStream bus; unset means the in-process bus.
    pub nats_url: Option<String>,
    /// `SERVICE_SIGNING_KEY`: hex ed25519 seed for seals; generated when unset.
    pub signing_key: Option<Secret>,
    /// `SERVICE_SEAL_INTERVAL_SECONDS`: how often new events are sealed. Default 60.
    pub seal_interval: Duration,
    /// `SERVICE_LOG_LEVEL`: DEBUG, INFO (default), WARNING or ERROR.
    pub log_level: LogLevel,
    /// `SERVICE_LOG_FORMAT`: `json` for JSON lines, else human-readable text.
    pub log_json: bool,
}

impl Settings {
    /// Reads the settings from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the settings through `lookup`, so tests need not touch the environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let log_level = match get("SERVICE_LOG_LEVEL")
            .map(|v| v.to_ascii_uppercase())
            .as_deref()
        {
            None | Some("INFO") => LogLevel::Info,
            Some("DEBUG") => LogLevel::Debug,
            Some("WARNING" | "WARN") => LogLevel::Warning,
            Some("ERROR") => LogLevel::Error,
            Some(other) => {
                return Err(ConfigError {
                    variable: "SERVICE_LOG_LEVEL",
                    problem: format!("must be DEBUG, INFO, WARNING or ERROR, not {other:?}"),
                });
            }
        };
        Ok(Self {
            data_dir: get("SERVICE_DATA_DIR")
                .map_or_else(|| PathBuf::from(".nomic"), PathBuf::from),
            database_url: get("DATABASE_URL").map(Secret::new),
            database_max_connections: positive(&get, "SERVICE_DATABASE_MAX_CONNECTIONS", 16)?,
            nats_url: get("SERVICE_NATS_URL"),
            signing_key: get("SERVICE_SIGNING_KEY").map(Secret::new),
            seal_interval: Duration::from_secs(
                positive(&get, "SERVICE_SEAL_INTERVAL_SECONDS", 60)?.into(),
            ),
            log_level,
            log_json: get("SERVICE_LOG_FORMAT").is_some_and(|v| v.eq_ignore_ascii_case("json")),
        })
    }
}

fn positive(
    get: &impl Fn(&str) -> Option<String>,
    variable: &'static str,
    default: u32,
) -> Result<u32, ConfigError> {
    match get(variable) {
        None => Ok(default),
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| ConfigError {
                variable,
                problem: format!("must be a whole number above 0, not {text:?}"),
            }),
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
    fn secrets_do_not_print() {
        let s = settings(&[("DATABASE_URL", "postgres://u:hunter2@h/db")]).unwrap();
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
