//! The HTTP face's settings: CORS, body and time limits, rate limits.

use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;

use super::values::{ConfigError, Secret, Vars};

/// Limits and CORS of the HTTP face.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// `SERVICE_ALLOWED_ORIGINS`: exact origins allowed by CORS; empty allows none.
    pub allowed_origins: Vec<String>,
    /// `SERVICE_MAX_REQUEST_BYTES`: largest request body. Default 1 MiB.
    pub max_body_bytes: usize,
    /// `SERVICE_REQUEST_TIMEOUT_SECONDS`: longest a request may take. Default 30.
    pub request_timeout: Duration,
}

/// How requests are counted and limited (§8.1).
#[derive(Debug, Clone)]
pub struct RateLimitSettings {
    /// `SERVICE_IP_RATE_LIMIT`: global requests per minute per client address. Default 120.
    pub ip_per_minute: u32,
    /// `SERVICE_RATE_LIMIT_DEFAULT` (or `SERVICE_RATE_LIMIT`): the per-user
    /// `default` action bucket per minute. Default 60.
    pub default_per_minute: u32,
    /// `SERVICE_RATE_LIMIT_DEBATE_CREATE`: debates a user may create per
    /// minute (the `debate_create` action and the `POST /api/debate`
    /// endpoint limit). Default 10; raise it for benchmarks.
    pub debate_create_per_minute: u32,
    /// `SERVICE_RATE_LIMIT_AUTH`: login attempts per minute per address. Default 10.
    pub login_per_minute: u32,
    /// `SERVICE_BURST_MULTIPLIER`: bucket capacity as a multiple of the rate. Default 2.
    pub burst_multiplier: f64,
    /// `SERVICE_TRUSTED_PROXIES`: networks whose `X-Forwarded-For` is believed.
    pub trusted_proxies: Vec<IpNet>,
    /// `SERVICE_RATE_LIMIT_FAIL_OPEN`: while Redis is unreachable, let
    /// requests through uncounted instead of counting them in memory.
    pub fail_open: bool,
    /// `SERVICE_REDIS_URL`: shared counters; unset keeps them in memory.
    pub redis_url: Option<Secret>,
}

impl HttpSettings {
    pub(super) fn read<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Self, ConfigError> {
        let allowed_origins = vars.list("SERVICE_ALLOWED_ORIGINS");
        for origin in &allowed_origins {
            check_origin(origin)?;
        }
        Ok(Self {
            allowed_origins,
            max_body_bytes: vars.positive("SERVICE_MAX_REQUEST_BYTES", 1024 * 1024)? as usize,
            request_timeout: Duration::from_secs(
                vars.positive("SERVICE_REQUEST_TIMEOUT_SECONDS", 30)?.into(),
            ),
        })
    }
}

fn check_origin(origin: &str) -> Result<(), ConfigError> {
    const VARIABLE: &str = "SERVICE_ALLOWED_ORIGINS";
    if origin.contains('*') {
        return Err(ConfigError::new(
            VARIABLE,
            "may not contain a wildcard: list each allowed origin (https://app.example.com)",
        ));
    }
    let rest = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"));
    match rest {
        Some(host) if !host.is_empty() && !host.contains('/') && origin.is_ascii() => Ok(()),
        _ => Err(ConfigError::new(
            VARIABLE,
            format!("items must be origins like https://app.example.com, not {origin:?}"),
        )),
    }
}

impl RateLimitSettings {
    pub(super) fn read<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Self, ConfigError> {
        let default_name = if vars.get("SERVICE_RATE_LIMIT_DEFAULT").is_some() {
            "SERVICE_RATE_LIMIT_DEFAULT"
        } else {
            "SERVICE_RATE_LIMIT"
        };
        let mut trusted_proxies = Vec::new();
        for item in vars.list("SERVICE_TRUSTED_PROXIES") {
            let net = item
                .parse::<IpNet>()
                .or_else(|_| item.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| {
                    ConfigError::new(
                        "SERVICE_TRUSTED_PROXIES",
                        format!(
                            "items must be addresses or networks like 10.0.0.0/8, not {item:?}"
                        ),
                    )
                })?;
            trusted_proxies.push(net);
        }
        Ok(Self {
            ip_per_minute: vars.positive("SERVICE_IP_RATE_LIMIT", 120)?,
            default_per_minute: vars.positive(default_name, 60)?,
            login_per_minute: vars.positive("SERVICE_RATE_LIMIT_AUTH", 10)?,
            debate_create_per_minute: vars.positive("SERVICE_RATE_LIMIT_DEBATE_CREATE", 10)?,
            burst_multiplier: vars.at_least("SERVICE_BURST_MULTIPLIER", 1.0, 2.0)?,
            trusted_proxies,
            fail_open: vars.flag("SERVICE_RATE_LIMIT_FAIL_OPEN", false)?,
            redis_url: vars.get("SERVICE_REDIS_URL").map(Secret::new),
        })
    }
}
