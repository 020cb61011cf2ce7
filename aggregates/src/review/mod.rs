//! The Review aggregate: one code review (spec §4.4 and §4.5 Code review):
//! what was asked to be reviewed (a snippet, a diff or a pull request),
//! the debate that reviews it, and its outcome, or a review submitted to
//! the source host. Reviews are events, so they outlive the process.
//! `delivery` holds the SCM delivery stream that makes webhook receipts
//! idempotent; `diff` and `outcome` the pure reading of diffs and verdicts.

pub mod delivery;
pub mod diff;
pub mod outcome;

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::Decide;
pub use diff::Anchor;

/// What a review looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewKind {
    Snippet,
    Diff,
    PullRequest,
}

/// The review action, as the source host names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReviewAction {
    Approve,
    RequestChanges,
    Comment,
}

impl ReviewAction {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewAction::Approve => "APPROVE",
            ReviewAction::RequestChanges => "REQUEST_CHANGES",
            ReviewAction::Comment => "COMMENT",
        }
    }

    /// Reads a host's action name in any case.
    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_uppercase().as_str() {
            "APPROVE" => Some(ReviewAction::Approve),
            "REQUEST_CHANGES" => Some(ReviewAction::RequestChanges),
            "COMMENT" => Some(ReviewAction::Comment),
            _ => None,
        }
    }
}

/// A comment on one line of a diff: `position` counts lines below the
/// file's first hunk header, as the host's review API does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewComment {
    pub path: String,
    pub position: u32,
    pub body: String,
}

/// Where the reviewed change lives, when it lives on a source host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// `owner/name`.
    pub repository: Option<String>,
    pub pr_number: Option<u64>,
    pub title: Option<String>,
    pub head_sha: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewStatus {
    #[default]
    New,
    InProgress,
    Completed,
    Failed,
    Submitted,
}

