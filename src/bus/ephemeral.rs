//! Messages that are not events: published once to every replica of the
//! deployment that listens now, never stored, never replayed, dropped
//! rather than waited for. The streamed text of agent calls (`agent.delta`)
//! travels here: the recorded message that follows it is the truth.
//!
//! In process (the embedded back end) a message goes straight to the local
//! listeners; with NATS it is published on the core subject
//! `agon.<deployment>.<topic>.<key>` (no JetStream: nothing to keep) and
//! every replica, this one included, hears it through its subscription to
//! `agon.<deployment>.<topic>.>`. Both sides are bounded: a full outgoing
//! queue drops the message, and a listener that falls behind its ring
//! loses the oldest ones.

use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::{Mutex, broadcast, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::nats::DEPLOYMENT_HEADER;
use super::{Bus, pause};

/// A message's bytes, shared by every listener.
pub type Payload = Arc<[u8]>;

/// How long a lost subscription waits before it is made again.
const RESUBSCRIBE_DELAY: std::time::Duration = std::time::Duration::from_millis(500);

/// One topic of ephemeral messages; cheap to clone.
#[derive(Clone, Debug)]
pub struct Ephemeral(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    listeners: broadcast::Sender<Payload>,
    nats: Option<Nats>,
}

#[derive(Debug)]
struct Nats {
    client: async_nats::Client,
    deployment: String,
    /// `agon.<deployment>.<topic>`.
    prefix: String,
    queue: mpsc::Sender<(String, Payload)>,
    /// Taken by [`Ephemeral::spawn`].
    outgoing: Mutex<Option<mpsc::Receiver<(String, Payload)>>>,
}

impl Bus {
    /// The ephemeral messages of `topic` on this bus, `capacity` deep on
    /// each side.
    pub fn ephemeral(&self, topic: &str, capacity: usize) -> Ephemeral {
        let capacity = capacity.max(1);
        let nats = match self {
            Bus::Local(_) => None,
            Bus::Nats(bus) => {
                let (queue, outgoing) = mpsc::channel(capacity);
                let deployment = bus.identity().deployment().to_owned();
                Some(Nats {
                    client: bus.client(),
                    prefix: format!("agon.{deployment}.{topic}"),
                    deployment,
                    queue,
                    outgoing: Mutex::new(Some(outgoing)),
                })
            }
        };
        Ephemeral(Arc::new(Inner {
            listeners: broadcast::channel(capacity).0,
            nats,
        }))
    }
}

impl Ephemeral {
    /// Publishes `payload` under `key` (a NATS subject token: no `.`, `*`,
    /// `>` or white space); never waits.
    pub fn publish(&self, key: &str, payload: Payload) {
        match &self.0.nats {
            None => {
                // No listener is fine: nobody watches.
                let _ = self.0.listeners.send(payload);
            }
            Some(nats) => {
                let subject = format!("{}.{}", nats.prefix, token(key));
                if nats.queue.try_send((subject, payload)).is_err() {
                    metrics::counter!("service_ephemeral_dropped_total").increment(1);
                }
            }
        }
    }

    /// Every message published from now on, on any replica.
    pub fn subscribe(&self) -> broadcast::Receiver<Payload> {
        self.0.listeners.subscribe()
    }

    /// With NATS: the tasks that publish the queue and bring the
    /// deployment's messages to the local listeners, until `stop`.
    pub async fn spawn(&self, stop: &CancellationToken) -> Vec<JoinHandle<()>> {
        let Some(nats) = &self.0.nats else {
            return Vec::new();
        };
        let mut tasks = Vec::new();
        if let Some(mut outgoing) = nats.outgoing.lock().await.take() {
            let (client, deployment, stop) =
                (nats.client.clone(), nats.deployment.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    let (subject, payload) = tokio::select! {
                        () = stop.cancelled() => return,
                        next = outgoing.recv() => match next {
                            Some(next) => next,
                            None => return,
                        },
                    };
                    let mut headers = async_nats::HeaderMap::new();
                    headers.insert(DEPLOYMENT_HEADER, deployment.as_str());
                    if let Err(e) = client
                        .publish_with_headers(subject, headers, payload.to_vec().into())
                        .await
                    {
                        tracing::debug!(error = %e, "an ephemeral message was not published");
                    }
                }
            }));
        }
        let (inner, stop) = (self.0.clone(), stop.clone());
        tasks.push(tokio::spawn(async move { listen(inner, stop).await }));
        tasks
    }
}

/// Brings the deployment's messages to the local listeners, subscribing
/// again when the subscription ends, until `stop`.
async fn listen(inner: Arc<Inner>, stop: CancellationToken) {
    let Some(nats) = &inner.nats else {
        return;
    };
    let subjects = format!("{}.>", nats.prefix);
    loop {
        match nats.client.subscribe(subjects.clone()).await {
            Ok(mut subscription) => loop {
                let message = tokio::select! {
                    () = stop.cancelled() => return,
                    message = subscription.next() => match message {
                        Some(message) => message,
                        None => break,
                    },
                };
                let ours = message
                    .headers
                    .as_ref()
                    .and_then(|h| h.get(DEPLOYMENT_HEADER))
                    .is_some_and(|v| v.as_str() == nats.deployment);
                if ours {
                    let _ = inner.listeners.send(message.payload.to_vec().into());
                }
            },
            Err(e) => tracing::warn!(error = %e, "cannot subscribe to ephemeral messages"),
        }
        if !pause(&stop, RESUBSCRIBE_DELAY).await {
            return;
        }
    }
}

/// `key` as one subject token.
fn token(key: &str) -> String {
    let cleaned: String = key
        .chars()
        .map(|c| match c {
            '.' | '*' | '>' => '_',
            c if c.is_whitespace() => '_',
            c => c,
        })
        .collect();
    if cleaned.is_empty() {
        "_".to_owned()
    } else {
        cleaned
    }
}
