//! The debate's decisions: each command checked against the state and
//! turned into events.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use cqrs_es::Aggregate;
use cqrs_es::event_sink::EventSink;

use super::commands::{DebateCommand, Outcome, Step};
use super::consensus::{self, Tally};
use super::error::DebateError;
use super::events::DebateEvent;
use super::plan::{Next, Stage};
use super::state::{Debate, DebateStatus};
use crate::Decide;

impl Aggregate for Debate {
    const TYPE: &'static str = "debate";
    type Command = DebateCommand;
    type Event = DebateEvent;
    type Error = DebateError;
    type Services = ();

    async fn handle(
        &mut self,
        command: Self::Command,
        _services: &Self::Services,
        sink: &EventSink<Self>,
    ) -> Result<(), Self::Error> {
        crate::record(self, command, sink).await
    }

    fn apply(&mut self, event: Self::Event) {
        self.apply_event(event);
    }
}

impl Decide for Debate {
    fn decide(&self, command: DebateCommand) -> Result<Vec<DebateEvent>, DebateError> {
        if let DebateCommand::Create {
            debate_id,
            topic,
            context,
            agents,
            protocol,
            limits,
            created_by,
            org_id,
            at,
        } = command
        {
            if self.exists() {
                return Err(DebateError::AlreadyExists);
            }
            super::rules::check_new(&topic, &agents, &protocol, &limits)?;
            return Ok(vec![DebateEvent::DebateCreated {
                debate_id,
                topic,
                context,
                agents,
                protocol,
                created_by,
                org_id,
                at,
            }]);
        }
        if !self.exists() {
            return Err(DebateError::NotFound);
        }
        match command {
            DebateCommand::Create { .. } => Err(DebateError::AlreadyExists),
            DebateCommand::Start { at } => {
                self.require(&[DebateStatus::Pending], "start")?;
                Ok(vec![DebateEvent::DebateStarted { at }])
            }
            DebateCommand::Record { outcomes, at } => self.record_outcomes(outcomes, at),
            DebateCommand::Conclude { weights, at } => self.conclude(&weights, at),
            DebateCommand::Fail { reason, at } => {
                self.require(
                    &[
                        DebateStatus::Pending,
                        DebateStatus::Running,
                        DebateStatus::Paused,
                    ],
                    "fail",
                )?;
                Ok(vec![DebateEvent::DebateFailed { reason, at }])
            }
            DebateCommand::Checkpoint { checkpoint_id, at } => {
                self.require(&[DebateStatus::Running, DebateStatus::Paused], "checkpoint")?;
                Ok(vec![self.checkpoint(checkpoint_id, at)])
            }
            DebateCommand::Pause { checkpoint_id, at } => {
                self.require(&[DebateStatus::Running], "pause")?;
                Ok(vec![
                    self.checkpoint(checkpoint_id.clone(), at),
                    DebateEvent::DebatePaused { checkpoint_id, at },
                ])
            }
            DebateCommand::Resume { at } => {
                self.require(&[DebateStatus::Paused], "resume")?;
                Ok(vec![DebateEvent::DebateResumed { at }])
            }
            // Only a finished debate with an outcome is shown to the public;
            // asking twice changes nothing.
            DebateCommand::Publish { at } => {
                self.require(&[DebateStatus::Completed], "publish")?;
                Ok(match self.published_at {
                    Some(_) => vec![],
                    None => vec![DebateEvent::DebatePublished { at }],
                })
            }
            DebateCommand::Unpublish { at } => Ok(match self.published_at {
                Some(_) => vec![DebateEvent::DebateUnpublished { at }],
                None => vec![],
            }),
        }
    }
}

impl Debate {
    fn require(&self, allowed: &[DebateStatus], action: &'static str) -> Result<(), DebateError> {
        if allowed.contains(&self.status) {
            Ok(())
        } else {
            Err(DebateError::WrongStatus {
                status: self.status.as_str(),
                action,
            })
        }
    }

    fn checkpoint(&self, checkpoint_id: String, at: DateTime<Utc>) -> DebateEvent {
        let (round, phase) = match self.current_stage() {
            Some(Stage::Turns { round, phase }) => (round, phase),
            Some(Stage::Synthesis) => (self.last_round(), "synthesis".to_owned()),
            Some(Stage::Vote) | None => (self.last_round(), "vote".to_owned()),
        };
        DebateEvent::CheckpointCreated {
            checkpoint_id,
            round,
            phase,
            messages: u32::try_from(self.messages.len()).unwrap_or(u32::MAX),
            at,
        }
    }

