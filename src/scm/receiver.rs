//! The webhook receiver (§6.3): a delivery is taken only with a valid
//! signature (or, with no secret set, in explicit demo mode), once per
//! delivery id (the id's stream in the log remembers it across restarts),
//! and does what its event asks: `pull_request` opened or synchronize
//! queues a review, `issues` opened a triage debate, `push` and
//! `installation` are tracked, `ping` acknowledged; the rest is ignored
//! with a reason. The action runs before the receipt is recorded, so a
//! failure leaves the delivery to the host's redelivery.

use agon_aggregates::CommandMeta;
use agon_aggregates::review::delivery::{
    Receipt, ScmDelivery, ScmDeliveryCommand, ScmDeliveryError,
};
use serde::Deserialize;
use thiserror::Error;

use super::{Repository, Scm, ScmError, signature};
use crate::debates::{CreateError, NewDebate};
use crate::store::{CommandError, StoreError};

/// A delivery as it arrived: the host's headers and the raw body.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    /// `X-GitHub-Event`.
    pub event: Option<&'a str>,
    /// `X-GitHub-Delivery`.
    pub id: Option<&'a str>,
    /// `X-Hub-Signature-256`.
    pub signature: Option<&'a str>,
    pub body: &'a [u8],
}

#[derive(Debug, Error)]
pub enum ReceiveError {
    #[error("webhook deliveries are refused: SCM_WEBHOOK_SECRET is not set")]
    NoSecret,
    #[error("missing X-Hub-Signature-256")]
    Unsigned,
    #[error("the signature does not match the body")]
    BadSignature,
    #[error("missing {0}")]
    MissingHeader(&'static str),
    #[error("the body is not the event's JSON: {0}")]
    BadPayload(#[source] serde_json::Error),
    #[error(transparent)]
    Scm(#[from] ScmError),
    #[error(transparent)]
    Debate(#[from] CreateError),
    #[error("event store: {0}")]
    Store(#[from] StoreError),
    #[error("the delivery's stream stayed contended; the host will redeliver")]
    Contended,
}

/// What became of a delivery.
#[derive(Debug, Clone)]
pub struct Received {
    pub receipt: Receipt,
    /// This delivery id was taken before; nothing was done again.
    pub duplicate: bool,
    /// Why nothing was done (`ignored`).
    pub reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Payload {
    action: Option<String>,
    repository: Option<Repo>,
    installation: Option<Installation>,
    pull_request: Option<Numbered>,
    issue: Option<Numbered>,
    #[serde(rename = "ref")]
    reference: Option<String>,
    after: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Repo {
    full_name: String,
}

#[derive(Debug, Deserialize)]
struct Installation {
    id: u64,
}

#[derive(Debug, Deserialize)]
struct Numbered {
    number: u64,
    title: Option<String>,
    body: Option<String>,
    head: Option<Head>,
}

#[derive(Debug, Deserialize)]
struct Head {
    sha: String,
}

impl Scm {
    /// Verifies, de-duplicates and acts on one delivery.
    #[tracing::instrument(level = "debug", skip_all, fields(event = delivery.event), err(level = "debug"))]
    pub async fn receive(&self, delivery: Delivery<'_>) -> Result<Received, ReceiveError> {
        match (&self.settings.webhook_secret, delivery.signature) {
            (Some(secret), Some(header)) => {
                if !signature::verify(secret.expose(), delivery.body, header) {
                    return Err(ReceiveError::BadSignature);
                }
            }
            (Some(_), None) => return Err(ReceiveError::Unsigned),
            (None, _) if self.settings.demo => {}
            (None, _) => return Err(ReceiveError::NoSecret),
        }
        let event = delivery
            .event
            .ok_or(ReceiveError::MissingHeader("X-GitHub-Event"))?;
        let id = delivery
            .id
            .filter(|id| !id.is_empty() && id.len() <= 200)
            .ok_or(ReceiveError::MissingHeader("X-GitHub-Delivery"))?;
        let stream = format!("github:{id}");
        if let Some(receipt) = self.earlier(&stream).await? {
            return Ok(duplicate(receipt));
        }
        let payload: Payload =
            serde_json::from_slice(delivery.body).map_err(ReceiveError::BadPayload)?;
        let mut receipt = Receipt {
            delivery_id: id.to_owned(),
            event: event.to_owned(),
            action: payload.action.clone(),
            repository: payload.repository.as_ref().map(|r| r.full_name.clone()),
            installation_id: payload.installation.as_ref().map(|i| i.id),
            ..Receipt::default()
        };
        let reason = self.act(&payload, &mut receipt).await?;
        let command = ScmDeliveryCommand::Receive {
            receipt: receipt.clone(),
            at: self.reviews.now(),
        };
        match self
            .log
            .execute::<ScmDelivery>(&stream, command, CommandMeta::by("scm-webhook"))
            .await
        {
            Ok(_) => Ok(Received {
                receipt,
                duplicate: false,
                reason,
            }),
            // The same delivery arrived twice at once; the other one counts.
            Err(CommandError::Rejected(ScmDeliveryError::Duplicate)) => {
                match self.earlier(&stream).await? {
                    Some(first) => Ok(duplicate(first)),
                    None => Err(ReceiveError::Contended),
                }
            }
            Err(CommandError::Store(e)) => Err(e.into()),
            Err(CommandError::Contended { .. }) => Err(ReceiveError::Contended),
        }
    }

    /// The receipt of an earlier delivery with this id.
    async fn earlier(&self, stream: &str) -> Result<Option<Receipt>, ReceiveError> {
        match self.log.load::<ScmDelivery>(stream).await {
            Ok(state) => Ok(state.receipt),
            Err(CommandError::Store(e)) => Err(e.into()),
            Err(_) => Err(ReceiveError::Contended),
        }
    }

    /// Does what the event asks; fills the receipt's outcome and returns
    /// why nothing was done, if so.
    async fn act(
        &self,
        payload: &Payload,
        receipt: &mut Receipt,
    ) -> Result<Option<String>, ReceiveError> {
        let action = payload.action.as_deref();
        let ignored = |receipt: &mut Receipt, why: String| {
            receipt.outcome = "ignored".to_owned();
            Ok(Some(why))
        };
        match (receipt.event.as_str(), action) {
            ("ping", _) => receipt.outcome = "acknowledged".to_owned(),
            ("push", _) => {
                receipt.outcome = "tracked".to_owned();
                receipt.reference.clone_from(&payload.reference);
                receipt.head_sha.clone_from(&payload.after);
            }
            ("installation", Some("created" | "deleted")) => {
                receipt.outcome = "tracked".to_owned();
            }
            ("pull_request", Some("opened" | "synchronize")) => {
                let (Some(repository), Some(pull)) = (repository(payload), &payload.pull_request)
                else {
                    return ignored(
                        receipt,
                        "the payload names no repository or pull request".to_owned(),
                    );
                };
                receipt.head_sha = pull.head.as_ref().map(|h| h.sha.clone());
                match self
                    .review_pull(None, &repository, pull.number, None, None)
                    .await?
                {
                    Ok(review) => {
                        receipt.outcome = "review_queued".to_owned();
                        receipt.review_id = Some(review.review_id);
                        receipt.debate_id = review.debate_id;
                    }
                    Err(super::Demo) => {
                        return ignored(
                            receipt,
                            "SCM_TOKEN is not set: the pull request's diff cannot be fetched"
                                .to_owned(),
                        );
                    }
                }
            }
            ("issues", Some("opened")) => {
                let (Some(repository), Some(issue)) = (repository(payload), &payload.issue) else {
                    return ignored(
                        receipt,
                        "the payload names no repository or issue".to_owned(),
                    );
                };
                let new = NewDebate {
                    topic: format!(
                        "Triage issue {repository}#{}: {}. How urgent is it, what kind of work is it, and what should happen next?",
                        issue.number,
                        issue.title.as_deref().unwrap_or("untitled")
                    ),
                    context: issue.body.clone(),
                    auto_select: true,
                    ..NewDebate::default()
                };
                let limits = self.debates.limits();
                let new = NewDebate {
                    topic: crate::agents::prompt::truncate_chars(&new.topic, limits.topic_chars)
                        .to_owned(),
                    context: new.context.map(|c| {
                        crate::agents::prompt::truncate_chars(&c, limits.context_chars).to_owned()
                    }),
                    ..new
                };
                let debate = self.debates.create(new, None, None).await?;
                receipt.outcome = "triage_queued".to_owned();
                receipt.debate_id = Some(debate.id);
            }
            (event, action) => {
                let what = match action {
                    Some(action) => format!("{event} ({action})"),
                    None => event.to_owned(),
                };
                return ignored(receipt, format!("{what} is not acted on"));
            }
        }
        Ok(None)
    }
}

fn repository(payload: &Payload) -> Option<Repository> {
    payload
        .repository
        .as_ref()
        .and_then(|r| Repository::parse(&r.full_name))
}

fn duplicate(receipt: Receipt) -> Received {
    Received {
        receipt,
        duplicate: true,
        reason: Some("this delivery id was received before".to_owned()),
    }
}
