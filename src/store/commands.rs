//! Runs a command against an aggregate: load, decide, commit, and retry on a
//! concurrent write, so that callers get the events (and the new state) back.

use agon_aggregates::CommandMeta;
use cqrs_es::event_sink::EventSink;
use cqrs_es::persist::{EventStoreAggregateContext, PersistedEventStore};
use cqrs_es::{Aggregate, AggregateContext, AggregateError, EventStore};
use thiserror::Error;

use super::{EventLog, StoreError};

/// How often a command is re-decided after losing a race for its stream.
const CONFLICT_RETRIES: usize = 5;

/// Follow-up commands [`EventLog::run_then`] puts in one append at most;
/// a longer chain goes on in the caller's next append.
pub const MAX_FOLLOW_UPS: usize = 64;

/// Why a command did not commit.
#[derive(Debug, Error)]
pub enum CommandError<E: std::error::Error> {
    /// The aggregate refused the command.
    #[error(transparent)]
    Rejected(E),
    /// The store failed.
    #[error("event store: {0}")]
    Store(#[source] StoreError),
    /// Other writers kept changing the stream through every retry: the
    /// command may be tried again in a moment.
    #[error("stream {aggregate_id} stayed contended after {attempts} attempts")]
    Contended {
        aggregate_id: String,
        attempts: usize,
    },
}

impl<E: std::error::Error> CommandError<E> {
    /// Whether the store was away: worth waiting out, not a fault.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, CommandError::Store(e) if e.is_unavailable())
    }
}

/// The outcome of a committed command.
#[derive(Debug)]
pub struct Executed<A: Aggregate> {
    /// The aggregate's state after the command.
    pub state: A,
    /// The events the command recorded (none when there was nothing to do).
    pub events: Vec<A::Event>,
}

impl EventLog {
    /// The current state of aggregate `id` (the default state when it has no events).
    pub async fn load<A: Aggregate>(&self, id: &str) -> Result<A, CommandError<A::Error>> {
        let store = PersistedEventStore::<_, A>::new_event_store(self.clone());
        let mut context = store.load_aggregate(id).await.map_err(store_error)?;
        Ok(std::mem::take(context.aggregate()))
    }

    /// Aggregate `id` with the sequence its state stands at, for a caller
    /// that issues several commands in a row ([`EventLog::run`]).
    pub async fn load_held<A: Aggregate>(
        &self,
        id: &str,
    ) -> Result<Held<A>, CommandError<A::Error>> {
        let store = PersistedEventStore::<_, A>::new_event_store(self.clone());
        let context = store.load_aggregate(id).await.map_err(store_error)?;
        Ok(Held { context })
    }

    /// Decides `command` on a state the caller holds and commits its events,
    /// without reading the stream again; when another writer got there
    /// first, reloads and decides again. `held` is left at the new state.
    pub async fn run<A>(
        &self,
        held: &mut Held<A>,
        command: A::Command,
        meta: CommandMeta,
    ) -> Result<Vec<A::Event>, CommandError<A::Error>>
    where
        A: Aggregate<Services = ()> + Clone,
        A::Command: Clone,
    {
        self.run_then(held, command, |_| None, meta).await
    }

    /// [`EventLog::run`], then the commands `follow` asks for on each state
    /// the previous one leaves, until it asks for none (at most
    /// [`MAX_FOLLOW_UPS`]), all committed in one append: one write where a
    /// caller would otherwise make several in a row. A refused follow-up
    /// ends the chain; the commands before it still commit. On a retry after
    /// a lost race `follow` is asked again from the start.
    #[tracing::instrument(level = "debug", skip_all, fields(aggregate = A::TYPE, id = %held.context.aggregate_id), err(level = "debug"))]
    pub async fn run_then<A>(
        &self,
        held: &mut Held<A>,
        command: A::Command,
        mut follow: impl FnMut(&A) -> Option<A::Command>,
        meta: CommandMeta,
    ) -> Result<Vec<A::Event>, CommandError<A::Error>>
    where
        A: Aggregate<Services = ()> + Clone,
        A::Command: Clone,
    {
        let store = PersistedEventStore::<_, A>::new_event_store(self.clone());
        let mut attempt = 0;
        loop {
            let sink = EventSink::default();
            let mut next = held.context.aggregate.clone();
            next.handle(command.clone(), &(), &sink)
                .await
                .map_err(CommandError::Rejected)?;
            let mut events = sink.collect().await;
            for _ in 0..MAX_FOLLOW_UPS {
                let Some(then) = follow(&next) else { break };
                let mut further = next.clone();
                let sink = EventSink::default();
                if further.handle(then, &(), &sink).await.is_err() {
                    break;
                }
                events.extend(sink.collect().await);
                next = further;
            }
            if events.is_empty() {
                return Ok(events);
            }
            let context = EventStoreAggregateContext {
                aggregate_id: held.context.aggregate_id.clone(),
                aggregate: next.clone(),
                current_sequence: held.context.current_sequence,
                current_snapshot: None,
            };
            match store.commit(events.clone(), context, scoped(&meta)).await {
                Ok(_) => {
                    held.context.current_sequence += events.len();
                    held.context.aggregate = next;
                    return Ok(events);
                }
                Err(AggregateError::AggregateConflict) if attempt < CONFLICT_RETRIES => {
                    attempt += 1;
                    *held = self.load_held(&held.context.aggregate_id).await?;
                }
                Err(AggregateError::AggregateConflict) => {
                    return Err(CommandError::Contended {
                        aggregate_id: held.context.aggregate_id.clone(),
                        attempts: attempt + 1,
                    });
                }
                Err(e) => return Err(store_error(e)),
            }
        }
    }

