//! Outgoing webhooks (spec §6.2): the owner's subscriptions (the Webhook
//! aggregate, read through the `webhook_subscriptions` projection), the
//! consumer that turns debate events into delivery jobs ([`dispatch`]), the
//! worker that sends them signed ([`worker`], [`sign`]) past the SSRF guard
//! ([`guard`]), and the bodies they carry ([`payload`]).
//!
//! A subscription's secret is shown once, at creation and rotation; it is
//! stored sealed by the field cipher, in its events and its row.

pub mod dispatch;
pub mod guard;
pub mod jobs;
pub mod payload;
pub mod sign;
pub mod subscriptions;
pub mod url_form;
pub mod worker;

use std::sync::Arc;

use agon_aggregates::webhook::{Webhook, WebhookCommand, WebhookError};
use agon_aggregates::{CommandMeta, Refusal};
use agon_projections::WebhookSubscriptions;
use agon_projections::tables::TableProjection;
use thiserror::Error;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::config::WebhookSettings;
use crate::crypto::fields::FieldCipher;
use crate::store::{CommandError, EventLog, StoreError};
pub use jobs::DeliveryRow;
pub use subscriptions::SubscriptionRow;
use worker::{Sender, Worker};

#[derive(Debug, Error)]
pub enum WebhooksError {
    #[error("{}", .0.message)]
    Refused(Refusal),
    #[error(transparent)]
    Target(#[from] guard::TargetError),
    #[error("secret must be whsec_ followed by the base64 of 24 to 64 bytes")]
    BadSecret,
    #[error("at most {max} webhook subscriptions per user")]
    TooMany { max: usize },
    #[error("webhook subscription not found")]
    NotFound,
    #[error("delivery not found")]
    DeliveryNotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the webhook subscription stayed contended; try again")]
    Contended,
    #[error("cannot build the webhook HTTP client")]
    Client(#[source] reqwest::Error),
}

impl From<CommandError<WebhookError>> for WebhooksError {
    fn from(error: CommandError<WebhookError>) -> Self {
        match error {
            CommandError::Rejected(WebhookError::NotFound) => WebhooksError::NotFound,
            CommandError::Rejected(rejected) => WebhooksError::Refused(Refusal::of(&rejected)),
            CommandError::Store(e) => WebhooksError::Store(e),
            CommandError::Contended { .. } => WebhooksError::Contended,
        }
    }
}

/// What a new or changed subscription is given.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    pub description: Option<String>,
    pub active: Option<bool>,
}

/// A subscription with its secret, which is shown only now.
#[derive(Debug, Clone)]
pub struct WithSecret {
    pub subscription: SubscriptionRow,
    pub secret: String,
}

/// The webhooks service; cheap to clone.
#[derive(Debug, Clone)]
pub struct Webhooks {
    log: EventLog,
    clock: Clock,
    cipher: FieldCipher,
    sender: Sender,
    wake: Arc<Notify>,
}

impl Webhooks {
    pub fn new(
        log: EventLog,
        clock: Clock,
        cipher: FieldCipher,
        settings: &WebhookSettings,
    ) -> Result<Self, WebhooksError> {
        let sender = Sender::new(Arc::new(settings.clone()), cipher.clone(), clock.clone())
            .map_err(WebhooksError::Client)?;
        Ok(Self {
            log,
            clock,
            cipher,
            sender,
            wake: Arc::new(Notify::new()),
        })
    }

    /// The durable consumer that writes delivery jobs.
    pub fn dispatcher(&self) -> Arc<dispatch::Dispatcher> {
        Arc::new(dispatch::Dispatcher::new(
            self.log.clone(),
            self.wake.clone(),
        ))
    }

    /// Runs the delivery worker in a task of its own until `stop`.
    pub fn spawn_worker(&self, stop: &CancellationToken) -> tokio::task::JoinHandle<()> {
        let worker = Worker {
            log: self.log.clone(),
            sender: self.sender.clone(),
            wake: self.wake.clone(),
        };
        tokio::spawn(worker.run(stop.clone()))
    }

