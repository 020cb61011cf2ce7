//! The stages of a debate, round turns recorded in stage order, and agents
//! that fail and drop out (down to the last one).

use super::*;

#[test]
fn the_default_phases_give_opening_once_then_critique_and_revision_each_round() {
    let debate = replay(vec![created(&["a", "b", "c"], 2)]);
    assert_eq!(
        debate.stages(),
        vec![
            turns(1, "opening"),
            turns(1, "critique"),
            turns(1, "revision"),
            turns(2, "critique"),
            turns(2, "revision"),
            Stage::Synthesis,
            Stage::Vote,
        ]
    );
    assert_eq!(debate.last_round(), 2);
    assert_eq!(Debate::default().stages(), Vec::new());
}

#[test]
fn custom_phases_run_each_round_and_synthesis_and_vote_are_not_round_phases() {
    let custom = |phases: &[&str]| Protocol {
        phases: names(phases),
        ..protocol(2)
    };
    let debate = replay(vec![created_with(
        &["a"],
        custom(&["opening", "steelman", "synthesis", "vote"]),
    )]);
    assert_eq!(
        debate.stages(),
        vec![
            turns(1, "opening"),
            turns(1, "steelman"),
            turns(2, "steelman"),
            Stage::Synthesis,
            Stage::Vote,
        ]
    );
    let bare = replay(vec![created_with(&["a"], custom(&[]))]);
    assert_eq!(bare.stages(), vec![Stage::Synthesis, Stage::Vote]);
}

#[test]
fn next_walks_every_stage_and_names_the_agents_still_owing() {
    let agents = ["a", "b", "c"];
    let mut events = vec![created(&agents, 2)];
    assert_eq!(next_after(events.clone()), Next::Start);
    events.push(started());
    for (round, phase) in default_turns(2) {
        assert_eq!(
            next_after(events.clone()),
            work(turns(round, phase), &agents)
        );
        events.push(said(round, phase, "b"));
        assert_eq!(
            next_after(events.clone()),
            work(turns(round, phase), &["a", "c"])
        );
        events.push(said(round, phase, "c"));
        events.push(said(round, phase, "a"));
    }
    assert_eq!(next_after(events.clone()), work(Stage::Synthesis, &["a"]));
    events.push(drafted("a"));
    assert_eq!(next_after(events.clone()), work(Stage::Vote, &agents));
    events.push(voted("c", VoteChoice::Agree, 0.5));
    assert_eq!(next_after(events.clone()), work(Stage::Vote, &["a", "b"]));
    events.push(voted("a", VoteChoice::Agree, 0.5));
    events.push(voted("b", VoteChoice::Disagree, 0.5));
    assert_eq!(next_after(events), Next::Conclude);
}

#[tokio::test]
async fn each_stage_records_its_turns_in_any_agent_order() {
    let agents = ["a", "b", "c"];
    let mut given = running(&agents, 2);
    for (round, phase) in default_turns(2) {
        for agent in ["c", "a", "b"] {
            Given::with(())
                .given(given.clone())
                .when_async(record(vec![says(round, phase, agent)]))
                .await
                .then_expect_events(vec![said(round, phase, agent)]);
            given.push(said(round, phase, agent));
        }
    }
    let debate = replay(given);
    assert_eq!(debate.messages.len(), 15);
    assert_eq!(debate.latest("a", &["critique"]).map(|m| m.round), Some(2));
    assert_eq!(debate.current_stage(), Some(Stage::Synthesis));
}

#[tokio::test]
async fn a_custom_phase_takes_turns_every_round() {
    let protocol = Protocol {
        phases: names(&["opening", "steelman"]),
        ..protocol(2)
    };
    let mut given = vec![created_with(&["a"], protocol), started()];
    for (round, phase) in [(1, "opening"), (1, "steelman"), (2, "steelman")] {
        Given::with(())
            .given(given.clone())
            .when_async(record(vec![says(round, phase, "a")]))
            .await
            .then_expect_events(vec![said(round, phase, "a")]);
        given.push(said(round, phase, "a"));
    }
    assert_eq!(next_after(given), work(Stage::Synthesis, &["a"]));
}

#[tokio::test]
async fn one_batch_may_finish_a_stage_and_go_on_to_the_next() {
    let outcomes = vec![
        says(1, "opening", "a"),
        says(1, "opening", "b"),
        says(1, "critique", "b"),
    ];
    Given::with(())
        .given(running(&["a", "b"], 1))
        .when_async(record(outcomes))
        .await
        .then_expect_events(vec![
            said(1, "opening", "a"),
            said(1, "opening", "b"),
            said(1, "critique", "b"),
        ]);
}

