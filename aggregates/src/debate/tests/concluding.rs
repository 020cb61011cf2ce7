//! After the rounds: who drafts the synthesis (also in judge mode and when
//! the synthesizer fails), the votes, and concluding into a consensus.

use std::collections::BTreeMap;

use super::*;

use VoteChoice::{Agree, AgreeWithModifications, Disagree};

fn conclude(weights: &[(&str, f64)]) -> DebateCommand {
    DebateCommand::Conclude {
        weights: weights
            .iter()
            .map(|(agent, elo)| ((*agent).to_owned(), *elo))
            .collect(),
        at: at(),
    }
}

/// Debated with `protocol`, every round turn recorded by `agents`.
fn debated_with(agents: &[&str], protocol: Protocol) -> Vec<DebateEvent> {
    let mut events = debated(agents, protocol.rounds);
    events[0] = created_with(agents, protocol);
    events
}

fn judged_by(judge: Option<&str>) -> Protocol {
    Protocol {
        consensus: ConsensusMode::Judge,
        judge: judge.map(str::to_owned),
        ..protocol(1)
    }
}

/// Debated, drafted by `a`, and voted on by `ballots`.
fn voted_on(agents: &[&str], ballots: &[(&str, VoteChoice, f64)]) -> Vec<DebateEvent> {
    let mut events = debated(agents, 1);
    events.push(drafted("a"));
    events.extend(ballots.iter().map(|(a, c, q)| voted(a, *c, *q)));
    events
}

#[tokio::test]
async fn the_first_agent_drafts_the_synthesis_once() {
    let given = debated(&["a", "b", "c"], 2);
    assert_eq!(replay(given.clone()).synthesizer(), Some("a".to_owned()));
    Given::with(())
        .given(given.clone())
        .when_async(record(vec![drafts("a")]))
        .await
        .then_expect_events(vec![drafted("a")]);
    Given::with(())
        .given(given.clone())
        .when_async(record(vec![drafts("b")]))
        .await
        .then_expect_error(unexpected("synthesis by b"));
    Given::with(())
        .given(given.clone())
        .when_async(record(vec![fails(1, "synthesis", "b", "timeout")]))
        .await
        .then_expect_error(unexpected("b in synthesis round 1"));
    let mut drafted_once = given;
    drafted_once.push(drafted("a"));
    let debate = replay(drafted_once.clone());
    assert_eq!(
        debate.synthesis.map(|s| s.summary),
        Some("Rust is fun".to_owned())
    );
    Given::with(())
        .given(drafted_once)
        .when_async(record(vec![drafts("a")]))
        .await
        .then_expect_error(unexpected("synthesis by a"));
}

#[tokio::test]

async fn no_synthesis_before_the_rounds_are_done() {
    let mut given = running(&["a", "b"], 1);
    given.push(said(1, "opening", "a"));
    Given::with(())
        .given(given.clone())
        .when_async(record(vec![drafts("a")]))
        .await
        .then_expect_error(unexpected("synthesis by a"));
    given.push(drafted("a"));
    Given::with(())
        .given(given)
        .when_async(record(vec![votes("a", Agree, 0.9)]))
        .await
        .then_expect_error(unexpected("vote by a"));
}

#[tokio::test]
async fn a_failed_synthesizer_hands_the_synthesis_to_the_next_active_agent() {
    let mut given = debated(&["a", "b", "c"], 1);
    Given::with(())
        .given(given.clone())
        .when_async(record(vec![fails(1, "synthesis", "a", "timeout")]))
        .await
        .then_expect_events(vec![failed(1, "synthesis", "a", "timeout")]);
    given.push(failed(1, "synthesis", "a", "timeout"));
    assert_eq!(next_after(given.clone()), work(Stage::Synthesis, &["b"]));
    Given::with(())
        .given(given.clone())
        .when_async(record(vec![drafts("b")]))
        .await
        .then_expect_events(vec![drafted("b")]);
    given.push(drafted("b"));
    assert_eq!(next_after(given.clone()), work(Stage::Vote, &["b", "c"]));
    Given::with(())
        .given(given)
        .when_async(record(vec![votes("a", Agree, 1.0)]))
        .await
        .then_expect_error(unexpected("vote by a"));
}

