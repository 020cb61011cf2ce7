//! Settings of outgoing webhooks (`SERVICE_WEBHOOK_*`).

use std::time::Duration;

use ipnet::IpNet;

use super::values::{ConfigError, Vars};

/// How deliveries are sent, retried and given up on.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// `SERVICE_WEBHOOK_TIMEOUT_SECONDS`: connect plus response. Default 10.
    pub timeout: Duration,
    /// `SERVICE_WEBHOOK_MAX_RESPONSE_BYTES`: the most of a response body
    /// read; the rest is dropped. Default 65536.
    pub max_response_bytes: usize,
    /// `SERVICE_WEBHOOK_RETRY_BASE_MS`: the first retry's delay, doubled per
    /// failure (with jitter). Default 5000.
    pub retry_base: Duration,
    /// `SERVICE_WEBHOOK_RETRY_MAX_MS`: the longest delay between attempts.
    /// Default 3600000 (an hour).
    pub retry_max: Duration,
    /// `SERVICE_WEBHOOK_MAX_AGE_SECONDS`: how long a delivery is retried
    /// after its first attempt before it is given up as `failed`. Default
    /// 259200 (three days).
    pub max_age: Duration,
    /// `SERVICE_WEBHOOK_FAILURE_THRESHOLD`: failed attempts in a row after
    /// which a subscription is disabled until its owner enables it. Default
    /// 40 (about 31 hours at the default schedule).
    pub failure_threshold: i64,
    /// `SERVICE_WEBHOOK_ALLOWED_NETWORKS`: private networks receivers may be
    /// in (CIDR list); every other private, loopback, link-local, CGNAT,
    /// multicast or metadata address is refused. Default none.
    pub allowed_networks: Vec<IpNet>,
    /// `SERVICE_WEBHOOK_CONCURRENCY`: deliveries in flight per replica. Default 8.
    pub concurrency: usize,
    /// `SERVICE_WEBHOOK_POLL_MS`: how often the worker looks for due
    /// deliveries when nothing woke it. Default 1000.
    pub poll: Duration,
    /// `SERVICE_WEBHOOK_MAX_PER_USER`: subscriptions one user may hold. Default 20.
    pub max_per_user: usize,
    /// `SERVICE_WEBHOOK_URL_MAX_CHARS`: the longest URL a subscription may
    /// have, in characters. Default 2048.
    pub url_max_chars: usize,
    /// `SERVICE_WEBHOOK_DESCRIPTION_MAX_CHARS`: the longest description a
    /// subscription may have, in characters. Default 500.
    pub description_max_chars: usize,
}

impl WebhookSettings {
    pub(super) fn read<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Self, ConfigError> {
        let ms = |variable, min, max, default| {
            vars.within(variable, min, max, default)
                .map(Duration::from_millis)
        };
        Ok(Self {
            timeout: Duration::from_secs(vars.within(
                "SERVICE_WEBHOOK_TIMEOUT_SECONDS",
                1,
                300,
                10,
            )?),
            max_response_bytes: usize::try_from(vars.within(
                "SERVICE_WEBHOOK_MAX_RESPONSE_BYTES",
                0,
                16 << 20,
                65_536,
            )?)
            .unwrap_or(65_536),
            retry_base: ms("SERVICE_WEBHOOK_RETRY_BASE_MS", 1, 3_600_000, 5_000)?,
            retry_max: ms("SERVICE_WEBHOOK_RETRY_MAX_MS", 1, 86_400_000, 3_600_000)?,
            max_age: Duration::from_secs(vars.within(
                "SERVICE_WEBHOOK_MAX_AGE_SECONDS",
                1,
                30 * 86_400,
                3 * 86_400,
            )?),
            failure_threshold: i64::from(vars.within_u32(
                "SERVICE_WEBHOOK_FAILURE_THRESHOLD",
                1,
                100_000,
                40,
            )?),
            allowed_networks: vars.networks("SERVICE_WEBHOOK_ALLOWED_NETWORKS")?,
            concurrency: vars.within_u32("SERVICE_WEBHOOK_CONCURRENCY", 1, 1_024, 8)? as usize,
            poll: ms("SERVICE_WEBHOOK_POLL_MS", 10, 60_000, 1_000)?,
            max_per_user: vars.within_u32("SERVICE_WEBHOOK_MAX_PER_USER", 1, 10_000, 20)? as usize,
            url_max_chars: vars.within_u32("SERVICE_WEBHOOK_URL_MAX_CHARS", 8, 65_536, 2_048)?
                as usize,
            description_max_chars: vars.within_u32(
                "SERVICE_WEBHOOK_DESCRIPTION_MAX_CHARS",
                1,
                65_536,
                500,
            )? as usize,
        })
    }
}
