//! Drives one debate to its end: asks the aggregate what is next, calls the
//! agents of a stage at once, and records each answer as soon as it lands
//! (answers that land together go in one command), so a crash loses only
//! the calls in flight. While the database is away, answers are kept and
//! their append retried (`run_stage`). Work that waits on nothing outside the process
//! (stages whose agents all answer locally, the conclusion) rides in the
//! append of the command before it: a crash before that append loses only
//! work that is redone at once.

use std::sync::Arc;

use agon_aggregates::CommandMeta;
use agon_aggregates::debate::{
    Debate, DebateCommand, DebateError, DebateEvent, Next, Outcome, Stage,
};
use agon_projections::Leaderboard;
use futures::FutureExt;
use futures::stream::{FuturesUnordered, StreamExt};
use thiserror::Error;

use super::Inner;
use super::deltas::TurnText;
use super::turns;
use crate::agents::Agents;

/// The first wait before an append is tried again while the database is
/// away; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: std::time::Duration = std::time::Duration::from_millis(250);
const MAX_BACKOFF: std::time::Duration = std::time::Duration::from_secs(2);
use crate::projection::load_view;
use crate::store::{CommandError, StoreError};

#[derive(Debug, Error)]
pub enum DriveError {
    #[error("event store: {0}")]
    Store(#[from] StoreError),
    /// Other writers kept the debate's stream busy through every retry.
    #[error("the debate's stream stayed contended")]
    Contended,
    #[error("the debate refused the runner: {0}")]
    Refused(#[from] DebateError),
    #[error("the claim on the debate was lost to another replica")]
    LeaseLost,
}

impl From<CommandError<DebateError>> for DriveError {
    fn from(error: CommandError<DebateError>) -> Self {
        match error {
            CommandError::Rejected(e) => DriveError::Refused(e),
            CommandError::Store(e) => DriveError::Store(e),
            CommandError::Contended { .. } => DriveError::Contended,
        }
    }
}

fn meta(id: &str) -> CommandMeta {
    CommandMeta {
        correlation_id: Some(id.to_owned()),
        ..CommandMeta::by("runner")
    }
}

/// Runs debate `id` until it completes, fails or pauses.
pub(super) async fn drive(inner: Arc<Inner>, id: String) -> Result<(), DriveError> {
    let log = &inner.log;
    let mut held = log.load_held::<Debate>(&id).await?;
    loop {
        if !inner.holds_lease(&id) {
            return Err(DriveError::LeaseLost);
        }
        let at = inner.clock.now();
        match held.state().next() {
            Next::Start => {
                let local = LocalWork::including_conclusion(&inner, held.state()).await?;
                let command = DebateCommand::Start { at };
                let events = log
                    .run_then(&mut held, command, |s| local.next(s), meta(&id))
                    .await?;
                count_endings(&events);
            }
            Next::Work { stage, agents } if inner.agents.all_answer_locally(&agents) => {
                let local = LocalWork::including_conclusion(&inner, held.state()).await?;
                if let Some(command) = local.next(held.state()) {
                    let outcome = log
                        .run_then(&mut held, command, |s| local.next(s), meta(&id))
                        .await;
                    settle(&inner, &mut held, &stage, outcome).await?;
                }
            }
            Next::Work { stage, agents } => run_stage(&inner, &mut held, &stage, &agents).await?,
            Next::Conclude => {
                let command = conclusion(&inner, held.state()).await?;
                count_endings(&log.run(&mut held, command, meta(&id)).await?);
            }
            Next::Paused | Next::Finished => return Ok(()),
        }
    }
}

/// The commands that need no wait outside the process: answers of stages
/// whose agents all answer locally, and the conclusion once it is loaded.
struct LocalWork<'a> {
    inner: &'a Inner,
    conclusion: Option<DebateCommand>,
}

impl<'a> LocalWork<'a> {
    fn without_conclusion(inner: &'a Inner) -> Self {
        Self {
            inner,
            conclusion: None,
        }
    }

    async fn including_conclusion(inner: &'a Inner, debate: &Debate) -> Result<Self, StoreError> {
        Ok(Self {
            inner,
            conclusion: Some(conclusion(inner, debate).await?),
        })
    }