#[test]
fn in_judge_mode_the_judge_drafts_while_active() {
    let agents = ["a", "b", "c"];
    let synthesizer = |events: Vec<DebateEvent>| replay(events).synthesizer();
    let b_judges = debated_with(&agents, judged_by(Some("b")));
    assert_eq!(synthesizer(b_judges.clone()), Some("b".to_owned()));
    assert_eq!(
        replay(b_judges.clone()).next(),
        work(Stage::Synthesis, &["b"])
    );
    let mut b_failed = b_judges;
    b_failed.push(failed(1, "synthesis", "b", "timeout"));
    assert_eq!(synthesizer(b_failed), Some("a".to_owned()));
    // Without a named judge the first agent judges, and drafts.
    let mut first = debated_with(&agents, judged_by(None));
    assert_eq!(synthesizer(first.clone()), Some("a".to_owned()));
    first.push(failed(1, "synthesis", "a", "timeout"));
    assert_eq!(synthesizer(first), Some("b".to_owned()));
    // A judge outside judge mode drafts nothing.
    let not_judging = Protocol {
        judge: Some("c".to_owned()),
        ..protocol(1)
    };
    assert_eq!(
        synthesizer(debated_with(&agents, not_judging)),
        Some("a".to_owned())
    );
}

#[tokio::test]
async fn each_active_agent_votes_once_after_the_synthesis() {
    let agents = ["a", "b"];
    Given::with(())
        .given(debated(&agents, 1))
        .when_async(record(vec![votes("b", Agree, 0.9)]))
        .await
        .then_expect_error(unexpected("vote by b"));
    let given = voted_on(&agents, &[]);
    Given::with(())
        .given(given.clone())
        .when_async(record(vec![
            votes("b", Agree, 0.9),
            votes("a", Disagree, 0.4),
        ]))
        .await
        .then_expect_events(vec![voted("b", Agree, 0.9), voted("a", Disagree, 0.4)]);
    for (ballot, what) in [
        (votes("zed", Agree, 0.5), "vote by zed"),
        (votes("b", Agree, 0.5), "vote by b"),
    ] {
        Given::with(())
            .given(voted_on(&agents, &[("b", Agree, 0.9)]))
            .when_async(record(vec![ballot]))
            .await
            .then_expect_error(unexpected(what));
    }
    // A vote failure drops the agent from the vote.
    Given::with(())
        .given(given.clone())
        .when_async(record(vec![fails(1, "vote", "a", "timeout")]))
        .await
        .then_expect_events(vec![failed(1, "vote", "a", "timeout")]);
    let mut a_failed = given;
    a_failed.push(failed(1, "vote", "a", "timeout"));
    assert_eq!(next_after(a_failed), work(Stage::Vote, &["b"]));
}

#[tokio::test]
async fn a_vote_confidence_is_clamped_into_zero_to_one() {
    for (given_confidence, kept) in [
        (1.7, 1.0),
        (-0.2, 0.0),
        (f64::NAN, 0.0),
        (f64::INFINITY, 1.0),
    ] {
        Given::with(())
            .given(voted_on(&["a"], &[]))
            .when_async(record(vec![votes("a", Agree, given_confidence)]))
            .await
            .then_expect_events(vec![voted("a", Agree, kept)]);
    }
}

#[tokio::test]
async fn a_vote_still_lands_while_the_debate_is_paused() {
    let mut given = voted_on(&["a", "b"], &[]);
    given.extend(paused("k1", 0));
    Given::with(())
        .given(given)
        .when_async(record(vec![votes("a", Agree, 0.7)]))
        .await
        .then_expect_events(vec![voted("a", Agree, 0.7)]);
}

#[tokio::test]
async fn concluding_before_every_vote_is_in_is_refused() {
    for given in [
        running(&["a", "b"], 1),
        debated(&["a", "b"], 1),
        voted_on(&["a", "b"], &[("a", Agree, 0.9)]),
    ] {
        Given::with(())
            .given(given)
            .when_async(conclude(&[]))
            .await
            .then_expect_error(DebateError::VotesMissing);
    }
    let mut paused_at_the_end = voted_on(&["a"], &[("a", Agree, 0.9)]);
    paused_at_the_end.extend(paused("k1", 0));
    Given::with(())
        .given(paused_at_the_end)
        .when_async(conclude(&[]))
        .await
        .then_expect_error(wrong_status("paused", "conclude"));
}