    /// The longest URL a subscription may have.
    pub fn url_max_chars(&self) -> usize {
        self.settings().url_max_chars
    }

    /// How many subscriptions one user may hold (all fit on one page).
    pub fn max_per_user(&self) -> usize {
        self.settings().max_per_user
    }

    /// The longest description a subscription may have, in characters.
    pub fn description_max_chars(&self) -> usize {
        self.settings().description_max_chars
    }

    fn settings(&self) -> &WebhookSettings {
        self.sender.settings()
    }

    fn now_ms(&self) -> i64 {
        self.clock.now().timestamp_millis()
    }

    /// Registers a subscription of `owner` and returns it with its secret.
    pub async fn create(
        &self,
        owner: &str,
        url: &str,
        events: Vec<String>,
        description: Option<String>,
        secret: Option<String>,
    ) -> Result<WithSecret, WebhooksError> {
        url_form::check(url, self.settings().url_max_chars)?;
        guard::check_target(url, &self.settings().allowed_networks).await?;
        let secret = match secret {
            Some(given) if sign::secret_key(&given).is_none() => {
                return Err(WebhooksError::BadSecret);
            }
            Some(given) => given,
            None => sign::new_secret(),
        };
        let max = self.settings().max_per_user;
        let (_, held) = subscriptions::list(&self.log, owner, false, 0, 0).await?;
        if usize::try_from(held).unwrap_or(usize::MAX) >= max {
            return Err(WebhooksError::TooMany { max });
        }
        let id = uuid::Uuid::new_v4().to_string();
        let at = self.clock.now();
        let create = WebhookCommand::Create {
            subscription_id: id.clone(),
            owner: owner.to_owned(),
            url: url.to_owned(),
            events,
            description,
            description_max: self.settings().description_max_chars,
            secret: self.cipher.encrypt(&secret),
            at,
        };
        self.log
            .execute::<Webhook>(&id, create, CommandMeta::by(owner))
            .await?;
        let subscription = self.shown(&id, |_| true).await?;
        Ok(WithSecret {
            subscription,
            secret,
        })
    }

    /// The row of `id` once `done` holds for it (or the row as it is when
    /// the projection is late).
    async fn shown(
        &self,
        id: &str,
        done: impl Fn(&SubscriptionRow) -> bool,
    ) -> Result<SubscriptionRow, WebhooksError> {
        let log = &self.log;
        let done = &done;
        crate::projection::wait_until(
            log,
            log.read_model_wait(),
            WebhookSubscriptions::NAME,
            id,
            || async move {
                Ok(subscriptions::get(log, id)
                    .await?
                    .is_some_and(|row| done(&row)))
            },
        )
        .await?;
        subscriptions::get(log, id)
            .await?
            .ok_or(WebhooksError::NotFound)
    }

    /// `owner`'s subscriptions and how many match.
    pub async fn list(
        &self,
        owner: &str,
        active_only: bool,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<SubscriptionRow>, i64), WebhooksError> {
        Ok(subscriptions::list(&self.log, owner, active_only, limit, offset).await?)
    }

    /// Subscription `id` when `owner` holds it.
    pub async fn get(&self, owner: &str, id: &str) -> Result<SubscriptionRow, WebhooksError> {
        subscriptions::get(&self.log, id)
            .await?
            .filter(|row| row.owner == owner)
            .ok_or(WebhooksError::NotFound)
    }

    /// Changes what `changes` gives; `active: true` re-enables a disabled
    /// subscription, whose waiting deliveries then go out at once.
    pub async fn update(
        &self,
        owner: &str,
        id: &str,
        changes: Changes,
    ) -> Result<SubscriptionRow, WebhooksError> {
        self.get(owner, id).await?;
        if let Some(url) = &changes.url {
            url_form::check(url, self.settings().url_max_chars)?;
            guard::check_target(url, &self.settings().allowed_networks).await?;
        }
        let at = self.clock.now();
        let update = WebhookCommand::Update {
            by: owner.to_owned(),
            url: changes.url,
            events: changes.events,
            description: changes.description,
            description_max: self.settings().description_max_chars,
            active: changes.active,
            at,
        };
        let done = self
            .log
            .execute::<Webhook>(id, update, CommandMeta::by(owner))
            .await?;
        let stamp = payload_time(at);
        let changed = !done.events.is_empty();
        let row = self
            .shown(id, |row| !changed || row.updated_at == stamp)
            .await?;
        if changes.active == Some(true) {
            jobs::resume(&self.log, id, self.now_ms()).await?;
            self.wake.notify_one();
        }
        Ok(row)
    }