    /// Decides `command` on the current state of `id` and commits its events.
    #[tracing::instrument(level = "debug", skip_all, fields(aggregate = A::TYPE, id = %id), err(level = "debug"))]
    pub async fn execute<A>(
        &self,
        id: &str,
        command: A::Command,
        meta: CommandMeta,
    ) -> Result<Executed<A>, CommandError<A::Error>>
    where
        A: Aggregate<Services = ()>,
        A::Command: Clone,
    {
        let store = PersistedEventStore::<_, A>::new_event_store(self.clone());
        let mut attempt = 0;
        loop {
            let mut context = store.load_aggregate(id).await.map_err(store_error)?;
            let sink = EventSink::default();
            context
                .aggregate()
                .handle(command.clone(), &(), &sink)
                .await
                .map_err(CommandError::Rejected)?;
            let state = std::mem::take(context.aggregate());
            let events = sink.collect().await;
            if events.is_empty() {
                return Ok(Executed { state, events });
            }
            match store.commit(events.clone(), context, scoped(&meta)).await {
                Ok(_) => return Ok(Executed { state, events }),
                Err(AggregateError::AggregateConflict) if attempt < CONFLICT_RETRIES => {
                    attempt += 1;
                }
                Err(AggregateError::AggregateConflict) => {
                    return Err(CommandError::Contended {
                        aggregate_id: id.to_owned(),
                        attempts: attempt + 1,
                    });
                }
                Err(e) => return Err(store_error(e)),
            }
        }
    }
}

/// An aggregate's state as of a known sequence, held between commands.
pub struct Held<A: Aggregate> {
    context: EventStoreAggregateContext<A>,
}

impl<A: Aggregate> std::fmt::Debug for Held<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held")
            .field("aggregate_id", &self.context.aggregate_id)
            .field("sequence", &self.context.current_sequence)
            .finish()
    }
}

impl<A: Aggregate> Held<A> {
    pub fn state(&self) -> &A {
        &self.context.aggregate
    }
}

/// The metadata stored with a command's events: `meta`, with the id of
/// the request the command runs for when the edge did not name one.
fn scoped(meta: &CommandMeta) -> std::collections::HashMap<String, String> {
    let mut meta = meta.clone();
    if meta.request_id.is_none() {
        meta.request_id = crate::request::current_request_id();
    }
    meta.into_map()
}

/// What cqrs-es reports, with the store's own error recovered from the
/// box the persistence seam put it in.
fn store_error<E: std::error::Error>(error: AggregateError<E>) -> CommandError<E> {
    let boxed = match error {
        AggregateError::UserError(e) => return CommandError::Rejected(e),
        AggregateError::AggregateConflict => {
            return CommandError::Contended {
                aggregate_id: String::new(),
                attempts: 1,
            };
        }
        AggregateError::DatabaseConnectionError(e)
        | AggregateError::DeserializationError(e)
        | AggregateError::UnexpectedError(e) => e,
    };
    CommandError::Store(match boxed.downcast::<StoreError>() {
        Ok(store) => *store,
        Err(other) => StoreError::Persistence(other),
    })
}

#[cfg(test)]
mod tests {
    use agon_aggregates::debate::DebateError;

    use super::*;

    #[test]
    fn the_stores_own_error_comes_back_out_of_the_framework() {
        let outage = StoreError::Unavailable {
            source: sqlx::Error::PoolTimedOut,
        };
        let through = cqrs_es::persist::PersistenceError::from(outage);
        let error: CommandError<DebateError> = store_error(AggregateError::from(through));
        assert!(
            matches!(&error, CommandError::Store(StoreError::Unavailable { .. })),
            "{error:?}"
        );
        assert!(error.is_unavailable());
    }

    #[test]
    fn refusals_and_lost_races_keep_their_kind() {
        let refused: CommandError<DebateError> =
            store_error(AggregateError::UserError(DebateError::EmptyTopic));
        assert!(matches!(
            refused,
            CommandError::Rejected(DebateError::EmptyTopic)
        ));
        let raced: CommandError<DebateError> = store_error(AggregateError::AggregateConflict);
        assert!(matches!(raced, CommandError::Contended { .. }));
        assert!(!raced.is_unavailable());
    }
}
