//! Drives one debate to its end: asks the aggregate what is next, calls the
//! agents of a stage at once, and records each answer as soon as it lands
//! (answers that land together go in one command), so a crash loses only
//! the calls in flight.

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
use super::turns;
use crate::projection::load_view;
use crate::store::{CommandError, StoreError};

#[derive(Debug, Error)]
pub enum DriveError {
    #[error("event store: {0}")]
    Store(String),
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
        }
    }
}

impl From<StoreError> for DriveError {
    fn from(error: StoreError) -> Self {
        DriveError::Store(error.to_string())
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
                let events = log
                    .run(&mut held, DebateCommand::Start { at }, meta(&id))
                    .await?;
                count_endings(&events);
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

/// The command that computes the consensus, weighted by the agents'
/// current ratings.
async fn conclusion(inner: &Inner, debate: &Debate) -> Result<DebateCommand, DriveError> {
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
            async move {
                let result = agents.call(&turn).await;
                (turn, result)
            }
        })
        .collect();
    while let Some(first) = calls.next().await {
        let mut landed = vec![first];
        while let Some(Some(next)) = calls.next().now_or_never() {
            landed.push(next);
        }
        let outcomes: Vec<Outcome> = landed
            .into_iter()
            .map(|(turn, result)| turns::outcome(&debate, stage, &turn, result))
            .collect();
        let at = inner.clock.now();
        // The last votes and the consensus they make go in one append.
        let conclude = match (stage, calls.is_empty()) {
            (Stage::Vote, true) => Some(conclusion(inner, &debate).await?),
            _ => None,
        };
        let follow = |state: &Debate| {
            conclude
                .clone()
                .filter(|_| matches!(state.next(), Next::Conclude))
        };
        match inner
            .log
            .run_then(
                held,
                DebateCommand::Record { outcomes, at },
                follow,
                meta(&id),
            )
            .await
        {
            Ok(events) => count_endings(&events),
            // Someone else moved the debate on (failed it, another replica):
            // the loop above looks again at what it needs.
            Err(CommandError::Rejected(e)) => {
                tracing::warn!(debate = %id, error = %e, "answers not recorded");
                *held = inner.log.load_held::<Debate>(&id).await?;
                let stuck =
                    matches!(held.state().next(), Next::Work { stage: ref s, .. } if s == stage);
                return if stuck { Err(e.into()) } else { Ok(()) };
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
