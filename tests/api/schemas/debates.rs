//! Debate event payloads against their schemas: a sample of every variant,
//! with every value of the enums inside and real results of `decide`.

use std::collections::BTreeMap;

use agon_aggregates::debate::consensus::{Tally, decide};
use agon_aggregates::debate::{Ballot, ConsensusMode, DebateEvent, Protocol, Usage, VoteChoice};

use super::{ORG, Sample, USER, at, check_event_schemas};

#[test]
fn every_debate_event_matches_its_schema() {
    let samples: Vec<Sample> = debate_samples()
        .iter()
        .map(|event| Sample::new("debate", debate_variant(event), event))
        .collect();
    check_event_schemas(&samples, &["debate"]);
}

// The variant names. These matches are exhaustive on purpose: a new variant
// does not compile until it is named here, and then needs a sample below.

fn debate_variant(event: &DebateEvent) -> &'static str {
    use DebateEvent as E;
    match event {
        E::DebateCreated { .. } => "DebateCreated",
        E::DebateStarted { .. } => "DebateStarted",
        E::MessageRecorded { .. } => "MessageRecorded",
        E::AgentFailed { .. } => "AgentFailed",
        E::SynthesisDrafted { .. } => "SynthesisDrafted",
        E::VoteCast { .. } => "VoteCast",
        E::ConsensusComputed { .. } => "ConsensusComputed",
        E::DebateCompleted { .. } => "DebateCompleted",
        E::DebateFailed { .. } => "DebateFailed",
        E::CheckpointCreated { .. } => "CheckpointCreated",
        E::DebatePaused { .. } => "DebatePaused",
        E::DebateResumed { .. } => "DebateResumed",
        E::DebatePublished { .. } => "DebatePublished",
        E::DebateUnpublished { .. } => "DebateUnpublished",
    }
}

// Every value of the enums inside events, so that each value a schema lists
// shows up in a sample. Exhaustive for the same reason as above.

fn every_vote_choice() -> [VoteChoice; 3] {
    use VoteChoice as C;
    let all = [C::Agree, C::AgreeWithModifications, C::Disagree];
    for choice in all {
        match choice {
            C::Agree | C::AgreeWithModifications | C::Disagree => {}
        }
    }
    all
}

fn every_consensus_mode() -> [ConsensusMode; 5] {
    use ConsensusMode as M;
    let all = [
        M::Majority,
        M::Supermajority,
        M::Unanimous,
        M::Judge,
        M::Weighted,
    ];
    for mode in all {
        match mode {
            M::Majority | M::Supermajority | M::Unanimous | M::Judge | M::Weighted => {}
        }
    }
    all
}
const DEBATE: &str = "01947a2b-3c4d-7e5f-8a6b-7c8d9e0f1a2b";
const AGENTS: [&str; 3] = ["claude", "gpt-4o", "gemini"];

fn usage(fallback: bool) -> Usage {
    Usage {
        provider: if fallback { "openrouter" } else { "anthropic" }.to_owned(),
        model: "claude-sonnet-4-5".to_owned(),
        tokens_in: 1_200,
        tokens_out: 350,
        latency_ms: 2_400,
        fallback,
    }
}

fn ballot(agent: &str, choice: VoteChoice, confidence: f64) -> Ballot {
    Ballot {
        agent: agent.to_owned(),
        choice,
        confidence,
        reasons: vec![format!("{agent} weighed the trade-offs")],
        modifications: vec!["Mention compile times".to_owned()],
    }
}

