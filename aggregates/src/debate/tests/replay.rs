//! A whole 3-agent, 2-round debate run the way the runner runs it (ask
//! `next`, do that), then replayed from its events and through JSON.

use std::collections::BTreeMap;

use super::*;

/// The outcome `agent` reports for its turn in `stage`.
fn turn(stage: &Stage, agent: &str) -> Outcome {
    match stage {
        Stage::Turns { round, phase } => says(*round, phase, agent),
        Stage::Synthesis => drafts(agent),
        Stage::Vote => {
            let choice = match agent {
                "a" => VoteChoice::Agree,
                "b" => VoteChoice::AgreeWithModifications,
                _ => VoteChoice::Disagree,
            };
            votes(agent, choice, 0.8)
        }
    }
}

async fn decide(events: &[DebateEvent], command: DebateCommand) -> Vec<DebateEvent> {
    Given::with(())
        .given(events.to_vec())
        .when_async(command)
        .await
        .inspect_result()
        .unwrap()
}

/// Runs the debate to its end; returns every event and the stages worked, in order.
async fn run(agents: &[&str], rounds: u32) -> (Vec<DebateEvent>, Vec<Stage>) {
    let mut events = decide(&[], create(agents, protocol(rounds))).await;
    let mut worked = Vec::new();
    loop {
        let command = match replay(events.clone()).next() {
            Next::Start => DebateCommand::Start { at: at() },
            Next::Work { stage, agents } => {
                let outcomes = agents.iter().map(|agent| turn(&stage, agent)).collect();
                worked.push(stage);
                record(outcomes)
            }
            Next::Conclude => DebateCommand::Conclude {
                weights: BTreeMap::new(),
                at: at(),
            },
            Next::Finished => return (events, worked),
            Next::Paused => panic!("nobody paused this debate"),
        };
        let new = decide(&events, command).await;
        assert!(!new.is_empty(), "no progress after {} events", events.len());
        events.extend(new);
    }
}

#[tokio::test]
async fn a_full_debate_runs_stage_by_stage_and_replays_through_json() {
    let agents = ["a", "b", "c"];
    let (events, worked) = run(&agents, 2).await;
    let debate = replay(events.clone());
    assert_eq!(worked, debate.stages());
    // Created, started, 15 messages, a synthesis, 3 votes, consensus, completed.
    assert_eq!(events.len(), 2 + 15 + 1 + 3 + 2);
    assert_eq!(debate.status, DebateStatus::Completed);
    assert_eq!(debate.messages.len(), 15);
    assert_eq!(debate.votes.len(), 3);
    let consensus = debate.consensus.clone().unwrap();
    assert_eq!(
        consensus.voting_summary,
        VotingSummary {
            agree: 1,
            agree_with_modifications: 1,
            disagree: 1,
        }
    );
    assert_eq!(consensus.status, ConsensusStatus::ConsensusReached);
    assert_eq!(
        consensus.disagreements,
        names(&["b: b's change", "c: c's reason"])
    );

    let json = serde_json::to_string(&debate).unwrap();
    let back: Debate = serde_json::from_str(&json).unwrap();
    assert_eq!(back, debate);
    for event in &events {
        let json = serde_json::to_value(event).unwrap();
        let back: DebateEvent = serde_json::from_value(json).unwrap();
        assert_eq!(&back, event);
    }
}

#[test]
fn status_names_round_trip() {
    use DebateStatus as S;
    for status in [S::Pending, S::Running, S::Paused, S::Completed, S::Failed] {
        assert_eq!(DebateStatus::parse(status.as_str()), Some(status));
        assert_eq!(
            serde_json::to_value(status).unwrap(),
            serde_json::json!(status.as_str())
        );
        assert_eq!(
            status.is_finished(),
            matches!(status, S::Completed | S::Failed)
        );
    }
    assert_eq!(DebateStatus::parse("done"), None);
}
