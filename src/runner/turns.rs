//! What each agent is asked in a stage, built from the debate's record, and
//! how its answer becomes an outcome the aggregate records.

use agon_aggregates::debate::{Debate, Outcome, Stage, Step, Usage};

use crate::agents::prompt::{parse_synthesis, parse_vote};
use crate::agents::{AgentError, Position, Reply, Task, Turn};

/// Phases whose messages state an agent's position (critiques do not).
const POSITION_PHASES: [&str; 2] = ["opening", "revision"];
/// How many recent messages a custom phase sees.
const CUSTOM_TRANSCRIPT: usize = 24;

/// The agent's latest stated position (its latest message of any kind when
/// it has stated none, e.g. under a protocol without `opening`).
fn position(debate: &Debate, agent: &str) -> Option<String> {
    debate
        .latest(agent, &POSITION_PHASES)
        .or_else(|| debate.messages.iter().rev().find(|m| m.agent == agent))
        .map(|m| m.content.clone())
}

/// Latest positions of the active agents other than `except`.
fn positions(debate: &Debate, except: Option<&str>) -> Vec<Position> {
    debate
        .active_agents()
        .filter(|agent| Some(agent.as_str()) != except)
        .filter_map(|agent| {
            position(debate, agent).map(|content| Position {
                agent: agent.clone(),
                content,
            })
        })
        .collect()
}

/// The step an agent's turn in `stage` records under.
pub fn step(debate: &Debate, stage: &Stage, agent: &str) -> Step {
    let (round, phase) = match stage {
        Stage::Turns { round, phase } => (*round, phase.clone()),
        Stage::Synthesis => (debate.last_round(), "synthesis".to_owned()),
        Stage::Vote => (debate.last_round(), "vote".to_owned()),
    };
    Step {
        round,
        phase,
        agent: agent.to_owned(),
    }
}

/// What `agent` is asked in `stage`.
pub fn turn(debate: &Debate, stage: &Stage, agent: &str) -> Turn {
    let own = || position(debate, agent).unwrap_or_default();
    let task = match stage {
        Stage::Turns { phase, .. } if phase == "opening" => Task::Opening,
        Stage::Turns { phase, .. } if phase == "critique" => Task::Critique {
            targets: positions(debate, Some(agent)),
        },
        Stage::Turns { round, phase } if phase == "revision" => Task::Revision {
            own: own(),
            critiques: debate
                .messages
                .iter()
                .filter(|m| m.round == *round && m.phase == "critique" && m.agent != agent)
                .map(|m| Position {
                    agent: m.agent.clone(),
                    content: m.content.clone(),
                })
                .collect(),
        },
        Stage::Turns { phase, .. } => Task::Custom {
            phase: phase.clone(),
            transcript: debate
                .messages
                .iter()
                .rev()
                .take(CUSTOM_TRANSCRIPT)
                .rev()
                .map(|m| Position {
                    agent: m.agent.clone(),
                    content: m.content.clone(),
                })
                .collect(),
        },
        Stage::Synthesis => Task::Synthesis {
            positions: positions(debate, None),
        },
        Stage::Vote => {
            let synthesis = debate.synthesis.as_ref();
            Task::Vote {
                summary: synthesis.map(|s| s.summary.clone()).unwrap_or_default(),
                key_points: synthesis.map(|s| s.key_points.clone()).unwrap_or_default(),
                own: own(),
            }
        }
    };
    let step = step(debate, stage, agent);
    Turn {
        topic: debate.topic.clone(),
        context: debate.context.clone(),
        agent: agent.to_owned(),
        round: step.round,
        rounds: debate.last_round(),
        task,
    }
}

/// The outcome to record for an agent's answer (or failure) to `turn`.
pub fn outcome(
    debate: &Debate,
    stage: &Stage,
    turn: &Turn,
    result: Result<Reply, AgentError>,
) -> Outcome {
    let step = step(debate, stage, &turn.agent);
    let failure = |code: &str, error: String| Outcome::Failure {
        step: step.clone(),
        code: code.to_owned(),
        error,
    };
    let reply = match result {
        Ok(reply) => reply,
        Err(e) => return failure(e.code(), e.to_string()),
    };
    let usage = Usage {
        provider: reply.usage.provider,
        model: reply.usage.model,
        tokens_in: reply.usage.tokens_in,
        tokens_out: reply.usage.tokens_out,
        latency_ms: reply.usage.latency_ms,
        fallback: reply.usage.fallback,
    };
    match (stage, &turn.task) {
        (Stage::Synthesis, _) => match parse_synthesis(&reply.content) {
            Ok(synthesis) => Outcome::Synthesis {
                agent: turn.agent.clone(),
                summary: synthesis.summary,
                key_points: synthesis.key_points,
                usage,
            },
            Err(e) => failure("malformed_reply", e.to_string()),
        },
        (Stage::Vote, _) => match parse_vote(&reply.content) {
            Ok(vote) => Outcome::Vote {
                agent: turn.agent.clone(),
                choice: vote.choice,
                confidence: vote.confidence,
                reasons: vote.reasons,
                modifications: vote.modifications,
                usage,
            },
            Err(e) => failure("malformed_reply", e.to_string()),
        },
        (Stage::Turns { .. }, Task::Critique { targets }) => Outcome::Message {
            targets: targets.iter().map(|t| t.agent.clone()).collect(),
            step,
            content: reply.content,
            usage,
        },
        (Stage::Turns { .. }, _) => Outcome::Message {
            step,
            content: reply.content,
            targets: Vec::new(),
            usage,
        },
    }
}

