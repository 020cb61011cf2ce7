//! The review engine shared by pull request review (§4.4) and code review
//! (§4.5): a snippet or a diff becomes a review debate (agents critique the
//! material, then vote), and the finished debate's consensus becomes the
//! review (action, body, comments anchored at diff positions). Both halves
//! are events on the review's stream, so a result outlives the process;
//! the result is drawn from the debate the first time a finished review is
//! read, by whichever replica reads it.

pub mod settler;

use agon_aggregates::CommandMeta;
use agon_aggregates::debate::{ConsensusResult, DebateStatus};
use agon_aggregates::ids::DebateId;
use agon_aggregates::review::{
    Anchor, Review, ReviewCommand, ReviewError, ReviewKind, ReviewStatus, Target, diff, outcome,
};
use agon_projections::Reviews as ReviewDocs;
use agon_projections::reviews::ReviewDoc;
use thiserror::Error;

use crate::agents::prompt::truncate_chars;
use crate::auth::Caller;
use crate::clock::Clock;
use crate::debates::{CreateError, Debates, NewDebate};
use crate::projection::{Documents, ListFilter};
use crate::store::{CommandError, EventLog, StoreError};

/// The owner recorded on reviews the source host's webhooks start: no
/// account asked for them, so only admins read them.
pub const WEBHOOK_OWNER: &str = "scm-webhook";

/// How a review's debate ended, as far as the review needs it.
#[derive(Debug)]
pub struct Ended<'a> {
    pub status: DebateStatus,
    pub consensus: Option<&'a ConsensusResult>,
    pub failure_reason: Option<String>,
}

/// What is reviewed.
#[derive(Debug, Clone)]
pub enum Material {
    Snippet {
        code: String,
        language: Option<String>,
        filename: Option<String>,
    },
    /// A unified diff.
    Diff(String),
}

/// A review as asked for.
#[derive(Debug, Clone)]
pub struct ReviewRequest {
    pub kind: ReviewKind,
    pub target: Target,
    pub material: Material,
    /// What the reviewers should look at above all (security, style, …).
    pub focus: Option<String>,
}

