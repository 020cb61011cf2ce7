//! Settles reviews as their debates end, not only when someone reads them:
//! a review that a source-host webhook started has no reader, yet its pull
//! request should get the review. A durable consumer of the log; what it
//! does is idempotent (a settled review stays settled, a posted one is not
//! posted again), so a batch handled twice after a crash changes nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use agon_aggregates::debate::{Debate, DebateEvent};
use agon_aggregates::review::{Anchor, ReviewEvent, ReviewStatus};
use agon_projections::Reviews as ReviewDocs;
use agon_projections::debates::DEBATE_AGGREGATE;
use agon_projections::reviews::{REVIEW_AGGREGATE, ReviewDoc};
use agon_projections::{Cursor, EventRecord};
use async_trait::async_trait;

use super::{Ended, Reviews, ReviewsError};
use crate::bus::{BoxError, Consumer, ConsumerError};
use crate::projection::{IdleCheckpoint, checkpoint_name};
use crate::store::{CommandError, StoreError};

/// The consumer's name (its checkpoint is `projection.review-settler`).
pub const NAME: &str = "review-settler";

/// What else happens once a review is completed (posting it to the host).
#[async_trait]
pub trait OnCompleted: Send + Sync + 'static {
    /// Called for every completed review, possibly more than once.
    async fn completed(&self, review: &ReviewDoc) -> Result<(), BoxError>;
}

/// A review waiting for its debate: the id and where comments may go.
type Waiting = (String, Vec<Anchor>);

pub struct Settler {
    reviews: Reviews,
    then: Option<Arc<dyn OnCompleted>>,
    /// Reviews requested since the start, by debate id: the feed shows a
    /// request before its debate's end, while the read model may not yet.
    waiting: Mutex<HashMap<String, Waiting>>,
    idle: IdleCheckpoint,
}

impl Settler {
    pub fn new(reviews: Reviews, then: Option<Arc<dyn OnCompleted>>) -> Self {
        Self {
            reviews,
            then,
            waiting: Mutex::new(HashMap::new()),
            idle: IdleCheckpoint::default(),
        }
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Settles the review of `debate_id` if its debate has ended.
    async fn settle(
        &self,
        record: &EventRecord,
        debate_id: &str,
        review: Waiting,
    ) -> Result<(), ConsumerError> {
        let debate = match self.reviews.log.load::<Debate>(debate_id).await {
            Ok(debate) => debate,
            Err(CommandError::Store(e)) => return Err(ConsumerError::Store(e)),
            Err(e) => return Err(ConsumerError::transient(record, e)),
        };
        let ended = Ended {
            status: debate.status,
            consensus: debate.consensus.as_ref(),
            failure_reason: debate.failure_reason.clone(),
        };
        let (review_id, anchors) = review;
        match self.reviews.conclude(&review_id, &anchors, ended).await {
            Ok(_) => Ok(()),
            Err(ReviewsError::Store(e)) => Err(ConsumerError::Store(e)),
            Err(e) => Err(ConsumerError::transient(record, e)),
        }
    }

    async fn on_debate_end(&self, record: &EventRecord) -> Result<(), ConsumerError> {
        let debate_id = record.aggregate_id.as_str();
        let remembered = self.waiting().remove(debate_id);
        let review = match remembered {
            Some(review) => review,
            // Requested before this process started: the read model has it.
            None => match self
                .reviews
                .documents
                .by_lookup::<ReviewDocs>(debate_id)
                .await?
            {
                Some(doc) if doc.status == ReviewStatus::InProgress => (doc.review_id, doc.anchors),
                _ => return Ok(()),
            },
        };
        self.settle(record, debate_id, review).await
    }

    async fn on_review(&self, record: &EventRecord) -> Result<(), ConsumerError> {
        let event = record
            .decode::<ReviewEvent>()
            .map_err(|e| ConsumerError::undecodable(record, e))?;
        match event {
            ReviewEvent::ReviewRequested {
                review_id,
                anchors,
                debate_id,
                ..
            } => {
                self.waiting()
                    .insert(debate_id.clone(), (review_id.clone(), anchors.clone()));
                // The debate may have ended before the request was recorded.
                self.settle(record, &debate_id, (review_id, anchors)).await
            }
            ReviewEvent::ReviewCompleted { .. } => self.on_completed(record).await,
            _ => Ok(()),
        }
    }

    async fn on_completed(&self, record: &EventRecord) -> Result<(), ConsumerError> {
        let Some(then) = &self.then else {
            return Ok(());
        };
        let documents = &self.reviews.documents;
        let id = record.aggregate_id.as_str();
        documents
            .wait_for::<ReviewDocs>(id, |d| d.status != ReviewStatus::InProgress)
            .await?;
        match documents.get::<ReviewDocs>(id).await? {
            Some(doc) if doc.status == ReviewStatus::Completed => then
                .completed(&doc)
                .await
                .map_err(|e| ConsumerError::transient(record, e)),
            Some(_) => Ok(()),
            None => Err(ConsumerError::transient(
                record,
                ReviewsError::NotShown(id.to_owned()),
            )),
        }
    }

    async fn one(&self, record: &EventRecord) -> Result<(), ConsumerError> {
        match record.aggregate_type.as_str() {
            REVIEW_AGGREGATE => self.on_review(record).await,
            DEBATE_AGGREGATE if ends_debate(record) => {
                // Decoded only to refuse what this build cannot read.
                record
                    .decode::<DebateEvent>()
                    .map_err(|e| ConsumerError::undecodable(record, e))?;
                self.on_debate_end(record).await
            }
            _ => Ok(()),
        }
    }

    async fn save(&self, cursor: Cursor) -> Result<(), StoreError> {
        self.reviews
            .log
            .save_checkpoint(&checkpoint_name(NAME), cursor)
            .await
    }
}

fn ends_debate(record: &EventRecord) -> bool {
    matches!(
        record.event_type.as_str(),
        "DebateCompleted" | "DebateFailed"
    )
}

fn relevant(record: &EventRecord) -> bool {
    record.aggregate_type == REVIEW_AGGREGATE
        || (record.aggregate_type == DEBATE_AGGREGATE && ends_debate(record))
}

#[async_trait]
impl Consumer for Settler {
    fn name(&self) -> &str {
        NAME
    }

    async fn checkpoint(&self) -> Result<Cursor, StoreError> {
        self.reviews
            .log
            .load_checkpoint(&checkpoint_name(NAME))
            .await
    }

    async fn handle(&self, batch: &[EventRecord]) -> Result<(), ConsumerError> {
        let Some(last) = batch.last() else {
            return Ok(());
        };
        let mut done = None;
        let mut acted = false;
        for record in batch {
            if relevant(record) {
                if let Err(e) = self.one(record).await {
                    // The events before it are done.
                    if let Some(cursor) = done {
                        self.save(cursor).await?;
                    }
                    return Err(e);
                }
                acted = true;
            }
            done = Some(record.cursor);
        }
        if acted || self.idle.due() {
            self.save(last.cursor).await?;
        }
        Ok(())
    }

    async fn pass(&self, event: &EventRecord) -> Result<(), StoreError> {
        self.save(event.cursor).await
    }

    async fn retry(&self, event: &EventRecord) -> Result<(), ConsumerError> {
        self.one(event).await
    }
}
