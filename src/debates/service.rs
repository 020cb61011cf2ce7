//! The debates service: creates debates (starting them when a slot is
//! free) and reads them back for callers allowed to see them.

use agon_aggregates::CommandMeta;
use agon_aggregates::debate::{ConsensusResult, Debate, DebateCommand, DebateStatus, Next};
use agon_aggregates::ids::DebateId;
use agon_projections::accounts::AccountView;
use agon_projections::debates::DEBATE_AGGREGATE;
use agon_projections::leaderboard::LeaderboardView;
use agon_projections::{Accounts, Debates as DebateDocs, Leaderboard};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::cache::{ReadCache, ReadCacheSettings};
use super::rules::{CreateError, DebateLimits, NewDebate, protocol_for};
use super::search::{SearchError, TopicSearch};
use crate::agents::Agents;
use crate::auth::Caller;
use crate::clock::Clock;
use crate::projection::reads::{self, DebatePage};
use crate::projection::replay::{self, AsOf};
use crate::projection::{Documents, ListFilter, load_view};
use crate::runner::Runner;
use crate::store::{EventLog, StoreError};

/// What the consensus endpoint reads of a debate document (the messages
/// are skipped, not built: clients poll this).
#[derive(Debug, Deserialize)]
pub struct DebateOutcome {
    pub id: String,
    pub status: DebateStatus,
    pub consensus: Option<ConsensusResult>,
    pub failure_reason: Option<String>,
    pub created_by: Option<String>,
    pub org_id: Option<String>,
}

/// The debates service; cheap to clone.
#[derive(Debug, Clone)]
pub struct Debates {
    log: EventLog,
    documents: Documents,
    clock: Clock,
    agents: Agents,
    runner: Runner,
    limits: DebateLimits,
    cache: ReadCache,
    /// Where this service is reached (`SERVICE_PUBLIC_URL`), for the
    /// gallery's links.
    public_url: Arc<str>,
}

impl Debates {
    pub fn new(
        log: EventLog,
        clock: Clock,
        agents: Agents,
        runner: Runner,
        limits: DebateLimits,
    ) -> Self {
        Self {
            documents: Documents::new(log.clone()),
            log,
            clock,
            agents,
            runner,
            limits,
            cache: ReadCache::default(),
            public_url: Arc::from(""),
        }
    }

    /// Links the gallery's pages under `public_url` (no trailing slash).
    pub fn with_public_url(mut self, public_url: &str) -> Self {
        self.public_url = Arc::from(public_url.trim_end_matches('/'));
        self
    }

    /// Where this service is reached, for links (`SERVICE_PUBLIC_URL`).
    pub fn public_url(&self) -> &str {
        &self.public_url
    }

    /// Keeps recent list pages and leaderboards as `settings` say.
    pub fn with_read_cache(mut self, settings: ReadCacheSettings) -> Self {
        self.cache = ReadCache::new(settings);
        self
    }

    /// How long a topic and a context may be, and how big a debate.
    pub fn limits(&self) -> DebateLimits {
        self.limits
    }

    /// The agents this deployment can seat.
    pub fn agents(&self) -> &Agents {
        &self.agents
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    pub(super) fn log(&self) -> &EventLog {
        &self.log
    }

    pub(super) fn documents(&self) -> &Documents {
        &self.documents
    }

    /// Creates a debate and, when a slot is free, starts it before returning.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn create(
        &self,
        mut new: NewDebate,
        caller: Option<&Caller>,
        request_id: Option<String>,
    ) -> Result<Debate, CreateError> {
        let protocol = protocol_for(&mut new, &self.agents, self.limits)?;
        let id = uuid::Uuid::now_v7().to_string();
        let command = DebateCommand::Create {
            debate_id: id.clone(),
            topic: new.topic,
            context: new.context.filter(|c| !c.trim().is_empty()),
            agents: new.agents,
            protocol,
            limits: self.limits.shape,
            created_by: caller.map(|c| c.user_id.to_string()),
            org_id: caller.and_then(|c| c.org_id.as_ref().map(ToString::to_string)),
            at: self.clock.now(),
        };
        let meta = CommandMeta {
            request_id,
            ..CommandMeta::by(caller.map_or("cli", |c| c.user_id.as_str()))
        };
        self.runner.reserve(&id);
        let admission = self.runner.admission(&id).await;
        let start = admission.as_ref().map(|_| DebateCommand::Start {
            at: self.clock.now(),
        });
        let created = match self.log.load_held::<Debate>(&id).await {
            Ok(mut held) => self
                .log
                .run_then(
                    &mut held,
                    command,
                    |state| start.clone().filter(|_| state.next() == Next::Start),
                    meta,
                )
                .await
                .map(|_| held.state().clone()),
            Err(e) => Err(e),
        };
        let created = match created {
            Ok(created) => created,
            Err(e) => {
                self.runner.abandon(&id, admission).await;
                return Err(e.into());
            }
        };
        metrics::counter!("service_debates_total").increment(1);
        let debate = self.runner.launch(admission, created).await;
        // Answer once the read model lists it, so that the creator (on any
        // replica) can read it straight away.
        self.documents.wait_for::<DebateDocs>(&id, |_| true).await?;
        // (The list row is written with the document, in its transaction.)
        Ok(debate)
    }

