//! Creation and its validation, and the status changes: start, fail,
//! checkpoint, pause, resume, and what a finished debate refuses.

use std::collections::BTreeMap;

use super::*;

/// The refusal's text: each rule is its own variant now, named in the
/// message as before.
fn invalid(message: &str) -> String {
    format!("invalid debate: {message}")
}

/// Every command but `Create`, with the action name its status check reports.
fn every_other_command() -> Vec<(DebateCommand, &'static str)> {
    vec![
        (DebateCommand::Start { at: at() }, "start"),
        (record(vec![says(1, "opening", "a")]), "record"),
        (
            DebateCommand::Conclude {
                weights: BTreeMap::new(),
                at: at(),
            },
            "conclude",
        ),
        (
            DebateCommand::Fail {
                reason: "stop".to_owned(),
                at: at(),
            },
            "fail",
        ),
        (
            DebateCommand::Checkpoint {
                checkpoint_id: "k".to_owned(),
                at: at(),
            },
            "checkpoint",
        ),
        (
            DebateCommand::Pause {
                checkpoint_id: "k".to_owned(),
                at: at(),
            },
            "pause",
        ),
        (DebateCommand::Resume { at: at() }, "resume"),
    ]
}

fn checkpoint(id: &str) -> DebateCommand {
    DebateCommand::Checkpoint {
        checkpoint_id: id.to_owned(),
        at: at(),
    }
}

#[tokio::test]
async fn a_valid_debate_is_created_once() {
    Given::with(())
        .given_no_previous_events()
        .when_async(create(&["a", "b", "c"], protocol(2)))
        .await
        .then_expect_events(vec![created(&["a", "b", "c"], 2)]);
    Given::with(())
        .given(vec![created(&["a"], 1)])
        .when_async(create(&["a", "b", "c"], protocol(2)))
        .await
        .then_expect_error(DebateError::AlreadyExists);
    let debate = replay(vec![created(&["a", "b"], 2)]);
    assert!(debate.exists());
    assert_eq!(debate.status, DebateStatus::Pending);
    assert_eq!(debate.next(), Next::Start);
}

#[tokio::test]
async fn each_rule_of_a_new_debate_is_enforced() {
    let many: Vec<String> = (0..=Limits::DEFAULT.agents)
        .map(|i| format!("agent{i}"))
        .collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let with = |change: fn(&mut Protocol)| {
        let mut p = protocol(2);
        change(&mut p);
        p
    };
    let blank_topic = DebateCommand::Create {
        debate_id: "d1".to_owned(),
        topic: " \t".to_owned(),
        context: None,
        agents: names(&["a"]),
        protocol: protocol(1),
        limits: Limits::DEFAULT,
        created_by: None,
        org_id: None,
        at: at(),
    };
    let cases = [
        (blank_topic, "topic is empty"),
        (
            create(&[], protocol(2)),
            "a debate needs between 2 and 12 agents, and its judge",
        ),
        (
            create(&["a"], protocol(2)),
            "a debate needs between 2 and 12 agents, and its judge",
        ),
        (
            create(&many, protocol(2)),
            "a debate needs between 2 and 12 agents, and its judge",
        ),
        (
            create(&["a", " "], protocol(2)),
            "agent names must not be empty",
        ),
        (
            create(&["a", "b", "a"], protocol(2)),
            "agent a is listed twice",
        ),
        (
            create(&["claude", "b", "Claude"], protocol(2)),
            "agent Claude is listed twice",
        ),
        (
            create(&["a", "b"], protocol(0)),
            "rounds must be between 1 and 12",
        ),
        (
            create(&["a", "b"], protocol(Limits::DEFAULT.rounds + 1)),
            "rounds must be between 1 and 12",
        ),
        (
            create(&["a", "b"], with(|p| p.threshold = -0.01)),
            "consensus_threshold must be between 0 and 1",
        ),
        (
            create(&["a", "b"], with(|p| p.threshold = 1.01)),
            "consensus_threshold must be between 0 and 1",
        ),
        (
            create(&["a", "b"], with(|p| p.threshold = f64::NAN)),
            "consensus_threshold must be between 0 and 1",
        ),
        (
            create(&["a", "b"], with(|p| p.phases.push(String::new()))),
            "phase names must not be empty",
        ),
    ];
    for (command, message) in cases {
        Given::with(())
            .given_no_previous_events()
            .when_async(command)
            .await
            .then_expect_error_message(&invalid(message));
    }
}

