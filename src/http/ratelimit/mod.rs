//! Rate limits (§8.1): a global bucket per client address, the endpoint and
//! auth-path limits, and per-user buckets per action (tier-aware) once a
//! [`Principal`] is known. Counters live in memory, or in Redis when
//! `SERVICE_REDIS_URL` is set; while Redis is unreachable they fall back to
//! memory (or, with `SERVICE_RATE_LIMIT_FAIL_OPEN`, are not counted).

mod client_ip;
mod gcra;
pub mod middleware;
mod redis;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use utoipa::ToSchema;

pub use self::client_ip::client_ip;
use self::gcra::{MemoryStore, Micros, Outcome};
pub use self::redis::{RedisError, RedisStore};
use crate::config::RateLimitSettings;

/// Requests per minute and how many may come at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub struct Quota {
    pub per_minute: u32,
    pub burst: u32,
}

/// A per-user bucket (§8.1 "per-action limits").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Default,
    DebateCreate,
    Vote,
    AgentCall,
    Export,
    Admin,
}

impl Action {
    pub const ALL: [Action; 6] = [
        Action::Default,
        Action::DebateCreate,
        Action::Vote,
        Action::AgentCall,
        Action::Export,
        Action::Admin,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Action::Default => "default",
            Action::DebateCreate => "debate_create",
            Action::Vote => "vote",
            Action::AgentCall => "agent_call",
            Action::Export => "export",
            Action::Admin => "admin",
        }
    }
}

/// Account tiers with their own sustained rate and burst (first table of §8.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    Free,
    Starter,
    Professional,
    Enterprise,
}

impl Tier {
    pub const ALL: [Tier; 4] = [
        Tier::Free,
        Tier::Starter,
        Tier::Professional,
        Tier::Enterprise,
    ];

    pub fn quota(self) -> Quota {
        let (per_minute, burst) = match self {
            Tier::Free => (10, 60),
            Tier::Starter => (50, 100),
            Tier::Professional => (200, 400),
            Tier::Enterprise => (1000, 2000),
        };
        Quota { per_minute, burst }
    }

    pub fn name(self) -> &'static str {
        match self {
            Tier::Free => "free",
            Tier::Starter => "starter",
            Tier::Professional => "professional",
            Tier::Enterprise => "enterprise",
        }
    }
}

/// Sign-in paths limited per client address, strictly (no burst): they
/// guard credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthPath {
    Login,
    Register,
    Oauth,
    Sso,
}

impl AuthPath {
    pub const ALL: [AuthPath; 4] = [
        AuthPath::Login,
        AuthPath::Register,
        AuthPath::Oauth,
        AuthPath::Sso,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AuthPath::Login => "login",
            AuthPath::Register => "register",
            AuthPath::Oauth => "oauth",
            AuthPath::Sso => "sso",
        }
    }
}

/// Routes with a per-caller limit of their own (§8.1 "endpoint limits").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Health,
    DebateList,
}

/// The limit a route carries beyond the global and per-user ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathLimit {
    /// Per caller (user, else address) on this route.
    Endpoint(Endpoint),
    /// Per address, strict.
    Auth(AuthPath),
}

/// Who is calling, as far as the limiter cares. Authentication (the
/// accounts issue) puts it in the request's extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub user_id: String,
    pub tier: Option<Tier>,
}

/// One bucket's answer, with what the response headers report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub bucket: String,
    pub action: Option<Action>,
    pub allowed: bool,
    /// Sustained requests per minute.
    pub limit: u32,
    pub remaining: u32,
    retry_after: Micros,
    reset_after: Micros,
}

impl Verdict {
    fn new(bucket: String, action: Option<Action>, quota: Quota, outcome: Outcome) -> Self {
        Self {
            bucket,
            action,
            allowed: outcome.allowed,
            limit: quota.per_minute,
            remaining: outcome.remaining,
            retry_after: outcome.retry_after,
            reset_after: outcome.reset_after,
        }
    }

    /// A refusal by a cap on what is open at once rather than by a rate
    /// (a user's WebSocket connections): `limit` is the cap, nothing
    /// remains, and `retry_after` is a hint, since a slot frees when one
    /// of the caller's own connections ends.
    pub fn capped(bucket: &str, limit: u32, retry_after: std::time::Duration) -> Self {
        let wait = Micros::try_from(retry_after.as_micros()).unwrap_or(Micros::MAX);
        Self {
            bucket: bucket.to_owned(),
            action: None,
            allowed: false,
            limit,
            remaining: 0,
            retry_after: wait,
            reset_after: wait,
        }
    }

