//! A subscriber of an Agon deployment's public NATS stream: it reads
//! `debate.completed`, `debate.verdict` and `debate.failed` through a durable
//! pull consumer, prints each once by its id, and acks it, so that a restart
//! of this program (or of the service) goes on where it stopped.
//!
//! ```text
//! cargo run --example subscribe -- --url nats://127.0.0.1:4222 --deployment <id>
//! ```
//!
//! Each line is `<id> <type> <debate_id> <topic>`; the body is the webhook
//! body (`event-schemas/webhooks/<type>.v1.json`), the id is the message's
//! `Nats-Msg-Id` (the service's event id).

use std::collections::HashSet;
use std::ops::ControlFlow;

use async_nats::jetstream::{self, consumer};
use clap::Parser;
use futures::StreamExt;
use serde_json::Value;

/// Any failure of the subscriber.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// One message of the stream.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// `Nats-Msg-Id`: the event id, the same on every copy of the message.
    pub id: String,
    /// The NATS subject it was published on.
    pub subject: String,
    /// The whole body: `{type, version, timestamp, data}`.
    pub body: Value,
}

impl Outcome {
    /// `debate.completed`, `debate.verdict` or `debate.failed`.
    pub fn kind(&self) -> &str {
        self.body["type"].as_str().unwrap_or_default()
    }

    pub fn debate_id(&self) -> &str {
        self.body["data"]["debate_id"].as_str().unwrap_or_default()
    }
}

/// Where to read.
#[derive(Debug, Clone, Parser)]
#[command(about = "Follow an Agon deployment's debate outcomes on NATS")]
pub struct Options {
    /// The NATS server.
    #[arg(long, env = "NATS_URL", default_value = "nats://127.0.0.1:4222")]
    pub url: String,
    /// The deployment id (`SERVICE_DEPLOYMENT_ID`, or the one the service logs at start).
    #[arg(long)]
    pub deployment: String,
    /// The stream, when the service sets `SERVICE_NATS_PUBLIC_STREAM`.
    #[arg(long)]
    pub stream: Option<String>,
    /// This subscriber's durable consumer: its position survives restarts.
    #[arg(long, default_value = "example-subscriber")]
    pub durable: String,
    /// Only this type (`debate.completed`, ...); every type when unset.
    #[arg(long)]
    pub only: Option<String>,
}

impl Options {
    fn stream(&self) -> String {
        self.stream
            .clone()
            .unwrap_or_else(|| format!("AGON_{}_PUBLIC", self.deployment))
    }

    fn filter(&self) -> String {
        let kind = self.only.as_deref().unwrap_or(">");
        format!("agon.{}.public.{kind}", self.deployment)
    }
}

fn not_found(error: &jetstream::context::GetStreamError) -> bool {
    matches!(error.kind(), jetstream::context::GetStreamErrorKind::JetStream(e)
        if e.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND)
}

/// Hands each message to `each`, in stream order, and acks it once `each`
/// returned (waiting for the server to confirm the ack), until `each`
/// breaks. A message not acked (a crash in `each`) comes again.
pub async fn follow(
    options: &Options,
    mut each: impl FnMut(Outcome) -> ControlFlow<()>,
) -> Result<(), Error> {
    let client = async_nats::connect(&options.url).await?;
    let jetstream = jetstream::new(client);
    // The service makes the stream at its first publish; until then, wait.
    let stream = loop {
        match jetstream.get_stream(options.stream()).await {
            Ok(stream) => break stream,
            Err(e) if not_found(&e) => {
                eprintln!("waiting for stream {}: {e}", options.stream());
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            Err(e) => return Err(e.into()),
        }
    };
    let consumer = stream
        .get_or_create_consumer(
            &options.durable,
            consumer::pull::Config {
                durable_name: Some(options.durable.clone()),
                ack_policy: consumer::AckPolicy::Explicit,
                deliver_policy: consumer::DeliverPolicy::All,
                filter_subject: options.filter(),
                ..Default::default()
            },
        )
        .await?;
    let mut messages = consumer.messages().await?;
    while let Some(message) = messages.next().await {
        let message = message?;
        let id = message
            .headers
            .as_ref()
            .and_then(|h| h.get("Nats-Msg-Id"))
            .map(|v| v.as_str().to_owned())
            .unwrap_or_default();
        let outcome = Outcome {
            id,
            subject: message.subject.to_string(),
            body: serde_json::from_slice(&message.payload)?,
        };
        let flow = each(outcome);
        message.double_ack().await?;
        if flow.is_break() {
            break;
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let options = Options::parse();
    // A message redelivered after a crash of this program between printing
    // and acking is printed once more only if the program restarted in
    // between; within a run the id decides.
    let mut seen = HashSet::new();
    follow(&options, |outcome| {
        if seen.insert(outcome.id.clone()) {
            println!(
                "{} {} {} {}",
                outcome.id,
                outcome.kind(),
                outcome.debate_id(),
                outcome.body["data"]["topic"].as_str().unwrap_or_default()
            );
        }
        ControlFlow::Continue(())
    })
    .await
}