#[tokio::test]
async fn the_limits_themselves_are_accepted() {
    let twelve: Vec<String> = (0..Limits::DEFAULT.agents)
        .map(|i| format!("agent{i}"))
        .collect();
    let twelve: Vec<&str> = twelve.iter().map(String::as_str).collect();
    let mut edges = vec![protocol(Limits::DEFAULT.rounds), protocol(1)];
    for threshold in [0.0, 1.0] {
        edges.push(Protocol {
            threshold,
            ..protocol(1)
        });
    }
    for protocol in edges {
        Given::with(())
            .given_no_previous_events()
            .when_async(create(&twelve, protocol.clone()))
            .await
            .then_expect_events(vec![created_with(&twelve, protocol)]);
    }
    // A judge from outside the twelve sits last, as a thirteenth.
    let mut thirteen = twelve.clone();
    thirteen.push("judge");
    let judged = Protocol {
        judge: Some("judge".to_owned()),
        ..protocol(1)
    };
    Given::with(())
        .given_no_previous_events()
        .when_async(create(&thirteen, judged.clone()))
        .await
        .then_expect_events(vec![created_with(&thirteen, judged)]);
}

#[tokio::test]
async fn nothing_but_create_works_on_a_debate_that_does_not_exist() {
    for (command, _) in every_other_command() {
        Given::with(())
            .given_no_previous_events()
            .when_async(command)
            .await
            .then_expect_error(DebateError::NotFound);
    }
}

#[tokio::test]
async fn a_pending_debate_starts_once() {
    Given::with(())
        .given(vec![created(&["a", "b"], 1)])
        .when_async(DebateCommand::Start { at: at() })
        .await
        .then_expect_events(vec![started()]);
    Given::with(())
        .given(running(&["a", "b"], 1))
        .when_async(DebateCommand::Start { at: at() })
        .await
        .then_expect_error(wrong_status("running", "start"));
    let debate = replay(running(&["a", "b"], 1));
    assert_eq!(debate.status, DebateStatus::Running);
    assert_eq!(debate.started_at, Some(at()));
}

#[tokio::test]
async fn a_pending_running_or_paused_debate_can_be_failed() {
    let mut paused_debate = running(&["a", "b"], 1);
    paused_debate.extend(paused("k1", 0));
    for given in [vec![created(&["a"], 1)], running(&["a"], 1), paused_debate] {
        let events = Given::with(())
            .given(given.clone())
            .when_async(DebateCommand::Fail {
                reason: "cancelled by u1".to_owned(),
                at: at(),
            })
            .await
            .inspect_result()
            .unwrap();
        assert_eq!(
            events,
            vec![DebateEvent::DebateFailed {
                reason: "cancelled by u1".to_owned(),
                at: at(),
            }]
        );
        let mut all = given;
        all.extend(events);
        let debate = replay(all);
        assert_eq!(debate.status, DebateStatus::Failed);
        assert_eq!(debate.failure_reason.as_deref(), Some("cancelled by u1"));
        assert_eq!(debate.finished_at, Some(at()));
        assert_eq!(debate.next(), Next::Finished);
    }
}