    /// The debate `id` as the read model has it, if `caller` may see it.
    #[tracing::instrument(level = "debug", skip_all, fields(debate_id = %id), err(level = "debug"))]
    pub async fn get(&self, caller: &Caller, id: &DebateId) -> Result<Option<Debate>, StoreError> {
        match self.stored(caller, id).await? {
            Some(text) => Ok(Some(serde_json::from_str(&text)?)),
            None => Ok(None),
        }
    }

    /// The debate `id`'s document as stored (unparsed, to serve or tag
    /// it), if `caller` may see it; only its owner and organization are
    /// read to decide.
    pub async fn stored(
        &self,
        caller: &Caller,
        id: &DebateId,
    ) -> Result<Option<String>, StoreError> {
        /// Who a debate belongs to: all a visibility check parses.
        #[derive(Deserialize)]
        struct Belonging {
            created_by: Option<String>,
            org_id: Option<String>,
        }
        let Some(text) = reads::document_text::<DebateDocs>(&self.log, id).await? else {
            return Ok(None);
        };
        let of: Belonging = serde_json::from_str(&text)?;
        let visible = self
            .visible_to(caller, of.created_by.as_deref(), of.org_id.as_deref())
            .await?;
        Ok(visible.then_some(text))
    }

    /// The debate `id` as the read model showed it at `as_of`, rebuilt
    /// from the log by the read model's own fold, if it existed by then and
    /// `caller` may see it (decided as for the live read).
    #[tracing::instrument(level = "debug", skip_all, fields(debate_id = %id), err(level = "debug"))]
    pub async fn as_of(
        &self,
        caller: &Caller,
        id: &DebateId,
        as_of: AsOf,
    ) -> Result<Option<Debate>, StoreError> {
        let replayed =
            replay::document_as_of::<DebateDocs>(&self.log, DEBATE_AGGREGATE, id.as_str(), as_of)
                .await?;
        match replayed {
            Some(debate) if self.visible(caller, &debate).await? => Ok(Some(debate)),
            _ => Ok(None),
        }
    }

    /// The debate `id` as its events in the log leave it, and the position
    /// of the last of them (where a live reader picks up), if `caller` may
    /// see it.
    pub async fn recorded(
        &self,
        caller: &Caller,
        id: &DebateId,
    ) -> Result<Option<(Debate, i64)>, StoreError> {
        let stream = self
            .log
            .load_stream(DEBATE_AGGREGATE, id.as_str(), 0)
            .await?;
        let Some(position) = stream.last().map(|e| e.position) else {
            return Ok(None);
        };
        let debate = self.as_of(caller, id, AsOf::Position(position)).await?;
        Ok(debate.map(|d| (d, position)))
    }

    /// The debate's owner and the last of its events the read model
    /// applied: its version, read without its document.
    pub async fn version(
        &self,
        id: &DebateId,
    ) -> Result<Option<(Option<String>, i64)>, StoreError> {
        reads::document_version::<DebateDocs>(&self.log, DEBATE_AGGREGATE, id).await
    }

    /// The topic search `text` asks for, checked against the configured length.
    pub fn search(&self, text: &str) -> Result<Option<TopicSearch>, SearchError> {
        TopicSearch::parse(text, self.limits.search_chars)
    }

    /// A page of the caller's debates (every debate for admins) as the
    /// list table stores them, newest first, with how many match in all;
    /// with a `search`, only those whose topic contains it (ignoring case).
    pub async fn list_page(
        &self,
        caller: &Caller,
        state: Option<&str>,
        search: Option<&TopicSearch>,
        limit: u32,
        offset: u64,
    ) -> Result<Arc<DebatePage>, StoreError> {
        let filter = filter_for(caller, state);
        if let Some(search) = search {
            // Searches vary too much to be worth keeping.
            let page = reads::debate_search_page(&self.log, filter, search.as_str(), limit, offset)
                .await?;
            return Ok(Arc::new(page));
        }
        let key = (
            filter.owner.map(str::to_owned),
            state.map(str::to_owned),
            limit,
            offset,
        );
        let load = reads::debate_page(&self.log, filter, limit, offset);
        self.cache.page(&self.log, key, load).await
    }

