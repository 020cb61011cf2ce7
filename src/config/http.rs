//! The HTTP face's settings: CORS, body and time limits, rate limits.

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
    /// Connections: how many, how long they may stall.
    pub connections: ConnectionSettings,
    /// `SERVICE_DETAIL_CACHE_BYTES`: rendered debate details kept in memory
    /// (0 keeps none). Default 16 MiB.
    pub detail_cache_bytes: usize,
    /// `SERVICE_READ_CACHE_MS`, `SERVICE_READ_CACHE_ENTRIES`: recent list
    /// pages and leaderboards kept in memory. Default 1000 ms, 4096.
    pub read_cache: ReadCacheSettings,
    /// How much one list page, batch fetch or export may hold.
    pub pages: PageSettings,
    /// `SERVICE_RECENT_ERRORS`: error responses kept for
    /// `GET /api/system/errors` and the console. Default 200.
    pub recent_errors: usize,
}

/// The most one request may ask for at once, which the spec leaves open
/// (§8.2: "maximum page size of list endpoints: not shown").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageSettings {
    /// `SERVICE_MAX_PAGE_SIZE`: the largest `limit` of the list endpoints
    /// that page by `limit` and `offset` (debates, messages, gallery,
    /// rankings, webhooks and deliveries, receipts, reviews, users).
    /// Default 100.
    pub max_page: u32,
    /// `SERVICE_MAX_BATCH_IDS`: most ids in one `POST /api/debates/batch`.
    /// Default 100.
    pub max_batch: u32,
    /// `SERVICE_MAX_EXPORT_DEBATES`: most debates in one
    /// `GET /api/debates/export`, also its default. Default 10000.
    pub max_export: u32,
}

impl PageSettings {
    /// The default page size (§8.2's 20) is one the deployment allows.
    pub const DEFAULT_PAGE: u32 = 20;

    fn read<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Self, ConfigError> {
        Ok(Self {
            max_page: vars.within_u32("SERVICE_MAX_PAGE_SIZE", Self::DEFAULT_PAGE, 10_000, 100)?,
            max_batch: vars.within_u32("SERVICE_MAX_BATCH_IDS", 1, 10_000, 100)?,
            max_export: vars.within_u32("SERVICE_MAX_EXPORT_DEBATES", 1, 1_000_000, 10_000)?,
        })
    }
}

/// How long recent reads are kept and how many (`SERVICE_READ_CACHE_MS`,
/// `SERVICE_READ_CACHE_ENTRIES`); a zero keeps none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadCacheSettings {
    pub ttl: Duration,
    pub max_entries: usize,
}

/// What one client may hold of the listener (item: stalled connections
/// must not take the service from everyone).
#[derive(Debug, Clone)]
pub struct ConnectionSettings {
    /// `SERVICE_HTTP_HEADER_TIMEOUT_SECONDS`: longest a request's line and
    /// headers may take to arrive, from their first byte. Default 10.
    pub header_timeout: Duration,
    /// `SERVICE_HTTP_IDLE_TIMEOUT_SECONDS`: longest a connection may stay open
    /// without a request (a new one waiting for its first, or a kept-alive one
    /// between two). Default 60.
    pub idle_timeout: Duration,
    /// `SERVICE_MAX_CONNECTIONS`: open connections at once; more are refused
    /// with a 503 and closed. Default 4096.
    pub max_connections: u32,
    /// `SERVICE_MAX_CONNECTIONS_PER_IP`: open connections per client address
    /// (addresses in `SERVICE_TRUSTED_PROXIES` are exempt). Default 256.
    pub max_per_address: u32,
    /// `SERVICE_MAX_HEADER_BYTES`: the request line and headers together;
    /// a longer target gets 414, longer headers 431. Default 16384.
    pub max_header_bytes: usize,
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
    /// Per-minute rates of the endpoint, sign-in and action buckets that
    /// have no variable of their own in the spec (`SERVICE_RATE_LIMIT_<NAME>`).
    pub named: NamedLimits,
}

/// Rates §8.1 gives as figures; each has a variable so that none is fixed.
#[derive(Debug, Clone, Copy)]
pub struct NamedLimits {
    /// `SERVICE_RATE_LIMIT_HEALTH`: `GET /api/health` per caller. Default 120.
    pub health: u32,
    /// `SERVICE_RATE_LIMIT_DEBATE_LIST`: `GET /api/debates` per caller. Default 60.
    pub debate_list: u32,
    /// `SERVICE_RATE_LIMIT_REGISTER`: registrations per address. Default 5.
    pub register: u32,
    /// `SERVICE_RATE_LIMIT_OAUTH`: OAuth paths per address. Default 20.
    pub oauth: u32,
    /// `SERVICE_RATE_LIMIT_SSO`: SSO paths per address. Default 20.
    pub sso: u32,
    /// `SERVICE_RATE_LIMIT_VOTE`: the `vote` action per user. Default 30.
    pub vote: u32,
    /// `SERVICE_RATE_LIMIT_AGENT_CALL`: the `agent_call` action per user. Default 120.
    pub agent_call: u32,
    /// `SERVICE_RATE_LIMIT_EXPORT`: the `export` action per user. Default 5.
    pub export: u32,
    /// `SERVICE_RATE_LIMIT_ADMIN`: the `admin` action per user. Default 300.
    pub admin: u32,
}

