//! The public gallery: an owner publishes a completed debate (a command on
//! the debate, recorded as `DebatePublished`) and anyone reads the
//! published ones, from the gallery table and the debates documents.

use agon_aggregates::CommandMeta;
use agon_aggregates::debate::{Debate, DebateCommand, DebateError};
use agon_aggregates::ids::DebateId;
use agon_projections::Debates as DebateDocs;
use thiserror::Error;

use super::service::Debates;
use crate::auth::Caller;
use crate::projection::reads::{self, DebatePage};
use crate::store::{CommandError, StoreError};

/// Why a debate could not be put in or taken out of the gallery.
#[derive(Debug, Error)]
pub enum GalleryError {
    /// No such debate, or one the caller may not see.
    #[error("debate not found")]
    NotFound,
    /// The caller sees the debate but did not create it.
    #[error("only the debate's creator may publish it")]
    NotOwner,
    /// The debate refused (it is not completed).
    #[error(transparent)]
    Rejected(DebateError),
    #[error("event store: {0}")]
    Store(#[from] StoreError),
    /// Other writers kept the debate's stream busy through every retry.
    #[error("the debate's stream stayed contended; retry shortly")]
    Contended,
}

impl From<CommandError<DebateError>> for GalleryError {
    fn from(e: CommandError<DebateError>) -> Self {
        match e {
            CommandError::Rejected(DebateError::NotFound) => GalleryError::NotFound,
            CommandError::Rejected(e) => GalleryError::Rejected(e),
            CommandError::Store(e) => GalleryError::Store(e),
            CommandError::Contended { .. } => GalleryError::Contended,
        }
    }
}

impl Debates {
    /// Puts the caller's completed debate `id` in the gallery (publishing
    /// it again changes nothing) and answers once the gallery shows it.
    #[tracing::instrument(level = "debug", skip_all, fields(debate_id = %id), err(level = "debug"))]
    pub async fn publish(&self, caller: &Caller, id: &DebateId) -> Result<Debate, GalleryError> {
        let at = self.now();
        self.set_published(caller, id, DebateCommand::Publish { at })
            .await
    }

    /// Takes the caller's debate `id` out of the gallery (when it is not
    /// there, nothing changes) and answers once the gallery no longer shows it.
    #[tracing::instrument(level = "debug", skip_all, fields(debate_id = %id), err(level = "debug"))]
    pub async fn unpublish(&self, caller: &Caller, id: &DebateId) -> Result<Debate, GalleryError> {
        let at = self.now();
        self.set_published(caller, id, DebateCommand::Unpublish { at })
            .await
    }

    async fn set_published(
        &self,
        caller: &Caller,
        id: &DebateId,
        command: DebateCommand,
    ) -> Result<Debate, GalleryError> {
        let debate = self.get(caller, id).await?.ok_or(GalleryError::NotFound)?;
        // Only the creator decides what of theirs is public: not the
        // organization's members, not an admin.
        if debate.created_by.as_deref() != Some(caller.user_id.as_str()) {
            return Err(GalleryError::NotOwner);
        }
        let meta = CommandMeta::by(caller.user_id.as_str());
        let executed = self.log().execute::<Debate>(id, command, meta).await?;
        let state = executed.state;
        let want = state.published_at;
        self.documents()
            .wait_for::<DebateDocs>(id, |doc| doc.published_at == want)
            .await?;
        Ok(state)
    }

    /// A page of the gallery, newest publication first, with how many
    /// debates are published in all.
    pub async fn gallery_page(&self, limit: u32, offset: u64) -> Result<DebatePage, StoreError> {
        reads::gallery_page(self.log(), limit, offset).await
    }

    /// The published debate `id`, for anyone; `None` when it is not published.
    pub async fn published(&self, id: &DebateId) -> Result<Option<Debate>, StoreError> {
        let debate = self.documents().get::<DebateDocs>(id).await?;
        Ok(debate.filter(|d| d.published_at.is_some()))
    }
}
