//! `reviews`: one document per code review (a debate's review or a review
//! submitted to the source host), owned by the user who asked for it and
//! listed newest first, so that results and history survive restarts.

use agon_aggregates::review::{
    Anchor, ReviewAction, ReviewComment, ReviewEvent, ReviewKind, ReviewStatus, Target,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{DecodeError, DocumentProjection, EventRecord};

/// The aggregate type of review streams.
pub const REVIEW_AGGREGATE: &str = "review";

/// A review as the read model keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewDoc {
    pub review_id: String,
    pub kind: ReviewKind,
    /// `api`, `webhook` or `submission`.
    pub source: String,
    pub owner: Option<String>,
    pub org_id: Option<String>,
    pub status: ReviewStatus,
    pub target: Target,
    pub anchors: Vec<Anchor>,
    pub truncated: bool,
    pub debate_id: Option<String>,
    pub action: Option<ReviewAction>,
    pub body: Option<String>,
    pub comments: Vec<ReviewComment>,
    pub confidence: Option<f64>,
    pub failure_reason: Option<String>,
    pub host_review_id: Option<u64>,
    pub demo: bool,
    pub requested_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

pub struct Reviews;

impl DocumentProjection for Reviews {
    const NAME: &'static str = "reviews";
    type Doc = ReviewDoc;

    fn key(event: &EventRecord) -> Result<Option<String>, DecodeError> {
        Ok((event.aggregate_type == REVIEW_AGGREGATE).then(|| event.aggregate_id.clone()))
    }

    fn apply(
        doc: Option<ReviewDoc>,
        event: &EventRecord,
    ) -> Result<Option<ReviewDoc>, DecodeError> {
        let change: ReviewEvent = event.decode()?;
        Ok(match (doc, change) {
            (
                _,
                ReviewEvent::ReviewRequested {
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
                },
            ) => Some(ReviewDoc {
                review_id,
                kind,
                source,
                owner,
                org_id,
                status: ReviewStatus::InProgress,
                target,
                anchors,
                truncated,
                debate_id: Some(debate_id),
                action: None,
                body: None,
                comments: Vec::new(),
                confidence: None,
                failure_reason: None,
                host_review_id: None,
                demo: false,
                requested_at: at,
                finished_at: None,
            }),
            (
                _,
                ReviewEvent::ReviewSubmitted {
                    review_id,
                    owner,
                    target,
                    action,
                    body,
                    comments,
                    host_review_id,
                    demo,
                    at,
                },
            ) => Some(ReviewDoc {
                review_id,
                kind: ReviewKind::PullRequest,
                source: "submission".to_owned(),
                owner,
                org_id: None,
                status: ReviewStatus::Submitted,
                target,
                anchors: Vec::new(),
                truncated: false,
                debate_id: None,
                action: Some(action),
                body: Some(body),
                comments,
                confidence: None,
                failure_reason: None,
                host_review_id,
                demo,
                requested_at: at,
                finished_at: Some(at),
            }),
            (
                Some(mut doc),
                ReviewEvent::ReviewCompleted {
                    action,
                    body,
                    comments,
                    confidence,
                    at,
                },
            ) => {
                doc.status = ReviewStatus::Completed;
                doc.action = Some(action);
                doc.body = Some(body);
                doc.comments = comments;
                doc.confidence = Some(confidence);
                doc.finished_at = Some(at);
                Some(doc)
            }
            (Some(mut doc), ReviewEvent::ReviewFailed { reason, at }) => {
                doc.status = ReviewStatus::Failed;
                doc.failure_reason = Some(reason);
                doc.finished_at = Some(at);
                Some(doc)
            }
            (Some(mut doc), ReviewEvent::ReviewPosted { host_review_id, .. }) => {
                doc.host_review_id = Some(host_review_id);
                Some(doc)
            }
            // A stream's later events never come before its first.
            (None, _) => None,
        })
    }

    fn owner(doc: &ReviewDoc) -> Option<String> {
        doc.owner.clone()
    }

    fn lookup(doc: &ReviewDoc) -> Option<String> {
        doc.debate_id.clone()
    }

    fn state(doc: &ReviewDoc) -> Option<String> {
        Some(doc.status.as_str().to_owned())
    }

    /// Request time, then id: RFC 3339 in UTC with fixed precision sorts as text.
    fn sort_key(doc: &ReviewDoc) -> Option<String> {
        Some(format!(
            "{}|{}",
            doc.requested_at
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            doc.review_id
        ))
    }
}