    /// The debate `id` without its messages, if `caller` may see it.
    #[tracing::instrument(level = "debug", skip_all, fields(debate_id = %id), err(level = "debug"))]
    pub async fn outcome(
        &self,
        caller: &Caller,
        id: &DebateId,
    ) -> Result<Option<DebateOutcome>, StoreError> {
        match self
            .documents
            .get_part::<DebateDocs, DebateOutcome>(id)
            .await?
        {
            Some(d)
                if self
                    .visible_to(caller, d.created_by.as_deref(), d.org_id.as_deref())
                    .await? =>
            {
                Ok(Some(d))
            }
            _ => Ok(None),
        }
    }

    /// The debates among `ids` that `caller` may see, in the order asked.
    #[tracing::instrument(level = "debug", skip_all, fields(ids = ids.len()), err(level = "debug"))]
    pub async fn many(&self, caller: &Caller, ids: &[DebateId]) -> Result<Vec<Debate>, StoreError> {
        let keys: Vec<String> = ids.iter().map(ToString::to_string).collect();
        let found = self.documents.many::<DebateDocs>(&keys).await?;
        let mut visible = Vec::with_capacity(found.len());
        for id in ids {
            if let Some(debate) = found.iter().find(|d| *id == d.id.as_str())
                && self.visible(caller, debate).await?
            {
                visible.push(debate.clone());
            }
        }
        Ok(visible)
    }

    /// A page of the caller's debates (every debate for admins), newest
    /// first, in status `state` when given, with how many match in all.
    #[tracing::instrument(level = "debug", skip_all, fields(limit, offset), err(level = "debug"))]
    pub async fn list(
        &self,
        caller: &Caller,
        state: Option<&str>,
        limit: u32,
        offset: u64,
    ) -> Result<(Vec<Debate>, u64), StoreError> {
        self.documents
            .list::<DebateDocs>(filter_for(caller, state), limit, offset)
            .await
    }

    /// The agents' ratings as the leaderboard projection has them.
    pub async fn leaderboard(&self) -> Result<Arc<LeaderboardView>, StoreError> {
        let load = load_view::<Leaderboard>(&self.log);
        self.cache.leaderboard(&self.log, load).await
    }

    /// Whether `caller` may see `debate`: its creator, members of its
    /// creator's organization, and admins. Membership is read from the
    /// `accounts` read model as it is now, not from the organization a token
    /// named when the debate was created (README "Who sees a debate").
    pub async fn visible(&self, caller: &Caller, debate: &Debate) -> Result<bool, StoreError> {
        self.visible_to(
            caller,
            debate.created_by.as_deref(),
            debate.org_id.as_deref(),
        )
        .await
    }

    /// [`Self::visible`] from a debate's creator and the organization
    /// recorded at creation (used only for creators without an account,
    /// such as callers identified by a trusted proxy's headers).
    pub async fn visible_to(
        &self,
        caller: &Caller,
        created_by: Option<&str>,
        org_id: Option<&str>,
    ) -> Result<bool, StoreError> {
        if caller.is_admin() || created_by == Some(caller.user_id.as_str()) {
            return Ok(true);
        }
        let Some(creator) = created_by else {
            return Ok(false);
        };
        let current_org = |account: Option<AccountView>, fallback: Option<&str>| match account {
            Some(account) => account.org_id,
            None => fallback.map(str::to_owned),
        };
        let theirs = current_org(self.documents.get::<Accounts>(creator).await?, org_id);
        let Some(theirs) = theirs else {
            return Ok(false);
        };
        let mine = current_org(
            self.documents.get::<Accounts>(&caller.user_id).await?,
            caller.org_id.as_deref(),
        );
        Ok(mine.as_deref() == Some(theirs.as_str()))
    }
}

/// The listing filter a caller gets: admins see every debate, others their own.
fn filter_for<'a>(caller: &'a Caller, state: Option<&'a str>) -> ListFilter<'a> {
    ListFilter {
        owner: (!caller.is_admin()).then_some(caller.user_id.as_str()),
        state,
    }
}