    /// The next such command on `debate`, if its next step is one.
    fn next(&self, debate: &Debate) -> Option<DebateCommand> {
        match debate.next() {
            Next::Work { stage, agents } if self.inner.agents.all_answer_locally(&agents) => {
                let outcomes = agents
                    .iter()
                    .filter_map(|agent| {
                        let turn = turns::turn(debate, &stage, agent);
                        let reply = self.inner.agents.call_locally(&turn)?;
                        let text =
                            TurnText::new(&self.inner.deltas, &self.inner.clock, debate, &turn);
                        Agents::write_locally(&reply, &text);
                        Some(turns::outcome(debate, &stage, &turn, Ok(reply)))
                    })
                    .collect();
                Some(DebateCommand::Record {
                    outcomes,
                    at: self.inner.clock.now(),
                })
            }
            Next::Conclude => self.conclusion.clone(),
            _ => None,
        }
    }
}

/// Counts the endings of a committed append (true); when the debate
/// refused it (someone else moved it on: failed it, another replica),
/// reloads it so the drive loop looks again at what it needs (false),
/// unless it still waits in `stage` (then the refusal is the error).
async fn settle(
    inner: &Inner,
    held: &mut crate::store::Held<Debate>,
    stage: &Stage,
    outcome: Result<Vec<DebateEvent>, CommandError<DebateError>>,
) -> Result<bool, DriveError> {
    match outcome {
        Ok(events) => {
            count_endings(&events);
            Ok(true)
        }
        Err(CommandError::Rejected(e)) => {
            let id = held.state().id.clone();
            tracing::warn!(debate = %id, error = %e, "answers not recorded");
            *held = inner.log.load_held::<Debate>(&id).await?;
            let stuck =
                matches!(held.state().next(), Next::Work { stage: ref s, .. } if s == stage);
            if stuck { Err(e.into()) } else { Ok(false) }
        }
        Err(e) => Err(e.into()),
    }
}

/// The command that computes the consensus, weighted by the agents'
/// current ratings.
async fn conclusion(inner: &Inner, debate: &Debate) -> Result<DebateCommand, StoreError> {
    let weights = load_view::<Leaderboard>(&inner.log)
        .await?
        .ratings(&debate.agents);
    Ok(DebateCommand::Conclude {
        weights,
        at: inner.clock.now(),
    })
}

/// Counts debates that the runner's own command ended.
fn count_endings(events: &[DebateEvent]) {
    for event in events {
        match event {
            DebateEvent::DebateCompleted { .. } => {
                metrics::counter!("service_debates_completed").increment(1);
            }
            DebateEvent::DebateFailed { .. } => {
                metrics::counter!("service_debates_failed_total").increment(1);
            }
            _ => {}
        }
    }
}

/// Calls every agent that owes a turn in `stage` at once and records the answers.
///
/// Answers are kept in memory until they are recorded: while the database
/// is away (a store error that reports an outage) the append is tried again
/// with back-off, and answers landing meanwhile join it, so that no provider
/// is asked twice for an answer already received. The wait is unbounded
/// while the service runs; at shutdown the runner's drain cuts it off after
/// `SERVICE_SHUTDOWN_GRACE_SECONDS`, and answers still unrecorded then are
/// asked for again at the next start.
async fn run_stage(
    inner: &Arc<Inner>,
    held: &mut crate::store::Held<Debate>,
    stage: &Stage,
    agents: &[String],
) -> Result<(), DriveError> {
    let id = held.state().id.clone();
    let debate = held.state().clone();
    let mut calls: FuturesUnordered<_> = agents
        .iter()
        .map(|agent| {
            let turn = turns::turn(&debate, stage, agent);
            let agents = inner.agents.clone();
            let text = TurnText::new(&inner.deltas, &inner.clock, &debate, &turn);
            async move {
                let result = agents.call_streaming(&turn, &text).await;
                (turn, result)
            }
        })
        .collect();
    let outcome_of = |(turn, result)| turns::outcome(&debate, stage, &turn, result);
    // Answers received and not yet recorded.
    let mut pending: Vec<Outcome> = Vec::new();
    let mut backoff = FIRST_BACKOFF;
    loop {
        if pending.is_empty() {
            let Some(first) = calls.next().await else {
                return Ok(());
            };
            pending.push(outcome_of(first));
        }
        while let Some(Some(next)) = calls.next().now_or_never() {
            pending.push(outcome_of(next));
        }
        let last = calls.is_empty();
        let outcome = record(inner, held, &id, &debate, pending.clone(), last).await;
        match outcome {
            Err(cause) if cause.is_unavailable() => {
                if backoff == FIRST_BACKOFF {
                    tracing::warn!(debate = %id, answers = pending.len(), error = %cause,
                        "database unavailable; keeping the answers and retrying");
                }
                // Calls still out go on landing meanwhile.
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    Some(landed) = calls.next(), if !calls.is_empty() => {
                        pending.push(outcome_of(landed));
                    }
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            outcome => {
                if backoff != FIRST_BACKOFF {
                    tracing::info!(debate = %id, "database back; answers recorded");
                }
                pending.clear();
                backoff = FIRST_BACKOFF;
                if !settle(inner, held, stage, outcome).await? {
                    // Refused and reloaded: the drive loop decides again.
                    return Ok(());
                }
            }
        }
    }
}

/// Records `outcomes` in one append. The last answers of a stage take along
/// the local work after them (the consensus after the last votes), loaded
/// now so the ratings it weighs by are current.
async fn record(
    inner: &Arc<Inner>,
    held: &mut crate::store::Held<Debate>,
    id: &str,
    debate: &Debate,
    outcomes: Vec<Outcome>,
    last: bool,
) -> Result<Vec<DebateEvent>, CommandError<DebateError>> {
    let at = inner.clock.now();
    let local = if last {
        LocalWork::including_conclusion(inner, debate)
            .await
            .map_err(CommandError::Store)?
    } else {
        LocalWork::without_conclusion(inner)
    };
    inner
        .log
        .run_then(
            held,
            DebateCommand::Record { outcomes, at },
            |s| if last { local.next(s) } else { None },
            meta(id),
        )
        .await
}
