//! Value types of the settings tree and the parsers that read them from
//! text, each failing with a [`ConfigError`] that names its variable.

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

/// `SERVICE_ENV`: `production` turns on the production checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Environment {
    Development,
    Production,
}

#[derive(Debug, Error, PartialEq, Eq)]
#[error("invalid configuration: {variable} {problem}")]
pub struct ConfigError {
    pub variable: &'static str,
    pub problem: String,
}

impl ConfigError {
    pub fn new(variable: &'static str, problem: impl Into<String>) -> Self {
        Self {
            variable,
            problem: problem.into(),
        }
    }
}

/// Reads trimmed, non-empty variables through a lookup function.
pub struct Vars<F>(pub F);

impl<F: Fn(&str) -> Option<String>> Vars<F> {
    pub fn get(&self, name: &str) -> Option<String> {
        (self.0)(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// A whole number above 0, or `default` when unset.
    pub fn positive(&self, variable: &'static str, default: u32) -> Result<u32, ConfigError> {
        match self.get(variable) {
            None => Ok(default),
            Some(text) => text.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                ConfigError::new(
                    variable,
                    format!("must be a whole number above 0, not {text:?}"),
                )
            }),
        }
    }

    /// A whole number from `min` to `max`, or `default` when unset. Every
    /// limit is read this way, so that a value the code cannot work with
    /// (a rate whose interval rounds to zero, a zero timeout) stops the start
    /// instead of failing requests later.
    pub fn within(
        &self,
        variable: &'static str,
        min: u64,
        max: u64,
        default: u64,
    ) -> Result<u64, ConfigError> {
        match self.get(variable) {
            None => Ok(default),
            Some(text) => text
                .parse::<u64>()
                .ok()
                .filter(|n| (min..=max).contains(n))
                .ok_or_else(|| {
                    ConfigError::new(
                        variable,
                        format!("must be a whole number from {min} to {max}, not {text:?}"),
                    )
                }),
        }
    }

    /// [`Self::within`] for values that fit in 32 bits.
    pub fn within_u32(
        &self,
        variable: &'static str,
        min: u32,
        max: u32,
        default: u32,
    ) -> Result<u32, ConfigError> {
        self.within(variable, min.into(), max.into(), default.into())
            .map(|n| u32::try_from(n).unwrap_or(max))
    }

    /// A number of at least `min`, or `default` when unset.
    pub fn at_least(
        &self,
        variable: &'static str,
        min: f64,
        default: f64,
    ) -> Result<f64, ConfigError> {
        match self.get(variable) {
            None => Ok(default),
            Some(text) => text
                .parse::<f64>()
                .ok()
                .filter(|n| n.is_finite() && *n >= min)
                .ok_or_else(|| {
                    ConfigError::new(
                        variable,
                        format!("must be a number of at least {min}, not {text:?}"),
                    )
                }),
        }
    }

    /// `true/false`, `1/0`, `yes/no`, `on/off`; `default` when unset.
    pub fn flag(&self, variable: &'static str, default: bool) -> Result<bool, ConfigError> {
        match self
            .get(variable)
            .map(|v| v.to_ascii_lowercase())
            .as_deref()
        {
            None => Ok(default),
            Some("true" | "1" | "yes" | "on") => Ok(true),
            Some("false" | "0" | "no" | "off") => Ok(false),
            Some(other) => Err(ConfigError::new(
                variable,
                format!("must be true or false, not {other:?}"),
            )),
        }
    }

    /// A comma-separated list with empty items dropped.
    pub fn list(&self, variable: &str) -> Vec<String> {
        self.get(variable)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A comma-separated list of addresses or networks (`10.0.0.0/8`).
    pub fn networks(&self, variable: &'static str) -> Result<Vec<ipnet::IpNet>, ConfigError> {
        self.list(variable)
            .into_iter()
            .map(|item| {
                item.parse::<ipnet::IpNet>()
                    .or_else(|_| item.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| {
                        ConfigError::new(
                            variable,
                            format!(
                                "items must be addresses or networks like 10.0.0.0/8, not {item:?}"
                            ),
                        )
                    })
            })
            .collect()
    }
}