    /// Deletes the subscription and forgets its deliveries.
    pub async fn delete(&self, owner: &str, id: &str) -> Result<(), WebhooksError> {
        let delete = WebhookCommand::Delete {
            by: owner.to_owned(),
            at: self.clock.now(),
        };
        self.log
            .execute::<Webhook>(id, delete, CommandMeta::by(owner))
            .await?;
        let log = &self.log;
        crate::projection::wait_until(
            log,
            log.read_model_wait(),
            WebhookSubscriptions::NAME,
            id,
            || async move { Ok(subscriptions::get(log, id).await?.is_none()) },
        )
        .await?;
        jobs::forget(&self.log, id).await?;
        Ok(())
    }

    /// A new secret for the subscription; the old one stops signing now.
    pub async fn rotate_secret(&self, owner: &str, id: &str) -> Result<WithSecret, WebhooksError> {
        let secret = sign::new_secret();
        let at = self.clock.now();
        let rotate = WebhookCommand::RotateSecret {
            by: owner.to_owned(),
            secret: self.cipher.encrypt(&secret),
            at,
        };
        self.log
            .execute::<Webhook>(id, rotate, CommandMeta::by(owner))
            .await?;
        let stamp = payload_time(at);
        let subscription = self.shown(id, |row| row.updated_at == stamp).await?;
        Ok(WithSecret {
            subscription,
            secret,
        })
    }

    /// Sends a signed `webhook.ping` now and records it as a delivery.
    pub async fn ping(&self, owner: &str, id: &str) -> Result<DeliveryRow, WebhooksError> {
        let row = self.get(owner, id).await?;
        let message_id = format!("msg_{}", uuid::Uuid::new_v4().simple());
        let data = payload::Ping {
            subscription_id: id.to_owned(),
            message: "A test message from Agon; it verifies like every delivery.".to_owned(),
        };
        let body = payload::body(payload::PING, self.clock.now(), data);
        let secret = serde_json::from_str(&row.secret).unwrap_or(serde_json::Value::Null);
        let attempt = self
            .sender
            .send(&row.url, &secret, &message_id, &body)
            .await;
        let delivery_id =
            jobs::record_ping(&self.log, id, &message_id, &body, &attempt, self.now_ms()).await?;
        jobs::get(&self.log, id, &delivery_id)
            .await?
            .ok_or(WebhooksError::DeliveryNotFound)
    }

    /// The subscription's deliveries, newest first, and how many there are.
    pub async fn deliveries(
        &self,
        owner: &str,
        id: &str,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<DeliveryRow>, i64), WebhooksError> {
        self.get(owner, id).await?;
        Ok(jobs::list(&self.log, id, limit, offset).await?)
    }

    /// Sends delivery `delivery_id` again (same `webhook-id`), in its turn.
    pub async fn redeliver(
        &self,
        owner: &str,
        id: &str,
        delivery_id: &str,
    ) -> Result<DeliveryRow, WebhooksError> {
        self.get(owner, id).await?;
        if jobs::get(&self.log, id, delivery_id).await?.is_none() {
            return Err(WebhooksError::DeliveryNotFound);
        }
        jobs::redeliver(&self.log, id, delivery_id, self.now_ms()).await?;
        self.wake.notify_one();
        jobs::get(&self.log, id, delivery_id)
            .await?
            .ok_or(WebhooksError::DeliveryNotFound)
    }
}

/// A time as the projection stores it.
fn payload_time(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}