    /// Records outcomes one after the other on a scratch copy, so that each
    /// is checked against the state the previous ones left; fails the debate
    /// when no agent is left standing.
    fn record_outcomes(
        &self,
        outcomes: Vec<Outcome>,
        at: DateTime<Utc>,
    ) -> Result<Vec<DebateEvent>, DebateError> {
        // Calls in flight when a pause came in still land.
        self.require(&[DebateStatus::Running, DebateStatus::Paused], "record")?;
        let mut scratch = self.clone();
        let mut events = Vec::with_capacity(outcomes.len() + 1);
        for outcome in outcomes {
            let event = scratch.outcome_event(outcome, at)?;
            scratch.apply_event(event.clone());
            events.push(event);
        }
        if scratch.active_agents().next().is_none() {
            events.push(DebateEvent::DebateFailed {
                reason: every_agent_failed(&scratch),
                at,
            });
        }
        Ok(events)
    }

    fn outcome_event(
        &self,
        outcome: Outcome,
        at: DateTime<Utc>,
    ) -> Result<DebateEvent, DebateError> {
        let owed = |stage: Stage, agent: &str| self.owes(&stage, agent);
        match outcome {
            Outcome::Message {
                step,
                content,
                targets,
                usage,
            } => {
                if !owed(turn_stage(&step), &step.agent) {
                    return Err(unexpected(&step));
                }
                Ok(DebateEvent::MessageRecorded {
                    round: step.round,
                    phase: step.phase,
                    agent: step.agent,
                    content,
                    targets,
                    usage,
                    at,
                })
            }
            Outcome::Synthesis {
                agent,
                summary,
                key_points,
                usage,
            } => {
                if !owed(Stage::Synthesis, &agent) {
                    return Err(DebateError::Unexpected(format!("synthesis by {agent}")));
                }
                Ok(DebateEvent::SynthesisDrafted {
                    agent,
                    summary,
                    key_points,
                    usage,
                    at,
                })
            }
            Outcome::Vote {
                agent,
                choice,
                confidence,
                reasons,
                modifications,
                usage,
            } => {
                if !owed(Stage::Vote, &agent) {
                    return Err(DebateError::Unexpected(format!("vote by {agent}")));
                }
                Ok(DebateEvent::VoteCast {
                    agent,
                    choice,
                    confidence: consensus::unit(confidence),
                    reasons,
                    modifications,
                    usage,
                    at,
                })
            }
            Outcome::Failure { step, code, error } => {
                let stage = match step.phase.as_str() {
                    "synthesis" => Stage::Synthesis,
                    "vote" => Stage::Vote,
                    _ => turn_stage(&step),
                };
                if !owed(stage, &step.agent) {
                    return Err(unexpected(&step));
                }
                Ok(DebateEvent::AgentFailed {
                    round: step.round,
                    phase: step.phase,
                    agent: step.agent,
                    code,
                    error,
                    at,
                })
            }
        }
    }

    /// Work is taken only for the stage under way, once per active agent.
    fn owes(&self, stage: &Stage, agent: &str) -> bool {
        self.current_stage().as_ref() == Some(stage)
            && self.missing(stage).iter().any(|a| a == agent)
    }

    fn conclude(
        &self,
        ratings: &BTreeMap<String, f64>,
        at: DateTime<Utc>,
    ) -> Result<Vec<DebateEvent>, DebateError> {
        self.require(&[DebateStatus::Running], "conclude")?;
        if self.next() != Next::Conclude {
            return Err(DebateError::VotesMissing);
        }
        if self.votes.is_empty() {
            return Ok(vec![DebateEvent::DebateFailed {
                reason: every_agent_failed(self),
                at,
            }]);
        }
        let Some(protocol) = &self.protocol else {
            return Err(DebateError::NotFound);
        };
        let synthesis = self.synthesis.as_ref();
        let failed = self.failed_agents();
        let judge = protocol
            .judge
            .clone()
            .or_else(|| self.agents.first().cloned());
        let result = consensus::decide(Tally {
            votes: &self.votes,
            mode: protocol.consensus,
            threshold: protocol.threshold,
            judge: judge.as_deref(),
            ratings,
            summary: synthesis.map_or("", |s| s.summary.as_str()),
            key_points: synthesis.map_or(&[], |s| s.key_points.as_slice()),
            failed_agents: &failed,
        });
        Ok(vec![
            DebateEvent::ConsensusComputed { result, at },
            DebateEvent::DebateCompleted { at },
        ])
    }
}

fn turn_stage(step: &Step) -> Stage {
    Stage::Turns {
        round: step.round,
        phase: step.phase.clone(),
    }
}

fn unexpected(step: &Step) -> DebateError {
    DebateError::Unexpected(format!(
        "{} in {} round {}",
        step.agent, step.phase, step.round
    ))
}

fn every_agent_failed(debate: &Debate) -> String {
    let causes: Vec<String> = debate
        .failures
        .iter()
        .map(|f| format!("{} ({}: {})", f.agent, f.code, f.error))
        .collect();
    if causes.is_empty() {
        "no agent voted".to_owned()
    } else {
        format!("every agent failed: {}", causes.join("; "))
    }
}
