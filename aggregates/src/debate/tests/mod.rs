//! Given/when/then tests of the Debate aggregate: shared givens here,
//! creation and status changes in [`lifecycle`], round turns and failures
//! in [`rounds`], synthesis, votes and conclusion in [`concluding`], a whole
//! debate end to end in [`replay`], and the consensus arithmetic in [`props`].

use chrono::{DateTime, Utc};
use cqrs_es::Aggregate;
use cqrs_es::test::TestFramework;

use super::*;

mod concluding;
mod gallery;
mod lifecycle;
mod props;
mod replay;
mod rounds;

pub(super) type Given = TestFramework<Debate>;

/// The one instant every command and event of these tests carries.
pub(super) fn at() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2027-01-15T08:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

pub(super) fn usage() -> Usage {
    Usage {
        provider: "anthropic".to_owned(),
        model: "claude-test".to_owned(),
        tokens_in: 120,
        tokens_out: 80,
        latency_ms: 900,
        fallback: false,
    }
}

pub(super) fn names(agents: &[&str]) -> Vec<String> {
    agents.iter().map(|a| (*a).to_owned()).collect()
}

/// The default phases and threshold, in majority mode.
pub(super) fn protocol(rounds: u32) -> Protocol {
    Protocol {
        phases: names(&DEFAULT_PHASES),
        rounds,
        consensus: ConsensusMode::Majority,
        threshold: DEFAULT_THRESHOLD,
        judge: None,
    }
}

pub(super) fn create(agents: &[&str], protocol: Protocol) -> DebateCommand {
    DebateCommand::Create {
        debate_id: "d1".to_owned(),
        topic: "Is Rust fun?".to_owned(),
        context: Some("For a team of five.".to_owned()),
        agents: names(agents),
        protocol,
        limits: Limits::DEFAULT,
        created_by: Some("u1".to_owned()),
        org_id: None,
        at: at(),
    }
}

/// The event that `create(agents, protocol)` records.
pub(super) fn created_with(agents: &[&str], protocol: Protocol) -> DebateEvent {
    DebateEvent::DebateCreated {
        debate_id: "d1".to_owned(),
        topic: "Is Rust fun?".to_owned(),
        context: Some("For a team of five.".to_owned()),
        agents: names(agents),
        protocol,
        created_by: Some("u1".to_owned()),
        org_id: None,
        at: at(),
    }
}

pub(super) fn created(agents: &[&str], rounds: u32) -> DebateEvent {
    created_with(agents, protocol(rounds))
}

pub(super) fn started() -> DebateEvent {
    DebateEvent::DebateStarted { at: at() }
}

/// Created with the default protocol and started.
pub(super) fn running(agents: &[&str], rounds: u32) -> Vec<DebateEvent> {
    vec![created(agents, rounds), started()]
}

pub(super) fn record(outcomes: Vec<Outcome>) -> DebateCommand {
    DebateCommand::Record { outcomes, at: at() }
}

pub(super) fn step(round: u32, phase: &str, agent: &str) -> Step {
    Step {
        round,
        phase: phase.to_owned(),
        agent: agent.to_owned(),
    }
}

fn content(round: u32, phase: &str, agent: &str) -> String {
    format!("{agent}'s {phase} in round {round}")
}

/// An agent's turn as the runner reports it...
pub(super) fn says(round: u32, phase: &str, agent: &str) -> Outcome {
    Outcome::Message {
        step: step(round, phase, agent),
        content: content(round, phase, agent),
        targets: vec!["b".to_owned()],
        usage: usage(),
    }
}

/// ...and as it is recorded.
pub(super) fn said(round: u32, phase: &str, agent: &str) -> DebateEvent {
    DebateEvent::MessageRecorded {
        round,
        phase: phase.to_owned(),
        agent: agent.to_owned(),
        content: content(round, phase, agent),
        targets: vec!["b".to_owned()],
        usage: usage(),
        at: at(),
    }
}

