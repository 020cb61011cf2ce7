//! Buckets shared by every replica, in Redis: the GCRA rule of `gcra.rs` as
//! one Lua script, timed by the Redis server's clock so replicas with skewed
//! clocks still agree. A failed call marks the store unavailable; a
//! background task reconnects and marks it available again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::RwLock;
use tokio_util::sync::CancellationToken;

use super::Quota;
use super::gcra::Outcome;

const SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local emission = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
if ARGV[3] ~= '1' then
  local remaining = math.floor((now + tolerance - tat) / emission)
  if remaining > 0 then return {1, remaining, 0, tat - now} end
  local retry = tat + emission - tolerance - now
  if retry < 0 then retry = 0 end
  return {0, 0, retry, tat - now}
end
local nxt = tat + emission
local allow_at = nxt - tolerance
if allow_at > now then return {0, 0, allow_at - now, tat - now} end
redis.call('SET', KEYS[1], string.format('%d', nxt), 'PX', math.ceil((nxt - now) / 1000) + 1)
return {1, math.floor((now + tolerance - nxt) / emission), 0, nxt - now}
";

/// Gives one cell back: the stored TAT moves back one emission interval,
/// never below Redis's now (then the key goes: the bucket is full).
const REFUND_SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local stored = redis.call('GET', KEYS[1])
if not stored then return 0 end
local tat = tonumber(stored) - tonumber(ARGV[1])
if tat <= now then
  redis.call('DEL', KEYS[1])
  return 0
end
redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
return 1
";

/// How long one limiter call may wait for Redis before the request is
/// counted by the fallback instead.
const CALL_TIMEOUT: Duration = Duration::from_millis(300);

#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    client: redis::Client,
    connection: RwLock<Option<ConnectionManager>>,
    available: AtomicBool,
    script: redis::Script,
    refund_script: redis::Script,
    origin: Instant,
    /// Milliseconds after `origin` of the last reconnection attempt.
    last_attempt: AtomicU64,
}

/// How often requests may trigger a reconnection attempt.
const RETRY_EVERY_MS: u64 = 1_000;

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("available", &self.available())
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RedisError {
    #[error("invalid SERVICE_REDIS_URL: {0}")]
    Url(redis::RedisError),
    #[error("redis is unavailable")]
    Unavailable,
    #[error("redis call failed: {0}")]
    Call(#[from] redis::RedisError),
    #[error("redis did not answer in time")]
    Timeout,
}

impl RedisStore {
    /// Parses the URL; connecting happens in [`RedisStore::connect`].
    pub fn new(url: &str) -> Result<Self, RedisError> {
        let client = redis::Client::open(url).map_err(RedisError::Url)?;
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                connection: RwLock::new(None),
                available: AtomicBool::new(false),
                script: redis::Script::new(SCRIPT),
                refund_script: redis::Script::new(REFUND_SCRIPT),
                origin: Instant::now(),
                last_attempt: AtomicU64::new(0),
            }),
        })
    }

    pub fn available(&self) -> bool {
        self.inner.available.load(Ordering::Relaxed)
    }

    /// Connects (or checks the connection) once; true when Redis answers.
    pub async fn connect(&self) -> bool {
        let existing = self.inner.connection.read().await.clone();
        let healthy = match existing {
            Some(mut connection) => {
                let cmd = redis::cmd("PING");
                let ping = cmd.query_async::<String>(&mut connection);
                let answered = matches!(tokio::time::timeout(CALL_TIMEOUT, ping).await, Ok(Ok(_)));
                if !answered {
                    // Start afresh next time rather than trust the manager's
                    // own reconnection, which gives up after its retries.
                    *self.inner.connection.write().await = None;
                }
                answered
            }
            None => {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(CALL_TIMEOUT))
                    .set_response_timeout(Some(CALL_TIMEOUT))
                    .set_number_of_retries(1)
                    .set_max_delay(Duration::from_millis(200));
                match ConnectionManager::new_with_config(self.inner.client.clone(), config).await {
                    Ok(connection) => {
                        *self.inner.connection.write().await = Some(connection);
                        true
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "redis connect failed");
                        false
                    }
                }
            }
        };
        let was = self.inner.available.swap(healthy, Ordering::Relaxed);
        if was != healthy {
            if healthy {
                tracing::info!("redis reachable: rate limits are shared again");
            } else {
                tracing::warn!("redis unreachable: rate limits fall back");
            }
        }
        healthy
    }

    /// Starts one reconnection attempt in the background, at most once a
    /// second, so traffic heals the connection without waiting for it.
    fn reconnect_soon(&self) {
        let now = u64::try_from(self.inner.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.inner.last_attempt.load(Ordering::Relaxed);
        if now.saturating_sub(last) < RETRY_EVERY_MS && last != 0 {
            return;
        }
        if self
            .inner
            .last_attempt
            .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            let store = self.clone();
            tokio::spawn(async move { store.connect().await });
        }
    }

    /// Checks the connection every `every` until `stop`.
    pub async fn watch(self, every: Duration, stop: CancellationToken) {
        loop {
            self.connect().await;
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
        }
    }

    /// Gives one cell of `key` back (see [`REFUND_SCRIPT`]).
    pub async fn refund(&self, key: &str, quota: Quota) -> Result<(), RedisError> {
        if !self.available() {
            self.reconnect_soon();
            return Err(RedisError::Unavailable);
        }
        let Some(mut connection) = self.inner.connection.read().await.clone() else {
            return Err(RedisError::Unavailable);
        };
        let mut invocation = self.inner.refund_script.key(key);
        invocation.arg(quota.emission());
        let call = invocation.invoke_async::<i64>(&mut connection);
        match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(RedisError::Call(e)),
            Err(_) => Err(RedisError::Timeout),
        }
    }

    /// Runs the bucket rule on `key`; `take` false only reads.
    pub async fn check(&self, key: &str, quota: Quota, take: bool) -> Result<Outcome, RedisError> {
        if !self.available() {
            self.reconnect_soon();
            return Err(RedisError::Unavailable);
        }
        let Some(mut connection) = self.inner.connection.read().await.clone() else {
            return Err(RedisError::Unavailable);
        };
        let mut invocation = self.inner.script.key(key);
        invocation
            .arg(quota.emission())
            .arg(quota.emission() * u64::from(quota.burst.max(1)))
            .arg(if take { "1" } else { "0" });
        let call = invocation.invoke_async::<(u8, u32, u64, u64)>(&mut connection);
        let result = match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Ok(values)) => Ok(values),
            Ok(Err(e)) => Err(RedisError::Call(e)),
            Err(_) => Err(RedisError::Timeout),
        };
        match result {
            Ok((allowed, remaining, retry_after, reset_after)) => Ok(Outcome {
                allowed: allowed == 1,
                remaining,
                retry_after,
                reset_after,
            }),
            Err(e) => {
                if self.inner.available.swap(false, Ordering::Relaxed) {
                    tracing::warn!(error = %e, "redis unreachable: rate limits fall back");
                }
                Err(e)
            }
        }
    }
}