#[derive(Debug, Error)]
pub enum ReviewsError {
    /// The material cannot be reviewed (a 422 naming the field).
    #[error("{field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error(transparent)]
    Debate(#[from] CreateError),
    #[error("event store: {0}")]
    Store(#[from] StoreError),
    #[error("the review's stream stayed contended; retry shortly")]
    Contended,
    /// The read model has not caught up with the review yet.
    #[error("review {0} is not readable yet; retry shortly")]
    NotShown(String),
}

impl From<CommandError<ReviewError>> for ReviewsError {
    fn from(error: CommandError<ReviewError>) -> Self {
        match error {
            CommandError::Store(e) => ReviewsError::Store(e),
            // A fresh id cannot exist, and a settled review is read again.
            CommandError::Rejected(_) | CommandError::Contended { .. } => ReviewsError::Contended,
        }
    }
}

/// The review engine; cheap to clone.
#[derive(Debug, Clone)]
pub struct Reviews {
    log: EventLog,
    documents: Documents,
    clock: Clock,
    debates: Debates,
    max_input_bytes: usize,
    max_comments: usize,
}

impl Reviews {
    pub fn new(
        log: EventLog,
        clock: Clock,
        debates: Debates,
        max_input_bytes: usize,
        max_comments: usize,
    ) -> Self {
        Self {
            documents: Documents::new(log.clone()),
            log,
            clock,
            debates,
            max_input_bytes,
            max_comments,
        }
    }

    /// `SERVICE_REVIEW_MAX_INPUT_BYTES`.
    pub fn max_input_bytes(&self) -> usize {
        self.max_input_bytes
    }

    /// Starts a review debate over the material; `caller` owns the review
    /// (none: a webhook started it, [`WEBHOOK_OWNER`]).
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn start(
        &self,
        caller: Option<&Caller>,
        request: ReviewRequest,
        request_id: Option<String>,
    ) -> Result<ReviewDoc, ReviewsError> {
        let (field, text) = match &request.material {
            Material::Snippet { code, .. } => ("code", code),
            Material::Diff(text) => ("diff", text),
        };
        if text.trim().is_empty() {
            return Err(invalid(field, "is empty"));
        }
        if text.len() > self.max_input_bytes {
            return Err(invalid(
                field,
                format!("is larger than {} bytes", self.max_input_bytes),
            ));
        }
        let anchors = match &request.material {
            Material::Snippet { filename, .. } => vec![Anchor {
                path: filename.clone().unwrap_or_else(|| "snippet".to_owned()),
                position: 1,
            }],
            Material::Diff(text) => {
                let anchors = diff::anchors(text);
                if anchors.is_empty() {
                    // No file with changed lines to anchor a comment on: the
                    // text is still reviewed, its comments on the whole of it.
                    vec![Anchor {
                        path: "diff".to_owned(),
                        position: 1,
                    }]
                } else {
                    anchors
                }
            }
        };
        let limits = self.debates.limits();
        let context = context_of(&request);
        let truncated = context.chars().count() > limits.context_chars;
        let context = truncate_chars(&context, limits.context_chars).to_owned();
        let topic = topic_of(&request, &anchors);
        let topic = truncate_chars(&topic, limits.topic_chars).to_owned();
        let new = NewDebate {
            topic,
            context: Some(context),
            auto_select: true,
            ..NewDebate::default()
        };
        let debate = self.debates.create(new, caller, request_id.clone()).await?;
        let review_id = uuid::Uuid::now_v7().to_string();
        let owner = caller.map_or(WEBHOOK_OWNER, |c| c.user_id.as_str());
        let command = ReviewCommand::Request {
            review_id: review_id.clone(),
            kind: request.kind,
            source: if caller.is_some() { "api" } else { "webhook" }.to_owned(),
            owner: Some(owner.to_owned()),
            org_id: caller.and_then(|c| c.org_id.as_ref().map(ToString::to_string)),
            target: request.target,
            anchors,
            truncated,
            debate_id: debate.id,
            at: self.clock.now(),
        };
        let meta = CommandMeta {
            request_id,
            ..CommandMeta::by(owner)
        };
        self.log
            .execute::<Review>(&review_id, command, meta)
            .await?;
        self.shown(&review_id, |_| true).await
    }

    /// Records a review sent to the host (its own stream): `make` builds
    /// the command from the new review's id and the time.
    pub async fn record(
        &self,
        caller: &Caller,
        make: impl FnOnce(String, chrono::DateTime<chrono::Utc>) -> ReviewCommand,
    ) -> Result<ReviewDoc, ReviewsError> {
        let review_id = uuid::Uuid::now_v7().to_string();
        let command = make(review_id.clone(), self.clock.now());
        self.log
            .execute::<Review>(
                &review_id,
                command,
                CommandMeta::by(caller.user_id.as_str()),
            )
            .await?;
        self.shown(&review_id, |_| true).await
    }

    /// The time as the service's clock has it.
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock.now()
    }

    /// The review `id` if `caller` may read it (its owner, or an admin),
    /// settled when its debate has finished.
    pub async fn get(&self, caller: &Caller, id: &str) -> Result<Option<ReviewDoc>, ReviewsError> {
        match self.documents.get::<ReviewDocs>(id).await? {
            Some(doc) if readable(caller, &doc) => Ok(Some(self.settled(caller, doc).await?)),
            _ => Ok(None),
        }
    }

    /// A page of the reviews `caller` may read, newest first, with the total.
    pub async fn history(
        &self,
        caller: &Caller,
        limit: u32,
        offset: u64,
    ) -> Result<(Vec<ReviewDoc>, u64), ReviewsError> {
        let filter = ListFilter {
            owner: (!caller.is_admin()).then_some(caller.user_id.as_str()),
            state: None,
        };
        let (docs, total) = self
            .documents
            .list::<ReviewDocs>(filter, limit, offset)
            .await?;
        let mut settled = Vec::with_capacity(docs.len());
        for doc in docs {
            settled.push(self.settled(caller, doc).await?);
        }
        Ok((settled, total))
    }

    /// The reviews of one pull request that `caller` may read, newest first.
    pub async fn for_pull(
        &self,
        caller: &Caller,
        repository: &str,
        number: u64,
    ) -> Result<Vec<ReviewDoc>, ReviewsError> {
        let mut docs = self
            .documents
            .owned_by::<ReviewDocs>(caller.user_id.as_str())
            .await?;
        if caller.is_admin() {
            docs.extend(self.documents.owned_by::<ReviewDocs>(WEBHOOK_OWNER).await?);
        }
        docs.retain(|d| {
            d.target.repository.as_deref() == Some(repository) && d.target.pr_number == Some(number)
        });
        docs.sort_by_key(|d| std::cmp::Reverse(d.requested_at));
        let mut settled = Vec::with_capacity(docs.len());
        for doc in docs {
            settled.push(self.settled(caller, doc).await?);
        }
        Ok(settled)
    }

    /// `doc`, with its outcome recorded when its debate has finished.
    async fn settled(&self, caller: &Caller, doc: ReviewDoc) -> Result<ReviewDoc, ReviewsError> {
        let Some(debate_id) = doc.debate_id.as_deref() else {
            return Ok(doc);
        };
        if doc.status != ReviewStatus::InProgress {
            return Ok(doc);
        }
        let id = DebateId::from_trusted(debate_id);
        let Some(debate) = self.debates.outcome(caller, &id).await? else {
            return Ok(doc);
        };
        let ended = Ended {
            status: debate.status,
            consensus: debate.consensus.as_ref(),
            failure_reason: debate.failure_reason,
        };
        if !self.conclude(&doc.review_id, &doc.anchors, ended).await? {
            return Ok(doc);
        }
        self.shown(&doc.review_id, |d| d.status != ReviewStatus::InProgress)
            .await
    }

    /// Records the outcome of review `review_id` from its debate's end;
    /// false while the debate is still running. A review another reader or
    /// replica settled first is left as it is.
    pub(crate) async fn conclude(
        &self,
        review_id: &str,
        anchors: &[Anchor],
        debate: Ended<'_>,
    ) -> Result<bool, ReviewsError> {
        let at = self.clock.now();
        let command = match (debate.status, debate.consensus) {
            (DebateStatus::Completed, Some(consensus)) => {
                let verdict = outcome::verdict(consensus, anchors, self.max_comments);
                ReviewCommand::Complete {
                    action: verdict.action,
                    body: verdict.body,
                    comments: verdict.comments,
                    confidence: verdict.confidence,
                    at,
                }
            }
            (DebateStatus::Completed, None) => ReviewCommand::Fail {
                reason: "the review debate ended without a vote".to_owned(),
                at,
            },
            (DebateStatus::Failed, _) => ReviewCommand::Fail {
                reason: debate
                    .failure_reason
                    .unwrap_or_else(|| "the review debate failed".to_owned()),
                at,
            },
            _ => return Ok(false),
        };
        match self
            .log
            .execute::<Review>(review_id, command, CommandMeta::by("review"))
            .await
        {
            Ok(_) | Err(CommandError::Rejected(ReviewError::Finished)) => Ok(true),
            Err(e) => Err(e.into()),
        }
    }

    /// The review's document once `done` holds (or as it is when the read
    /// model is late).
    async fn shown(
        &self,
        id: &str,
        done: impl Fn(&ReviewDoc) -> bool,
    ) -> Result<ReviewDoc, ReviewsError> {
        self.documents.wait_for::<ReviewDocs>(id, done).await?;
        self.documents
            .get::<ReviewDocs>(id)
            .await?
            .ok_or_else(|| ReviewsError::NotShown(id.to_owned()))
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ReviewsError {
    ReviewsError::Invalid {
        field,
        reason: reason.into(),
    }
}

/// Whether `caller` may read `doc`: its owner or an admin.
fn readable(caller: &Caller, doc: &ReviewDoc) -> bool {
    caller.is_admin() || doc.owner.as_deref() == Some(caller.user_id.as_str())
}

/// The debate's question: the reviewers vote on accepting the change.
fn topic_of(request: &ReviewRequest, anchors: &[Anchor]) -> String {
    let what = match (&request.target.repository, request.target.pr_number) {
        (Some(repo), Some(number)) => format!(
            "pull request {repo}#{number} ({})",
            request.target.title.as_deref().unwrap_or("untitled")
        ),
        _ => {
            let files: Vec<&str> = anchors.iter().map(|a| a.path.as_str()).take(5).collect();
            format!("changes to {}", files.join(", "))
        }
    };
    format!(
        "Code review of {what}: should it be accepted as it is? Name the file of every change you ask for."
    )
}

/// What the reviewers read: the focus, then the material.
fn context_of(request: &ReviewRequest) -> String {
    let focus = request
        .focus
        .as_deref()
        .map(|f| format!("Review focus: {f}\n\n"))
        .unwrap_or_default();
    match &request.material {
        Material::Snippet {
            code,
            language,
            filename,
        } => format!(
            "{focus}Code under review ({}, {}):\n\n{code}",
            filename.as_deref().unwrap_or("snippet"),
            language.as_deref().unwrap_or("language not given")
        ),
        Material::Diff(text) => format!("{focus}Unified diff under review:\n\n{text}"),
    }
}