/// The highest per-minute rate: one request a microsecond, the limiter's
/// unit. Above it the interval between two requests would round to zero.
pub const MAX_PER_MINUTE: u32 = 60_000_000;

/// A per-minute rate from 1 to [`MAX_PER_MINUTE`].
fn rate<F: Fn(&str) -> Option<String>>(
    vars: &Vars<F>,
    variable: &'static str,
    default: u32,
) -> Result<u32, ConfigError> {
    vars.within_u32(variable, 1, MAX_PER_MINUTE, default)
}

impl NamedLimits {
    fn read<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Self, ConfigError> {
        Ok(Self {
            health: rate(vars, "SERVICE_RATE_LIMIT_HEALTH", 120)?,
            debate_list: rate(vars, "SERVICE_RATE_LIMIT_DEBATE_LIST", 60)?,
            register: rate(vars, "SERVICE_RATE_LIMIT_REGISTER", 5)?,
            oauth: rate(vars, "SERVICE_RATE_LIMIT_OAUTH", 20)?,
            sso: rate(vars, "SERVICE_RATE_LIMIT_SSO", 20)?,
            vote: rate(vars, "SERVICE_RATE_LIMIT_VOTE", 30)?,
            agent_call: rate(vars, "SERVICE_RATE_LIMIT_AGENT_CALL", 120)?,
            export: rate(vars, "SERVICE_RATE_LIMIT_EXPORT", 5)?,
            admin: rate(vars, "SERVICE_RATE_LIMIT_ADMIN", 300)?,
        })
    }
}

impl HttpSettings {
    pub(super) fn read<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Self, ConfigError> {
        let allowed_origins = vars.list("SERVICE_ALLOWED_ORIGINS");
        for origin in &allowed_origins {
            check_origin(origin)?;
        }
        Ok(Self {
            allowed_origins,
            max_body_bytes: vars.within("SERVICE_MAX_REQUEST_BYTES", 1, 1 << 30, 1024 * 1024)?
                as usize,
            request_timeout: seconds(vars, "SERVICE_REQUEST_TIMEOUT_SECONDS", 30)?,
            connections: ConnectionSettings::read(vars)?,
            detail_cache_bytes: vars.within("SERVICE_DETAIL_CACHE_BYTES", 0, 1 << 30, 16 << 20)?
                as usize,
            read_cache: ReadCacheSettings {
                ttl: Duration::from_millis(vars.within(
                    "SERVICE_READ_CACHE_MS",
                    0,
                    60_000,
                    1_000,
                )?),
                max_entries: vars.within("SERVICE_READ_CACHE_ENTRIES", 0, 1_000_000, 4_096)?
                    as usize,
            },
            pages: PageSettings::read(vars)?,
            recent_errors: vars.within("SERVICE_RECENT_ERRORS", 1, 100_000, 200)? as usize,
        })
    }
}

/// Seconds from 1 to a day.
fn seconds<F: Fn(&str) -> Option<String>>(
    vars: &Vars<F>,
    variable: &'static str,
    default: u64,
) -> Result<Duration, ConfigError> {
    Ok(Duration::from_secs(
        vars.within(variable, 1, 86_400, default)?,
    ))
}

impl ConnectionSettings {
    fn read<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Self, ConfigError> {
        let max_connections = vars.within_u32("SERVICE_MAX_CONNECTIONS", 1, 1_000_000, 4096)?;
        Ok(Self {
            header_timeout: seconds(vars, "SERVICE_HTTP_HEADER_TIMEOUT_SECONDS", 10)?,
            idle_timeout: seconds(vars, "SERVICE_HTTP_IDLE_TIMEOUT_SECONDS", 60)?,
            max_connections,
            max_per_address: vars.within_u32(
                "SERVICE_MAX_CONNECTIONS_PER_IP",
                1,
                max_connections,
                256.min(max_connections),
            )?,
            max_header_bytes: vars.within("SERVICE_MAX_HEADER_BYTES", 1024, 1 << 20, 16 * 1024)?
                as usize,
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
        let trusted_proxies = vars.networks("SERVICE_TRUSTED_PROXIES")?;
        Ok(Self {
            ip_per_minute: rate(vars, "SERVICE_IP_RATE_LIMIT", 120)?,
            default_per_minute: rate(vars, default_name, 60)?,
            login_per_minute: rate(vars, "SERVICE_RATE_LIMIT_AUTH", 10)?,
            debate_create_per_minute: rate(vars, "SERVICE_RATE_LIMIT_DEBATE_CREATE", 10)?,
            burst_multiplier: burst(vars)?,
            trusted_proxies,
            fail_open: vars.flag("SERVICE_RATE_LIMIT_FAIL_OPEN", false)?,
            redis_url: vars.get("SERVICE_REDIS_URL").map(Secret::new),
            named: NamedLimits::read(vars)?,
        })
    }
}

/// `SERVICE_BURST_MULTIPLIER` from 1 to 1000: a capacity that stays a whole
/// number of requests for every rate.
fn burst<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<f64, ConfigError> {
    let value = vars.at_least("SERVICE_BURST_MULTIPLIER", 1.0, 2.0)?;
    if value > 1000.0 {
        return Err(ConfigError::new(
            "SERVICE_BURST_MULTIPLIER",
            format!("must be a number from 1 to 1000, not {value}"),
        ));
    }
    Ok(value)
}