#[tokio::test]
async fn concluding_computes_the_consensus_and_completes() {
    let agents = ["a", "b", "c", "d"];
    let mut given = voted_on(
        &agents,
        &[("a", Agree, 0.9), ("b", Agree, 0.9), ("c", Disagree, 0.8)],
    );
    given.push(failed(1, "vote", "d", "timeout"));
    let events = Given::with(())
        .given(given.clone())
        .when_async(conclude(&[("a", 2000.0)]))
        .await
        .inspect_result()
        .unwrap();
    let [
        DebateEvent::ConsensusComputed { result, at: when },
        completed,
    ] = events.as_slice()
    else {
        panic!("expected ConsensusComputed and DebateCompleted, got {events:?}");
    };
    assert_eq!(*when, at());
    assert_eq!(*completed, DebateEvent::DebateCompleted { at: at() });
    assert_eq!(result.status, ConsensusStatus::ConsensusReached);
    assert!((result.agreeing_share - 2.0 / 3.0).abs() < 1e-12);
    assert!((result.confidence - 0.6).abs() < 1e-12);
    assert_eq!(result.threshold, Some(DEFAULT_THRESHOLD));
    assert_eq!(result.mode, ConsensusMode::Majority);
    assert_eq!(result.summary, "Rust is fun");
    assert_eq!(result.key_points, names(&["ownership", "tooling"]));
    assert_eq!(result.disagreements, names(&["c: c's reason"]));
    assert_eq!(result.failed_agents, names(&["d"]));
    assert_eq!(result.votes.len(), 3);
    // Ratings count in weighted mode only.
    assert_eq!(result.weights.get("a"), Some(&1.0));
    assert_eq!(result.judge, None);
    let mut all = given;
    all.extend(events.clone());
    let debate = replay(all);
    assert_eq!(debate.status, DebateStatus::Completed);
    assert_eq!(debate.consensus.as_ref(), Some(result));
    assert_eq!(debate.next(), Next::Finished);
}

#[tokio::test]
async fn weighted_mode_weighs_each_vote_by_its_agents_rating() {
    let weighted = Protocol {
        consensus: ConsensusMode::Weighted,
        threshold: 0.7,
        ..protocol(1)
    };
    let mut given = debated_with(&["a", "b", "c"], weighted);
    given.push(drafted("a"));
    given.extend([
        voted("a", Agree, 1.0),
        voted("b", Agree, 1.0),
        voted("c", Disagree, 1.0),
    ]);
    let ratings = [("a", 1800.0), ("b", 1500.0), ("c", 1200.0)];
    let events = Given::with(())
        .given(given)
        .when_async(conclude(&ratings))
        .await
        .inspect_result()
        .unwrap();
    let Some(DebateEvent::ConsensusComputed { result, .. }) = events.first() else {
        panic!("no consensus in {events:?}");
    };
    // 2/3 unweighted would miss 0.7; (1.2 + 1.0) / 3.0 makes it.
    assert_eq!(result.status, ConsensusStatus::ConsensusReached);
    assert!((result.agreeing_share - 2.2 / 3.0).abs() < 1e-12);
    assert_eq!(result.baseline.agreeing_share, 2.0 / 3.0);
    let expected: BTreeMap<String, f64> = [("a", 1.2), ("b", 1.0), ("c", 0.8)]
        .map(|(a, w)| (a.to_owned(), w))
        .into();
    for (agent, weight) in &expected {
        assert!((result.weights[agent] - weight).abs() < 1e-12, "{agent}");
    }
}

#[tokio::test]
async fn in_judge_mode_the_judges_vote_decides() {
    let mut given = debated_with(&["a", "b", "c"], judged_by(Some("c")));
    given.push(drafted("c"));
    given.extend([
        voted("a", Agree, 1.0),
        voted("b", AgreeWithModifications, 1.0),
        voted("c", Disagree, 1.0),
    ]);
    let events = Given::with(())
        .given(given)
        .when_async(conclude(&[]))
        .await
        .inspect_result()
        .unwrap();
    let Some(DebateEvent::ConsensusComputed { result, .. }) = events.first() else {
        panic!("no consensus in {events:?}");
    };
    assert_eq!(result.status, ConsensusStatus::NoConsensus);
    assert_eq!(result.judge.as_deref(), Some("c"));
    assert_eq!(result.threshold, None);
    assert_eq!(result.baseline.status, ConsensusStatus::ConsensusReached);
}

#[tokio::test]
async fn concluding_with_no_vote_at_all_fails_the_debate() {
    // Every agent failed in the vote; nothing failed the debate yet.
    let mut given = voted_on(&["a", "b"], &[]);
    given.push(failed(1, "vote", "a", "timeout"));
    given.push(failed(1, "vote", "b", "rate_limited"));
    assert_eq!(next_after(given.clone()), Next::Conclude);
    Given::with(())
        .given(given)
        .when_async(conclude(&[]))
        .await
        .then_expect_events(vec![DebateEvent::DebateFailed {
            reason: "every agent failed: a (timeout: timeout error); \
                     b (rate_limited: rate_limited error)"
                .to_owned(),
            at: at(),
        }]);
}