#[cfg(test)]
mod tests {
    use agon_aggregates::debate::{
        ConsensusMode, Debate, DebateEvent, Protocol, Stage, Usage as DebateUsage,
    };
    use chrono::DateTime;

    use super::*;
    use crate::agents::Usage;

    fn usage() -> DebateUsage {
        DebateUsage {
            provider: "demo".to_owned(),
            model: "demo-v1".to_owned(),
            tokens_in: 1,
            tokens_out: 1,
            latency_ms: 0,
            fallback: false,
        }
    }

    fn debate(agents: &[&str]) -> Debate {
        let mut debate = Debate::default();
        debate.apply_event(DebateEvent::DebateCreated {
            debate_id: "d".to_owned(),
            topic: "Tea or coffee?".to_owned(),
            context: None,
            agents: agents.iter().map(|a| (*a).to_owned()).collect(),
            protocol: Protocol {
                phases: vec!["opening".into(), "critique".into(), "revision".into()],
                rounds: 2,
                consensus: ConsensusMode::Majority,
                threshold: 0.6,
                judge: None,
            },
            created_by: None,
            org_id: None,
            at: DateTime::UNIX_EPOCH,
        });
        debate.apply_event(DebateEvent::DebateStarted {
            at: DateTime::UNIX_EPOCH,
        });
        debate
    }

    fn say(debate: &mut Debate, round: u32, phase: &str, agent: &str, content: &str) {
        debate.apply_event(DebateEvent::MessageRecorded {
            round,
            phase: phase.to_owned(),
            agent: agent.to_owned(),
            content: content.to_owned(),
            targets: Vec::new(),
            usage: usage(),
            at: DateTime::UNIX_EPOCH,
        });
    }

    fn reply(content: &str) -> Reply {
        Reply {
            content: content.to_owned(),
            usage: Usage {
                provider: "demo".to_owned(),
                model: "demo-v1".to_owned(),
                tokens_in: 3,
                tokens_out: 4,
                latency_ms: 5,
                fallback: false,
            },
        }
    }

    #[test]
    fn critiques_target_every_other_active_agent_and_revisions_see_that_rounds_critiques() {
        let mut d = debate(&["a", "b", "c"]);
        for agent in ["a", "b", "c"] {
            say(&mut d, 1, "opening", agent, &format!("{agent} says tea"));
        }
        d.apply_event(DebateEvent::AgentFailed {
            round: 1,
            phase: "critique".to_owned(),
            agent: "c".to_owned(),
            code: "timeout".to_owned(),
            error: "slow".to_owned(),
            at: DateTime::UNIX_EPOCH,
        });
        let stage = Stage::Turns {
            round: 1,
            phase: "critique".to_owned(),
        };
        let Task::Critique { targets } = turn(&d, &stage, "a").task else {
            panic!("a critique task");
        };
        assert_eq!(
            targets,
            vec![Position {
                agent: "b".into(),
                content: "b says tea".into()
            }]
        );
        say(&mut d, 1, "critique", "b", "a is wrong");
        say(&mut d, 1, "critique", "a", "b is wrong");
        let revision = Stage::Turns {
            round: 1,
            phase: "revision".to_owned(),
        };
        let turn = turn(&d, &revision, "a");
        assert_eq!(turn.round, 1);
        assert_eq!(turn.rounds, 2);
        let Task::Revision { own, critiques } = turn.task else {
            panic!("a revision task");
        };
        assert_eq!(own, "a says tea");
        assert_eq!(
            critiques,
            vec![Position {
                agent: "b".into(),
                content: "a is wrong".into()
            }]
        );
    }

    #[test]
    fn answers_become_outcomes_and_unreadable_votes_become_failures() {
        let d = debate(&["a", "b"]);
        let critique = Stage::Turns {
            round: 1,
            phase: "critique".to_owned(),
        };
        let asked = turn(&d, &critique, "a");
        match outcome(&d, &critique, &asked, Ok(reply("fine"))) {
            Outcome::Message { step, usage, .. } => {
                assert_eq!((step.round, step.phase.as_str()), (1, "critique"));
                assert_eq!(
                    (usage.tokens_in, usage.tokens_out, usage.latency_ms),
                    (3, 4, 5)
                );
            }
            other => panic!("a message, not {other:?}"),
        }
        let vote = turn(&d, &Stage::Vote, "b");
        match outcome(&d, &Stage::Vote, &vote, Ok(reply("I like it"))) {
            Outcome::Failure { step, code, .. } => {
                assert_eq!(code, "malformed_reply");
                assert_eq!((step.round, step.phase.as_str()), (2, "vote"));
            }
            other => panic!("a failure, not {other:?}"),
        }
        let good = "VOTE: agree\nCONFIDENCE: 0.9\nREASONS:\n- good";
        assert!(matches!(
            outcome(&d, &Stage::Vote, &vote, Ok(reply(good))),
            Outcome::Vote { confidence, .. } if (confidence - 0.9).abs() < 1e-9
        ));
        let timeout = AgentError::Timeout { seconds: 90 };
        assert!(matches!(
            outcome(&d, &Stage::Vote, &vote, Err(timeout)),
            Outcome::Failure { code, .. } if code == "timeout"
        ));
    }
}