#[tokio::test]
async fn turns_out_of_order_twice_or_by_strangers_are_unexpected() {
    let mut opened = running(&["a", "b"], 2);
    opened.push(said(1, "opening", "a"));
    let mut in_round_two = running(&["a", "b"], 2);
    for (round, phase) in default_turns(1) {
        in_round_two.extend([said(round, phase, "a"), said(round, phase, "b")]);
    }
    let cases = vec![
        // Critique before every opening is in.
        (
            opened.clone(),
            vec![says(1, "critique", "a")],
            "a in critique round 1",
        ),
        // The same turn twice, across batches and within one.
        (
            opened.clone(),
            vec![says(1, "opening", "a")],
            "a in opening round 1",
        ),
        (
            running(&["a", "b"], 2),
            vec![says(1, "opening", "b"), says(1, "opening", "b")],
            "b in opening round 1",
        ),
        // A round that has not come, and an opening after round 1.
        (
            opened.clone(),
            vec![says(2, "opening", "b")],
            "b in opening round 2",
        ),
        (
            in_round_two.clone(),
            vec![says(2, "opening", "a")],
            "a in opening round 2",
        ),
        (
            in_round_two,
            vec![says(1, "critique", "a")],
            "a in critique round 1",
        ),
        // Not a phase of this protocol, and not a round phase.
        (
            opened.clone(),
            vec![says(1, "rebuttal", "b")],
            "b in rebuttal round 1",
        ),
        (
            opened.clone(),
            vec![says(1, "vote", "b")],
            "b in vote round 1",
        ),
        // Not an agent of this debate.
        (
            opened.clone(),
            vec![says(1, "opening", "zed")],
            "zed in opening round 1",
        ),
        (
            opened,
            vec![fails(1, "opening", "zed", "timeout")],
            "zed in opening round 1",
        ),
    ];
    for (given, outcomes, what) in cases {
        Given::with(())
            .given(given)
            .when_async(record(outcomes))
            .await
            .then_expect_error(unexpected(what));
    }
}

#[tokio::test]
async fn a_batch_with_one_bad_outcome_records_nothing() {
    Given::with(())
        .given(running(&["a", "b"], 1))
        .when_async(record(vec![
            says(1, "opening", "a"),
            says(1, "opening", "zed"),
        ]))
        .await
        .then_expect_error(unexpected("zed in opening round 1"));
}

#[tokio::test]
async fn a_failed_agent_takes_no_further_turns() {
    let agents = ["a", "b", "c"];
    let mut given = running(&agents, 2);
    given.extend(agents.iter().map(|agent| said(1, "opening", agent)));
    given.push(said(1, "critique", "a"));
    Given::with(())
        .given(given.clone())
        .when_async(record(vec![fails(1, "critique", "b", "timeout")]))
        .await
        .then_expect_events(vec![failed(1, "critique", "b", "timeout")]);
    given.push(failed(1, "critique", "b", "timeout"));
    let debate = replay(given.clone());
    assert_eq!(debate.active_agents().collect::<Vec<_>>(), ["a", "c"]);
    assert_eq!(debate.failed_agents(), names(&["b"]));
    assert_eq!(debate.next(), work(turns(1, "critique"), &["c"]));
    given.push(said(1, "critique", "c"));
    assert_eq!(
        next_after(given.clone()),
        work(turns(1, "revision"), &["a", "c"])
    );
    for phase in ["critique", "revision"] {
        Given::with(())
            .given(given.clone())
            .when_async(record(vec![says(1, phase, "b")]))
            .await
            .then_expect_error(unexpected(&format!("b in {phase} round 1")));
    }
}

#[tokio::test]
async fn when_the_last_agent_fails_the_debate_fails_naming_every_failure() {
    let mut given = running(&["a", "b"], 1);
    given.push(said(1, "opening", "b"));
    given.push(failed(1, "opening", "a", "timeout"));
    Given::with(())
        .given(given)
        .when_async(record(vec![fails(1, "critique", "b", "http_status")]))
        .await
        .then_expect_events(vec![
            failed(1, "critique", "b", "http_status"),
            DebateEvent::DebateFailed {
                reason: "every agent failed: a (timeout: timeout error); \
                         b (http_status: http_status error)"
                    .to_owned(),
                at: at(),
            },
        ]);
    // All at once, in one batch.
    Given::with(())
        .given(running(&["a", "b"], 1))
        .when_async(record(vec![
            fails(1, "opening", "b", "rate_limited"),
            fails(1, "opening", "a", "timeout"),
        ]))
        .await
        .then_expect_events(vec![
            failed(1, "opening", "b", "rate_limited"),
            failed(1, "opening", "a", "timeout"),
            DebateEvent::DebateFailed {
                reason: "every agent failed: b (rate_limited: rate_limited error); \
                         a (timeout: timeout error)"
                    .to_owned(),
                at: at(),
            },
        ]);
}

#[tokio::test]

async fn turns_in_flight_when_the_debate_paused_still_land() {
    let mut given = running(&["a", "b"], 1);
    given.extend(paused("k1", 0));
    Given::with(())
        .given(given.clone())
        .when_async(record(vec![says(1, "opening", "a")]))
        .await
        .then_expect_events(vec![said(1, "opening", "a")]);
    Given::with(())
        .given(given)
        .when_async(record(vec![fails(1, "opening", "b", "timeout")]))
        .await
        .then_expect_events(vec![failed(1, "opening", "b", "timeout")]);
}
