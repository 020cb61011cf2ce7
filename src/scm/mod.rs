//! The source-host integration (spec §4.4, §6.3): the webhook receiver
//! (signature, de-duplication by delivery id, the action each event asks
//! for) and pull request review against the host's REST API, on the review
//! engine. Without `SCM_TOKEN` nothing is fetched or sent: the answers say
//! `demo` instead of pretending.

pub mod github;
mod post;
mod receiver;
pub mod signature;

use std::fmt;

use agon_aggregates::review::{ReviewAction, ReviewCommand, ReviewComment, ReviewKind, Target};
use agon_projections::reviews::ReviewDoc;
use thiserror::Error;

pub use github::{GitHub, GitHubError, PullRequest};
pub use post::marker;
pub use receiver::{Delivery, ReceiveError, Received};

use crate::auth::Caller;
use crate::config::ScmSettings;
use crate::debates::Debates;
use crate::review::settler::OnCompleted;
use crate::review::{Material, ReviewRequest, Reviews, ReviewsError};
use crate::store::EventLog;

/// The events the receiver acts on (§6.3).
pub const SUPPORTED_EVENTS: [&str; 5] = ["pull_request", "issues", "push", "installation", "ping"];

/// A repository as `owner/name`, each part 1 to 100 of `A-Za-z0-9._-`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository(String);

impl Repository {
    pub fn parse(text: &str) -> Option<Self> {
        let part = |p: &str| {
            (1..=100).contains(&p.len())
                && p != "."
                && p != ".."
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        };
        let (owner, name) = text.split_once('/')?;
        (part(owner) && part(name)).then(|| Self(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Repository {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, Error)]
pub enum ScmError {
    #[error("{field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error(transparent)]
    Host(#[from] GitHubError),
    #[error(transparent)]
    Reviews(#[from] ReviewsError),
}

/// An answer that needed the host while `SCM_TOKEN` is unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Demo;

/// What the receiver is set up to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScmStatus {
    /// A secret is set.
    pub configured: bool,
    /// Unsigned deliveries are taken (no secret, `SERVICE_SCM_DEMO`).
    pub demo: bool,
    /// Pull requests can be fetched (`SCM_TOKEN`).
    pub token: bool,
}

/// The source-host service; cheap to clone.
#[derive(Debug, Clone)]
pub struct Scm {
    log: EventLog,
    settings: std::sync::Arc<ScmSettings>,
    host: Option<GitHub>,
    reviews: Reviews,
    debates: Debates,
}

impl Scm {
    pub fn new(
        log: EventLog,
        settings: &ScmSettings,
        reviews: Reviews,
        debates: Debates,
    ) -> Result<Self, reqwest::Error> {
        let host = match &settings.token {
            Some(token) => Some(GitHub::new(settings, token.clone())?),
            None => None,
        };
        Ok(Self {
            log,
            settings: std::sync::Arc::new(settings.clone()),
            host,
            reviews,
            debates,
        })
    }

    pub fn status(&self) -> ScmStatus {
        let configured = self.settings.webhook_secret.is_some();
        ScmStatus {
            configured,
            demo: !configured && self.settings.demo,
            token: self.host.is_some(),
        }
    }

    /// What posts the reviews webhooks started, when the host can be
    /// reached and `SERVICE_SCM_AUTO_POST` is on.
    pub fn poster(&self) -> Option<std::sync::Arc<dyn OnCompleted>> {
        let host = self.host.as_ref().filter(|_| self.settings.auto_post)?;
        Some(std::sync::Arc::new(post::Poster {
            log: self.log.clone(),
            host: host.clone(),
            reviews: self.reviews.clone(),
        }))
    }

    /// The pull request as the host has it.
    pub async fn pull(
        &self,
        repository: &Repository,
        number: u64,
    ) -> Result<Result<PullRequest, Demo>, ScmError> {
        let Some(host) = &self.host else {
            return Ok(Err(Demo));
        };
        Ok(Ok(host.pull(repository, number).await?))
    }

    /// Fetches the pull request and its diff and starts a review debate
    /// (owned by `caller`; none: a webhook).
    pub async fn review_pull(
        &self,
        caller: Option<&Caller>,
        repository: &Repository,
        number: u64,
        focus: Option<String>,
        request_id: Option<String>,
    ) -> Result<Result<ReviewDoc, Demo>, ScmError> {
        let Some(host) = &self.host else {
            return Ok(Err(Demo));
        };
        let pull = host.pull(repository, number).await?;
        let diff = host.diff(repository, number).await?;
        let request = ReviewRequest {
            kind: ReviewKind::PullRequest,
            target: Target {
                repository: Some(repository.to_string()),
                pr_number: Some(number),
                title: Some(pull.title),
                head_sha: Some(pull.head.sha),
            },
            material: Material::Diff(diff),
            focus,
        };
        Ok(Ok(self.reviews.start(caller, request, request_id).await?))
    }

    /// Sends a review to the host (recorded with `demo: true`, and not
    /// sent, while `SCM_TOKEN` is unset).
    pub async fn submit(
        &self,
        caller: &Caller,
        repository: &Repository,
        number: u64,
        action: &str,
        body: String,
        comments: Vec<ReviewComment>,
    ) -> Result<ReviewDoc, ScmError> {
        let invalid = |field, reason: &str| ScmError::Invalid {
            field,
            reason: reason.to_owned(),
        };
        let action = ReviewAction::parse(action)
            .ok_or_else(|| invalid("event", "must be APPROVE, REQUEST_CHANGES or COMMENT"))?;
        if body.trim().is_empty() {
            return Err(invalid("body", "is required"));
        }
        if body.len() > self.reviews.max_input_bytes() {
            return Err(invalid("body", "is too long"));
        }
        if comments
            .iter()
            .any(|c| c.path.trim().is_empty() || c.position == 0 || c.body.trim().is_empty())
        {
            return Err(invalid(
                "comments",
                "each needs a path, a position of at least 1 and a body",
            ));
        }
        if comments.len() > self.settings.max_comments {
            return Err(invalid(
                "comments",
                "too many (SERVICE_REVIEW_MAX_COMMENTS)",
            ));
        }
        let host_review_id = match &self.host {
            Some(host) => Some(
                host.submit(repository, number, action.as_str(), &body, &comments)
                    .await?
                    .id,
            ),
            None => None,
        };
        let demo = self.host.is_none();
        let owner = caller.user_id.to_string();
        let command = |review_id, at| ReviewCommand::Submit {
            review_id,
            owner: Some(owner),
            target: Target {
                repository: Some(repository.to_string()),
                pr_number: Some(number),
                title: None,
                head_sha: None,
            },
            action,
            body,
            comments,
            host_review_id,
            demo,
            at,
        };
        Ok(self.reviews.record(caller, command).await?)
    }
}