    /// Whole seconds to wait, at least 1 when refused.
    pub fn retry_after_secs(&self) -> u64 {
        let secs = self.retry_after.div_ceil(1_000_000);
        if self.allowed { secs } else { secs.max(1) }
    }

    /// Unix time at which the bucket is full again.
    pub fn reset_unix(&self) -> u64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        now + self.reset_after.div_ceil(1_000_000)
    }
}

/// What the limiter needs to know about a request.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    pub ip: IpAddr,
    /// The route's unversioned path, when a route matched.
    pub route: Option<&'a str>,
    pub path_limit: Option<PathLimit>,
    pub action: Action,
    pub principal: Option<&'a Principal>,
}

/// Where the counters are kept right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    Memory,
    Redis,
    /// Redis is configured but unreachable; counting in memory.
    MemoryFallback,
    /// Redis is configured but unreachable; not counting (fail open).
    FailOpen,
}

#[derive(Debug, Default)]
struct Counters {
    checked: AtomicU64,
    rejected: AtomicU64,
    uncounted: AtomicU64,
}

#[derive(Debug, Clone)]
pub struct RateLimiter {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    settings: RateLimitSettings,
    memory: MemoryStore,
    redis: Option<RedisStore>,
    counters: Counters,
}

impl RateLimiter {
    pub fn new(settings: &RateLimitSettings) -> Result<Self, RedisError> {
        let redis = match &settings.redis_url {
            Some(url) => Some(RedisStore::new(url.expose())?),
            None => None,
        };
        Ok(Self {
            inner: Arc::new(Inner {
                settings: settings.clone(),
                memory: MemoryStore::default(),
                redis,
                counters: Counters::default(),
            }),
        })
    }

    pub fn settings(&self) -> &RateLimitSettings {
        &self.inner.settings
    }

    pub fn redis(&self) -> Option<&RedisStore> {
        self.inner.redis.as_ref()
    }