/// A failed call of `agent`, with the error text `"{code} error"`.
pub(super) fn fails(round: u32, phase: &str, agent: &str, code: &str) -> Outcome {
    Outcome::Failure {
        step: step(round, phase, agent),
        code: code.to_owned(),
        error: format!("{code} error"),
    }
}

pub(super) fn failed(round: u32, phase: &str, agent: &str, code: &str) -> DebateEvent {
    DebateEvent::AgentFailed {
        round,
        phase: phase.to_owned(),
        agent: agent.to_owned(),
        code: code.to_owned(),
        error: format!("{code} error"),
        at: at(),
    }
}

pub(super) fn drafts(agent: &str) -> Outcome {
    Outcome::Synthesis {
        agent: agent.to_owned(),
        summary: "Rust is fun".to_owned(),
        key_points: vec!["ownership".to_owned(), "tooling".to_owned()],
        usage: usage(),
    }
}

pub(super) fn drafted(agent: &str) -> DebateEvent {
    DebateEvent::SynthesisDrafted {
        agent: agent.to_owned(),
        summary: "Rust is fun".to_owned(),
        key_points: vec!["ownership".to_owned(), "tooling".to_owned()],
        usage: usage(),
        at: at(),
    }
}

/// A vote whose reason and modification name the agent.
pub(super) fn votes(agent: &str, choice: VoteChoice, confidence: f64) -> Outcome {
    Outcome::Vote {
        agent: agent.to_owned(),
        choice,
        confidence,
        reasons: vec![format!("{agent}'s reason")],
        modifications: vec![format!("{agent}'s change")],
        usage: usage(),
    }
}

pub(super) fn voted(agent: &str, choice: VoteChoice, confidence: f64) -> DebateEvent {
    DebateEvent::VoteCast {
        agent: agent.to_owned(),
        choice,
        confidence,
        reasons: vec![format!("{agent}'s reason")],
        modifications: vec![format!("{agent}'s change")],
        usage: usage(),
        at: at(),
    }
}

/// The round stages of the default phases: opening in round 1, then
/// critique and revision in every round.
pub(super) fn default_turns(rounds: u32) -> Vec<(u32, &'static str)> {
    let mut turns = vec![(1, "opening")];
    for round in 1..=rounds {
        turns.push((round, "critique"));
        turns.push((round, "revision"));
    }
    turns
}

/// Running, with every agent's every round turn recorded: next comes the synthesis.
pub(super) fn debated(agents: &[&str], rounds: u32) -> Vec<DebateEvent> {
    let mut events = running(agents, rounds);
    for (round, phase) in default_turns(rounds) {
        events.extend(agents.iter().map(|agent| said(round, phase, agent)));
    }
    events
}

pub(super) fn checkpointed(id: &str, round: u32, phase: &str, messages: u32) -> DebateEvent {
    DebateEvent::CheckpointCreated {
        checkpoint_id: id.to_owned(),
        round,
        phase: phase.to_owned(),
        messages,
        at: at(),
    }
}

/// Paused in the opening, after `messages` openings.
pub(super) fn paused(id: &str, messages: u32) -> Vec<DebateEvent> {
    vec![
        checkpointed(id, 1, "opening", messages),
        DebateEvent::DebatePaused {
            checkpoint_id: id.to_owned(),
            at: at(),
        },
    ]
}

pub(super) fn replay(events: Vec<DebateEvent>) -> Debate {
    let mut debate = Debate::default();
    for event in events {
        debate.apply(event);
    }
    debate
}

/// What the debate needs next after `events`.
pub(super) fn next_after(events: Vec<DebateEvent>) -> Next {
    replay(events).next()
}

pub(super) fn work(stage: Stage, agents: &[&str]) -> Next {
    Next::Work {
        stage,
        agents: names(agents),
    }
}

pub(super) fn turns(round: u32, phase: &str) -> Stage {
    Stage::Turns {
        round,
        phase: phase.to_owned(),
    }
}

pub(super) fn unexpected(what: &str) -> DebateError {
    DebateError::Unexpected(what.to_owned())
}

pub(super) fn wrong_status(status: &'static str, action: &'static str) -> DebateError {
    DebateError::WrongStatus { status, action }
}