#[tokio::test]
async fn a_finished_debate_refuses_every_command() {
    let failed = DebateEvent::DebateFailed {
        reason: "x".to_owned(),
        at: at(),
    };
    let completed = DebateEvent::DebateCompleted { at: at() };
    for (end, status) in [(failed, "failed"), (completed, "completed")] {
        let mut given = running(&["a", "b"], 1);
        given.push(end);
        assert_eq!(next_after(given.clone()), Next::Finished);
        for (command, action) in every_other_command() {
            Given::with(())
                .given(given.clone())
                .when_async(command)
                .await
                .then_expect_error(wrong_status(status, action));
        }
        Given::with(())
            .given(given)
            .when_async(create(&["a"], protocol(1)))
            .await
            .then_expect_error(DebateError::AlreadyExists);
    }
}

#[tokio::test]
async fn a_checkpoint_records_where_the_debate_is() {
    Given::with(())
        .given(vec![created(&["a", "b"], 2)])
        .when_async(checkpoint("k0"))
        .await
        .then_expect_error(wrong_status("pending", "checkpoint"));
    let mut given = running(&["a", "b"], 2);
    given.extend([said(1, "opening", "a"), said(1, "opening", "b")]);
    given.push(said(1, "critique", "b"));
    let synthesis_due = debated(&["a", "b"], 2);
    let mut vote_due = debated(&["a", "b"], 2);
    vote_due.push(drafted("a"));
    let cases = [
        (running(&["a", "b"], 2), 1, "opening", 0),
        (given, 1, "critique", 3),
        (synthesis_due, 2, "synthesis", 10),
        (vote_due, 2, "vote", 10),
    ];
    for (given, round, phase, messages) in cases {
        Given::with(())
            .given(given)
            .when_async(checkpoint("k1"))
            .await
            .then_expect_events(vec![checkpointed("k1", round, phase, messages)]);
    }
    let mut kept = running(&["a"], 1);
    kept.push(checkpointed("k1", 1, "opening", 0));
    kept.push(checkpointed("k2", 1, "opening", 0));
    assert_eq!(replay(kept).checkpoints, names(&["k1", "k2"]));
}

#[tokio::test]

async fn a_checkpoint_of_a_paused_debate_records_where_it_paused() {
    let mut given = running(&["a", "b"], 2);
    given.extend(paused("k1", 0));
    Given::with(())
        .given(given)
        .when_async(checkpoint("k2"))
        .await
        .then_expect_events(vec![checkpointed("k2", 1, "opening", 0)]);
}

#[tokio::test]
async fn pausing_checkpoints_first_and_only_a_running_debate_pauses() {
    let pause = || DebateCommand::Pause {
        checkpoint_id: "k1".to_owned(),
        at: at(),
    };
    Given::with(())
        .given(running(&["a", "b"], 2))
        .when_async(pause())
        .await
        .then_expect_events(paused("k1", 0));
    let mut given = running(&["a", "b"], 2);
    given.extend(paused("k1", 0));
    let debate = replay(given.clone());
    assert_eq!(debate.status, DebateStatus::Paused);
    assert_eq!(debate.checkpoints, names(&["k1"]));
    assert_eq!(debate.next(), Next::Paused);
    assert_eq!(debate.current_stage(), Some(turns(1, "opening")));
    Given::with(())
        .given(given)
        .when_async(pause())
        .await
        .then_expect_error(wrong_status("paused", "pause"));
    Given::with(())
        .given(vec![created(&["a"], 1)])
        .when_async(pause())
        .await
        .then_expect_error(wrong_status("pending", "pause"));
}

#[tokio::test]
async fn only_a_paused_debate_resumes_and_then_continues_where_it_was() {
    let resume = || DebateCommand::Resume { at: at() };
    let mut given = running(&["a", "b"], 2);
    given.push(said(1, "opening", "b"));
    given.extend(paused("k1", 1));
    Given::with(())
        .given(given.clone())
        .when_async(resume())
        .await
        .then_expect_events(vec![DebateEvent::DebateResumed { at: at() }]);
    given.push(DebateEvent::DebateResumed { at: at() });
    assert_eq!(next_after(given), work(turns(1, "opening"), &["a"]));
    Given::with(())
        .given(running(&["a"], 1))
        .when_async(resume())
        .await
        .then_expect_error(wrong_status("running", "resume"));
}