    /// `not_configured`, `healthy` or `unavailable`: what health reports.
    pub fn redis_status(&self) -> &'static str {
        match &self.inner.redis {
            None => "not_configured",
            Some(redis) if redis.available() => "healthy",
            Some(_) => "unavailable",
        }
    }

    pub fn backend(&self) -> Backend {
        match &self.inner.redis {
            None => Backend::Memory,
            Some(redis) if redis.available() => Backend::Redis,
            Some(_) if self.inner.settings.fail_open => Backend::FailOpen,
            Some(_) => Backend::MemoryFallback,
        }
    }

    /// `rate` with the burst multiplier applied.
    pub fn bursty(&self, per_minute: u32) -> Quota {
        let burst = (f64::from(per_minute) * self.inner.settings.burst_multiplier).ceil();
        Quota {
            per_minute,
            burst: (burst as u32).max(per_minute),
        }
    }

    pub fn ip_quota(&self) -> Quota {
        self.bursty(self.inner.settings.ip_per_minute)
    }

    pub fn auth_quota(&self, path: AuthPath) -> Quota {
        let per_minute = match path {
            AuthPath::Login => self.inner.settings.login_per_minute,
            AuthPath::Register => self.inner.settings.named.register,
            AuthPath::Oauth => self.inner.settings.named.oauth,
            AuthPath::Sso => self.inner.settings.named.sso,
        };
        Quota {
            per_minute,
            burst: per_minute,
        }
    }

    /// A user's bucket for `action`; a tier replaces the `default` bucket.
    pub fn action_quota(&self, action: Action, tier: Option<Tier>) -> Quota {
        let per_minute = match action {
            Action::Default => match tier {
                Some(tier) => return tier.quota(),
                None => self.inner.settings.default_per_minute,
            },
            Action::DebateCreate => self.inner.settings.debate_create_per_minute,
            Action::Vote => self.inner.settings.named.vote,
            Action::AgentCall => self.inner.settings.named.agent_call,
            Action::Export => self.inner.settings.named.export,
            Action::Admin => self.inner.settings.named.admin,
        };
        self.bursty(per_minute)
    }

    /// A route's own per-caller bucket.
    pub fn endpoint_quota(&self, endpoint: Endpoint) -> Quota {
        let named = &self.inner.settings.named;
        self.bursty(match endpoint {
            Endpoint::Health => named.health,
            Endpoint::DebateList => named.debate_list,
        })
    }

    /// One bucket; `None` when the request passes uncounted (fail open).
    async fn check(&self, key: &str, quota: Quota, take: bool) -> Option<Outcome> {
        if let Some(redis) = &self.inner.redis {
            match redis.check(key, quota, take).await {
                Ok(outcome) => return Some(outcome),
                Err(_) if self.inner.settings.fail_open => return None,
                Err(_) => {}
            }
        }
        Some(if take {
            self.inner.memory.take(key, quota)
        } else {
            self.inner.memory.peek(key, quota)
        })
    }

    /// Takes a cell from every bucket the request falls in, in order, and
    /// stops at the first refusal. `Ok` carries the bucket the headers
    /// report: the user's action bucket when there is a user (§8.1 rule 1),
    /// else the one closest to its limit; `Err` the refusing one.
    pub async fn admit(&self, facts: Facts<'_>) -> Result<Option<Verdict>, Verdict> {
        let mut buckets: Vec<(String, String, Quota, Option<Action>)> =
            vec![("ip".to_owned(), facts.ip.to_string(), self.ip_quota(), None)];
        let subject = facts
            .principal
            .map_or_else(|| facts.ip.to_string(), |p| format!("user:{}", p.user_id));
        match (facts.path_limit, facts.route) {
            (Some(PathLimit::Auth(path)), _) => buckets.push((
                format!("auth:{}", path.name()),
                facts.ip.to_string(),
                self.auth_quota(path),
                None,
            )),
            (Some(PathLimit::Endpoint(endpoint)), Some(route)) => buckets.push((
                format!("endpoint:{route}"),
                subject,
                self.endpoint_quota(endpoint),
                None,
            )),
            _ => {}
        }
        if let Some(principal) = facts.principal {
            buckets.push((
                format!("user:{}", facts.action.name()),
                principal.user_id.clone(),
                self.action_quota(facts.action, principal.tier),
                Some(facts.action),
            ));
        }
        let mut tightest: Option<Verdict> = None;
        for (bucket, subject, quota, action) in buckets {
            self.inner.counters.checked.fetch_add(1, Ordering::Relaxed);
            let key = format!("agon:rl:{bucket}:{subject}");
            let Some(outcome) = self.check(&key, quota, true).await else {
                self.inner
                    .counters
                    .uncounted
                    .fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let verdict = Verdict::new(bucket, action, quota, outcome);
            if !verdict.allowed {
                self.inner.counters.rejected.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("service_rate_limit_rejections_total", "bucket" => bucket_kind(&verdict.bucket)).increment(1);
                return Err(verdict);
            }
            let reported = verdict.action.is_some()
                || tightest
                    .as_ref()
                    .is_none_or(|t| t.action.is_none() && verdict.remaining < t.remaining);
            if reported {
                tightest = Some(verdict);
            }
        }
        Ok(tightest)
    }

    /// Gives back the cell `admit` took from `principal`'s `action` bucket,
    /// for a request that turned out not to use the action (a refused
    /// create). Where that cell was taken does not matter: a refund in the
    /// memory fallback of a cell taken in Redis only errs towards the user.
    pub async fn refund(&self, principal: &Principal, action: Action) {
        let quota = self.action_quota(action, principal.tier);
        let key = format!("agon:rl:user:{}:{}", action.name(), principal.user_id);
        if let Some(redis) = &self.inner.redis {
            match redis.refund(&key, quota).await {
                Ok(()) => return,
                Err(_) if self.inner.settings.fail_open => return,
                Err(_) => {}
            }
        }
        self.inner.memory.refund(&key, quota);
    }

    /// A user's standing in every action bucket, without taking anything.
    pub async fn user_status(&self, principal: &Principal) -> BTreeMap<&'static str, Verdict> {
        let mut status = BTreeMap::new();
        for action in Action::ALL {
            let quota = self.action_quota(action, principal.tier);
            let bucket = format!("user:{}", action.name());
            let key = format!("agon:rl:{bucket}:{}", principal.user_id);
            let outcome = self.check(&key, quota, false).await.unwrap_or(Outcome {
                allowed: true,
                remaining: quota.burst,
                retry_after: 0,
                reset_after: 0,
            });
            status.insert(
                action.name(),
                Verdict::new(bucket, Some(action), quota, outcome),
            );
        }
        status
    }

    /// Totals since start: (buckets checked, refusals, passes uncounted).
    pub fn totals(&self) -> (u64, u64, u64) {
        let c = &self.inner.counters;
        (
            c.checked.load(Ordering::Relaxed),
            c.rejected.load(Ordering::Relaxed),
            c.uncounted.load(Ordering::Relaxed),
        )
    }

    /// Buckets held in this process's memory that are not full.
    pub fn tracked_in_memory(&self) -> usize {
        self.inner.memory.tracked()
    }
}

/// The bucket family, a low-cardinality metric label.
fn bucket_kind(bucket: &str) -> String {
    bucket.split(':').next().unwrap_or(bucket).to_owned()
}
