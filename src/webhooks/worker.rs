//! The delivery worker: claims due jobs ([`super::jobs`]), sends each signed,
//! and records the outcome; a failed job waits an exponentially growing,
//! jittered delay, is given up after `SERVICE_WEBHOOK_MAX_AGE_SECONDS`, and
//! a subscription failing `SERVICE_WEBHOOK_FAILURE_THRESHOLD` times in a
//! row is disabled until its owner enables it again. A job stays pending
//! until its response is recorded, so a crash mid-send sends it again
//! (at least once; receivers de-duplicate by `webhook-id`).

use std::sync::Arc;
use std::time::Duration;

use agon_aggregates::CommandMeta;
use agon_aggregates::webhook::{Webhook, WebhookCommand};
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use serde_json::Value;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::guard::{self, GuardedResolver};
use super::jobs::{self, Attempt, Job};
use super::sign;
use super::subscriptions;
use crate::clock::Clock;
use crate::config::WebhookSettings;
use crate::crypto::fields::FieldCipher;
use crate::errors::chain;
use crate::store::EventLog;

/// Beyond the send timeout, how long a claimed job stays with its worker.
const LEASE_MARGIN: Duration = Duration::from_secs(5);
/// The pause after the worker could not reach the store.
const STORE_RETRY: Duration = Duration::from_secs(1);

/// Sends one signed message; shared by the worker and the test ping.
#[derive(Debug, Clone)]
pub struct Sender {
    client: reqwest::Client,
    cipher: FieldCipher,
    clock: Clock,
    settings: Arc<WebhookSettings>,
}

impl Sender {
    pub fn new(
        settings: Arc<WebhookSettings>,
        cipher: FieldCipher,
        clock: Clock,
    ) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            .dns_resolver(Arc::new(GuardedResolver::new(
                settings.allowed_networks.clone(),
            )))
            .user_agent(concat!("agon-webhooks/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            client,
            cipher,
            clock,
            settings,
        })
    }

    pub fn settings(&self) -> &WebhookSettings {
        &self.settings
    }

    /// Posts `body` to `url`, signed with the sealed `secret`, as message
    /// `message_id`; reads at most the configured bytes of the answer.
    pub async fn send(&self, url: &str, secret: &Value, message_id: &str, body: &str) -> Attempt {
        match self.try_send(url, secret, message_id, body).await {
            Ok(code) if (200..300).contains(&code) => Attempt {
                response_code: Some(code),
                error: None,
            },
            Ok(code) if (300..400).contains(&code) => Attempt {
                response_code: Some(code),
                error: Some("redirects are not followed".to_owned()),
            },
            Ok(code) => Attempt {
                response_code: Some(code),
                error: Some(format!("receiver answered {code}")),
            },
            Err(error) => Attempt {
                response_code: None,
                error: Some(error),
            },
        }
    }

    async fn try_send(
        &self,
        url: &str,
        secret: &Value,
        message_id: &str,
        body: &str,
    ) -> Result<i64, String> {
        let allowed = &self.settings.allowed_networks;
        let target = guard::parse_target(url).map_err(|e| e.to_string())?;
        guard::check_literal(&target, allowed).map_err(|e| e.to_string())?;
        let secret = self
            .cipher
            .decrypt(secret)
            .map_err(|e| format!("cannot open the signing secret: {e}"))?;
        let key = sign::secret_key(&secret).ok_or("the signing secret is malformed")?;
        let timestamp = self.clock.unix();
        let signature = sign::signature(&key, message_id, timestamp, body);
        let mut response = self
            .client
            .post(target)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header("webhook-id", message_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body.to_owned())
            .send()
            .await
            .map_err(|e| chain(&e))?;
        let code = i64::from(response.status().as_u16());
        // Read (and drop) at most the cap, so that a huge answer costs little.
        let mut read = 0;
        while read < self.settings.max_response_bytes {
            match response.chunk().await {
                Ok(Some(chunk)) => read += chunk.len(),
                Ok(None) | Err(_) => break,
            }
        }
        Ok(code)
    }
}