impl ReviewStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewStatus::New => "new",
            ReviewStatus::InProgress => "in_progress",
            ReviewStatus::Completed => "completed",
            ReviewStatus::Failed => "failed",
            ReviewStatus::Submitted => "submitted",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Review {
    pub review_id: String,
    pub owner: Option<String>,
    pub status: ReviewStatus,
    /// The host's id of the review once the service posted it there.
    pub posted: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ReviewCommand {
    /// A review debate was started over the material.
    Request {
        review_id: String,
        kind: ReviewKind,
        /// `api` or `webhook`.
        source: String,
        owner: Option<String>,
        org_id: Option<String>,
        target: Target,
        /// The first changed line of each file: where comments anchor.
        anchors: Vec<Anchor>,
        /// The material was cut to fit the debate's context.
        truncated: bool,
        debate_id: String,
        at: DateTime<Utc>,
    },
    Complete {
        action: ReviewAction,
        body: String,
        comments: Vec<ReviewComment>,
        confidence: f64,
        at: DateTime<Utc>,
    },
    Fail {
        reason: String,
        at: DateTime<Utc>,
    },
    /// A review sent to the host (its own stream).
    Submit {
        review_id: String,
        owner: Option<String>,
        target: Target,
        action: ReviewAction,
        body: String,
        comments: Vec<ReviewComment>,
        /// The host's id of the review; none in demo mode.
        host_review_id: Option<u64>,
        /// No host was called: `SCM_TOKEN` is unset.
        demo: bool,
        at: DateTime<Utc>,
    },
    /// A completed review was posted to the source host as its review.
    Post {
        host_review_id: u64,
        at: DateTime<Utc>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ReviewEvent {
    ReviewRequested {
        review_id: String,
        kind: ReviewKind,
        source: String,
        owner: Option<String>,
        org_id: Option<String>,
        target: Target,
        anchors: Vec<Anchor>,
        truncated: bool,
        debate_id: String,
        at: DateTime<Utc>,
    },
    ReviewCompleted {
        action: ReviewAction,
        body: String,
        comments: Vec<ReviewComment>,
        confidence: f64,
        at: DateTime<Utc>,
    },
    ReviewFailed {
        reason: String,
        at: DateTime<Utc>,
    },
    ReviewSubmitted {
        review_id: String,
        owner: Option<String>,
        target: Target,
        action: ReviewAction,
        body: String,
        comments: Vec<ReviewComment>,
        host_review_id: Option<u64>,
        demo: bool,
        at: DateTime<Utc>,
    },
    ReviewPosted {
        host_review_id: u64,
        at: DateTime<Utc>,
    },
}

impl DomainEvent for ReviewEvent {
    fn event_type(&self) -> String {
        match self {
            ReviewEvent::ReviewRequested { .. } => "ReviewRequested",
            ReviewEvent::ReviewCompleted { .. } => "ReviewCompleted",
            ReviewEvent::ReviewFailed { .. } => "ReviewFailed",
            ReviewEvent::ReviewSubmitted { .. } => "ReviewSubmitted",
            ReviewEvent::ReviewPosted { .. } => "ReviewPosted",
        }
        .to_owned()
    }

    fn event_version(&self) -> String {
        crate::wire::current_version(<Review as Aggregate>::TYPE, &self.event_type())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReviewError {
    #[error("review already exists")]
    Exists,
    #[error("review not found")]
    NotFound,
    #[error("review has already finished")]
    Finished,
    #[error("only a completed review is posted, and only once")]
    NotPostable,
}

crate::rejections!(ReviewError {
    Self::Exists => Conflict, "REVIEW_EXISTS",
    Self::NotFound => NotFound, "REVIEW_NOT_FOUND",
    Self::Finished => Conflict, "REVIEW_FINISHED",
    Self::NotPostable => Conflict, "REVIEW_NOT_POSTABLE",
});

impl Decide for Review {
    fn decide(&self, command: ReviewCommand) -> Result<Vec<ReviewEvent>, ReviewError> {
        use ReviewCommand as C;
        use ReviewEvent as E;
        let fresh = || {
            if self.status == ReviewStatus::New {
                Ok(())
            } else {
                Err(ReviewError::Exists)
            }
        };
        let running = || match self.status {
            ReviewStatus::InProgress => Ok(()),
            ReviewStatus::New => Err(ReviewError::NotFound),
            _ => Err(ReviewError::Finished),
        };
        match command {
            C::Request {
                review_id,
                kind,
                source,
                owner,
                org_id,
                target,
                anchors,
                truncated,
                debate_id,
                at,
            } => {
                fresh()?;
                Ok(vec![E::ReviewRequested {
                    review_id,
                    kind,
                    source,
                    owner,
                    org_id,
                    target,
                    anchors,
                    truncated,
                    debate_id,
                    at,
                }])
            }
            C::Complete {
                action,
                body,
                comments,
                confidence,
                at,
            } => {
                running()?;
                Ok(vec![E::ReviewCompleted {
                    action,
                    body,
                    comments,
                    confidence,
                    at,
                }])
            }
            C::Fail { reason, at } => {
                running()?;
                Ok(vec![E::ReviewFailed { reason, at }])
            }
            C::Submit {
                review_id,
                owner,
                target,
                action,
                body,
                comments,
                host_review_id,
                demo,
                at,
            } => {
                fresh()?;
                Ok(vec![E::ReviewSubmitted {
                    review_id,
                    owner,
                    target,
                    action,
                    body,
                    comments,
                    host_review_id,
                    demo,
                    at,
                }])
            }
            C::Post { host_review_id, at } => {
                if self.status != ReviewStatus::Completed || self.posted.is_some() {
                    return Err(ReviewError::NotPostable);
                }
                Ok(vec![E::ReviewPosted { host_review_id, at }])
            }
        }
    }
}

impl Aggregate for Review {
    const TYPE: &'static str = "review";
    type Command = ReviewCommand;
    type Event = ReviewEvent;
    type Error = ReviewError;
    type Services = ();

    async fn handle(
        &mut self,
        command: ReviewCommand,
        _services: &(),
        sink: &EventSink<Self>,
    ) -> Result<(), ReviewError> {
        crate::record(self, command, sink).await
    }

    fn apply(&mut self, event: ReviewEvent) {
        match event {
            ReviewEvent::ReviewRequested {
                review_id, owner, ..
            } => {
                self.review_id = review_id;
                self.owner = owner;
                self.status = ReviewStatus::InProgress;
            }
            ReviewEvent::ReviewCompleted { .. } => self.status = ReviewStatus::Completed,
            ReviewEvent::ReviewFailed { .. } => self.status = ReviewStatus::Failed,
            ReviewEvent::ReviewSubmitted {
                review_id, owner, ..
            } => {
                self.review_id = review_id;
                self.owner = owner;
                self.status = ReviewStatus::Submitted;
            }
            ReviewEvent::ReviewPosted { host_review_id, .. } => {
                self.posted = Some(host_review_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use cqrs_es::test::TestFramework;

    fn at() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2027, 1, 15, 8, 0, 0).unwrap()
    }

    fn requested() -> ReviewEvent {
        ReviewEvent::ReviewRequested {
            review_id: "r1".to_owned(),
            kind: ReviewKind::Diff,
            source: "api".to_owned(),
            owner: Some("u1".to_owned()),
            org_id: None,
            target: Target::default(),
            anchors: Vec::new(),
            truncated: false,
            debate_id: "d1".to_owned(),
            at: at(),
        }
    }

    fn complete() -> ReviewCommand {
        ReviewCommand::Complete {
            action: ReviewAction::Approve,
            body: "fine".to_owned(),
            comments: Vec::new(),
            confidence: 0.9,
            at: at(),
        }
    }

    #[tokio::test]
    async fn a_review_completes_once() {
        TestFramework::<Review>::with(())
            .given(vec![requested()])
            .when_async(complete())
            .await
            .then_expect_events(vec![ReviewEvent::ReviewCompleted {
                action: ReviewAction::Approve,
                body: "fine".to_owned(),
                comments: Vec::new(),
                confidence: 0.9,
                at: at(),
            }]);
        TestFramework::<Review>::with(())
            .given(vec![
                requested(),
                ReviewEvent::ReviewFailed {
                    reason: "x".to_owned(),
                    at: at(),
                },
            ])
            .when_async(complete())
            .await
            .then_expect_error(ReviewError::Finished);
    }

    #[tokio::test]
    async fn nothing_completes_a_review_never_requested() {
        TestFramework::<Review>::with(())
            .given_no_previous_events()
            .when_async(complete())
            .await
            .then_expect_error(ReviewError::NotFound);
    }

    #[tokio::test]
    async fn a_completed_review_is_posted_once_and_a_running_one_not_at_all() {
        let post = || ReviewCommand::Post {
            host_review_id: 80,
            at: at(),
        };
        let completed = ReviewEvent::ReviewCompleted {
            action: ReviewAction::Comment,
            body: "fine".to_owned(),
            comments: Vec::new(),
            confidence: 0.9,
            at: at(),
        };
        TestFramework::<Review>::with(())
            .given(vec![requested(), completed.clone()])
            .when_async(post())
            .await
            .then_expect_events(vec![ReviewEvent::ReviewPosted {
                host_review_id: 80,
                at: at(),
            }]);
        TestFramework::<Review>::with(())
            .given(vec![
                requested(),
                completed,
                ReviewEvent::ReviewPosted {
                    host_review_id: 80,
                    at: at(),
                },
            ])
            .when_async(post())
            .await
            .then_expect_error(ReviewError::NotPostable);
        TestFramework::<Review>::with(())
            .given(vec![requested()])
            .when_async(post())
            .await
            .then_expect_error(ReviewError::NotPostable);
    }

    #[test]
    fn actions_read_in_any_case() {
        assert_eq!(
            ReviewAction::parse("request_changes"),
            Some(ReviewAction::RequestChanges)
        );
        assert_eq!(ReviewAction::parse("merge"), None);
    }
}
