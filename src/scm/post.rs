//! Posts a completed review that a source-host webhook started to its pull
//! request. The review's body ends with a marker naming the review, and
//! the host's reviews are read for it before posting, so that a post the
//! service made but did not get to record (a crash, a lost answer) is
//! found instead of sent twice.

use agon_aggregates::CommandMeta;
use agon_aggregates::review::{Review, ReviewCommand, ReviewError, ReviewKind};
use agon_projections::reviews::ReviewDoc;
use async_trait::async_trait;

use super::{GitHub, Repository};
use crate::bus::BoxError;
use crate::review::Reviews;
use crate::review::settler::OnCompleted;
use crate::store::{CommandError, EventLog};

/// The line that ends a posted review's body, naming the review.
pub fn marker(review_id: &str) -> String {
    format!("<!-- agon-review:{review_id} -->")
}

/// Posts webhook-started pull request reviews with the service's token.
pub struct Poster {
    pub(super) log: EventLog,
    pub(super) host: GitHub,
    /// For the time recorded.
    pub(super) reviews: Reviews,
}

#[async_trait]
impl OnCompleted for Poster {
    async fn completed(&self, review: &ReviewDoc) -> Result<(), BoxError> {
        let wanted = review.kind == ReviewKind::PullRequest
            && review.source == "webhook"
            && review.host_review_id.is_none();
        let (Some(repository), Some(number), Some(action), Some(body)) = (
            review
                .target
                .repository
                .as_deref()
                .and_then(Repository::parse),
            review.target.pr_number,
            review.action,
            review.body.as_deref(),
        ) else {
            return Ok(());
        };
        if !wanted {
            return Ok(());
        }
        let marker = marker(&review.review_id);
        let posted = self
            .host
            .reviews(&repository, number)
            .await?
            .into_iter()
            .find(|r| r.body.as_deref().is_some_and(|b| b.contains(&marker)));
        let host_review_id = match posted {
            Some(found) => found.id,
            None => {
                let body = format!("{body}\n\n{marker}");
                self.host
                    .submit(
                        &repository,
                        number,
                        action.as_str(),
                        &body,
                        &review.comments,
                    )
                    .await?
                    .id
            }
        };
        let command = ReviewCommand::Post {
            host_review_id,
            at: self.reviews.now(),
        };
        match self
            .log
            .execute::<Review>(&review.review_id, command, CommandMeta::by("review"))
            .await
        {
            Ok(_) | Err(CommandError::Rejected(ReviewError::NotPostable)) => Ok(()),
            Err(e) => Err(Box::new(e)),
        }
    }
}