/// The delay before retry number `failures` (1 for the first): the base
/// doubled per failure, at most the maximum, jittered down by up to half.
pub fn backoff(settings: &WebhookSettings, failures: i64) -> Duration {
    let doublings = u32::try_from(failures.clamp(1, 40) - 1).unwrap_or(0);
    let full = settings
        .retry_base
        .saturating_mul(2u32.saturating_pow(doublings))
        .min(settings.retry_max);
    let mut random = [0u8; 8];
    crate::crypto::secrets::fill_random(&mut random);
    let fraction = f64::from(u32::from_le_bytes([
        random[0], random[1], random[2], random[3],
    ])) / f64::from(u32::MAX);
    full.mul_f64(1.0 - fraction / 2.0)
}

/// The worker's loop and what it needs.
#[derive(Debug, Clone)]
pub struct Worker {
    pub(super) log: EventLog,
    pub(super) sender: Sender,
    pub(super) wake: Arc<Notify>,
}

impl Worker {
    /// Sends due jobs until `stop`; jobs in flight then stay pending and
    /// are sent again after their lease.
    pub async fn run(self, stop: CancellationToken) {
        let settings = self.sender.settings().clone();
        let lease = settings.timeout + LEASE_MARGIN;
        let mut running = JoinSet::new();
        loop {
            let free = settings.concurrency.saturating_sub(running.len());
            let mut pause = settings.poll;
            if free > 0 {
                let now = self.sender.clock.now().timestamp_millis();
                let until = now + i64::try_from(lease.as_millis()).unwrap_or(i64::MAX / 2);
                let limit = i64::try_from(free).unwrap_or(1);
                match jobs::claim(&self.log, now, until, limit, settings.failure_threshold).await {
                    Ok(claimed) => {
                        for job in claimed {
                            let worker = self.clone();
                            running.spawn(async move { worker.deliver(job).await });
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %chain(&e), "webhook worker cannot claim jobs");
                        pause = STORE_RETRY;
                    }
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(pause) => {}
                Some(_) = running.join_next(), if !running.is_empty() => {}
            }
        }
    }

    /// Sends one job and records the outcome.
    async fn deliver(&self, job: Job) {
        let settings = self.sender.settings();
        let attempt = match subscriptions::target(&self.log, &job.subscription_id).await {
            Ok(Some((url, secret))) => {
                self.sender
                    .send(&url, &secret, &job.message_id, &job.body)
                    .await
            }
            Ok(None) => Attempt {
                response_code: None,
                error: Some("the subscription is gone".to_owned()),
            },
            Err(e) => {
                tracing::warn!(error = %chain(&e), "webhook worker cannot read a subscription");
                return;
            }
        };
        let now = self.sender.clock.now().timestamp_millis();
        let first = job.first_attempt_at.unwrap_or(now);
        let age = Duration::from_millis(u64::try_from(now - first).unwrap_or(0));
        let retry_at = (age < settings.max_age).then(|| {
            let delay = backoff(settings, job.failures + 1);
            now + i64::try_from(delay.as_millis()).unwrap_or(i64::MAX / 2)
        });
        if let Err(e) = jobs::record(&self.log, &job, &attempt, now, retry_at).await {
            // The lease lapses and the job is sent again: at least once.
            tracing::warn!(error = %chain(&e), "webhook worker cannot record a delivery");
            return;
        }
        if attempt.succeeded() {
            return;
        }
        tracing::info!(
            subscription = %job.subscription_id,
            message = %job.message_id,
            error = attempt.error.as_deref().unwrap_or_default(),
            "webhook delivery failed"
        );
        if job.failures + 1 >= settings.failure_threshold {
            let disable = WebhookCommand::Disable {
                reason: "failing".to_owned(),
                at: self.sender.clock.now(),
            };
            let meta = CommandMeta::system();
            if let Err(e) = self
                .log
                .execute::<Webhook>(&job.subscription_id, disable, meta)
                .await
            {
                tracing::warn!(error = %e, "cannot disable a failing webhook subscription");
            } else {
                tracing::warn!(subscription = %job.subscription_id, "webhook subscription disabled after repeated failures");
            }
        }
    }
}