/// Real results of `decide`: every mode over ballots that between them give
/// each status, baseline choice, and a null and a named judge.
fn consensus_samples() -> Vec<DebateEvent> {
    use VoteChoice as C;
    let [claude, gpt, gemini] = AGENTS;
    let ballot_sets = [
        // A three-way tie: the baseline takes disagree, yet agrees by 2 to 1.
        vec![
            ballot(claude, C::Agree, 0.9),
            ballot(gpt, C::AgreeWithModifications, 0.7),
            ballot(gemini, C::Disagree, 0.8),
        ],
        vec![ballot(claude, C::Agree, 0.9), ballot(gpt, C::Agree, 0.6)],
        vec![ballot(gpt, C::AgreeWithModifications, 0.5)],
        vec![
            ballot(claude, C::Disagree, 0.4),
            ballot(gpt, C::Disagree, 0.7),
            ballot(gemini, C::Agree, 1.0),
        ],
    ];
    let ratings: BTreeMap<String, f64> = [(claude, 1650.0), (gpt, 1500.0), (gemini, 1420.0)]
        .map(|(agent, elo)| (agent.to_owned(), elo))
        .into();
    let key_points = vec!["Ownership prevents data races".to_owned()];
    let mut events = Vec::new();
    for mode in every_consensus_mode() {
        for votes in &ballot_sets {
            let failed: Vec<String> = AGENTS
                .iter()
                .filter(|agent| !votes.iter().any(|b| b.agent == **agent))
                .map(|agent| (*agent).to_owned())
                .collect();
            let result = decide(Tally {
                votes,
                mode,
                threshold: 0.6,
                judge: Some(gemini),
                ratings: &ratings,
                summary: "Rust is fun once the borrow checker clicks.",
                key_points: &key_points,
                failed_agents: &failed,
            });
            events.push(DebateEvent::ConsensusComputed { result, at: at(40) });
        }
    }
    events
}

fn debate_samples() -> Vec<DebateEvent> {
    use DebateEvent as E;
    let agents: Vec<String> = AGENTS.iter().map(|a| (*a).to_owned()).collect();
    let mut events = Vec::new();
    for (index, consensus) in every_consensus_mode().into_iter().enumerate() {
        let known = index % 2 == 0;
        events.push(E::DebateCreated {
            debate_id: DEBATE.to_owned(),
            topic: "Is Rust fun?".to_owned(),
            context: known.then(|| "For a team new to systems programming.".to_owned()),
            agents: agents.clone(),
            protocol: Protocol {
                phases: ["opening", "critique", "revision", "vote"]
                    .map(str::to_owned)
                    .to_vec(),
                rounds: 3,
                consensus,
                threshold: 0.6,
                judge: (consensus == ConsensusMode::Judge).then(|| AGENTS[2].to_owned()),
            },
            created_by: known.then(|| USER.to_owned()),
            org_id: known.then(|| ORG.to_owned()),
            at: at(30),
        });
    }
    events.push(E::DebateStarted { at: at(31) });
    for (phase, fallback, targets) in [
        ("opening", false, vec![]),
        ("critique", true, agents[1..].to_vec()),
    ] {
        events.push(E::MessageRecorded {
            round: 1,
            phase: phase.to_owned(),
            agent: AGENTS[0].to_owned(),
            content: "Rust's ownership model makes whole classes of bugs impossible.".to_owned(),
            targets,
            usage: usage(fallback),
            at: at(32),
        });
    }
    events.push(E::AgentFailed {
        round: 1,
        phase: "critique".to_owned(),
        agent: AGENTS[2].to_owned(),
        code: "timeout".to_owned(),
        error: "no answer within 60 s".to_owned(),
        at: at(33),
    });
    events.push(E::SynthesisDrafted {
        agent: AGENTS[0].to_owned(),
        summary: "Rust is fun once the borrow checker clicks.".to_owned(),
        key_points: vec!["Ownership prevents data races".to_owned()],
        usage: usage(false),
        at: at(34),
    });
    for choice in every_vote_choice() {
        let vote = ballot(AGENTS[1], choice, 0.75);
        events.push(E::VoteCast {
            agent: vote.agent,
            choice,
            confidence: vote.confidence,
            reasons: vote.reasons,
            modifications: vote.modifications,
            usage: usage(true),
            at: at(35),
        });
    }
    events.extend(consensus_samples());
    events.push(E::DebateCompleted { at: at(41) });
    events.push(E::DebateFailed {
        reason: "every agent failed: claude (timeout: no answer within 60 s)".to_owned(),
        at: at(41),
    });
    events.push(E::CheckpointCreated {
        checkpoint_id: "c0a80101-0000-7000-8000-000000000001".to_owned(),
        round: 2,
        phase: "critique".to_owned(),
        messages: 7,
        at: at(36),
    });
    events.push(E::DebatePaused {
        checkpoint_id: "c0a80101-0000-7000-8000-000000000001".to_owned(),
        at: at(36),
    });
    events.push(E::DebateResumed { at: at(37) });
    events.push(E::DebatePublished { at: at(42) });
    events.push(E::DebateUnpublished { at: at(43) });
    events
}
