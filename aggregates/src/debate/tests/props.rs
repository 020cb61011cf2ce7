//! `consensus::decide`: the formulas of consensus.rs on exact values, and
//! properties that hold for any ballots, ratings, mode and threshold.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::debate::consensus::{BASE_RATING, Tally, decide};

use VoteChoice::{Agree, AgreeWithModifications, Disagree};

const MODES: [ConsensusMode; 5] = [
    ConsensusMode::Majority,
    ConsensusMode::Supermajority,
    ConsensusMode::Unanimous,
    ConsensusMode::Judge,
    ConsensusMode::Weighted,
];

fn ballot(agent: &str, choice: VoteChoice, confidence: f64) -> Ballot {
    Ballot {
        agent: agent.to_owned(),
        choice,
        confidence,
        reasons: vec![format!("{agent}'s reason")],
        modifications: vec![format!("{agent}'s change")],
    }
}

fn tally<'a>(
    votes: &'a [Ballot],
    mode: ConsensusMode,
    threshold: f64,
    ratings: &'a BTreeMap<String, f64>,
) -> Tally<'a> {
    Tally {
        votes,
        mode,
        threshold,
        judge: Some("a"),
        ratings,
        summary: "s",
        key_points: &[],
        failed_agents: &[],
    }
}

fn close(actual: f64, expected: f64) -> bool {
    (actual - expected).abs() < 1e-12
}

#[test]
fn share_and_confidence_follow_the_documented_formulas() {
    let votes = [
        ballot("a", Agree, 0.9),
        ballot("b", Agree, 0.9),
        ballot("c", Disagree, 0.8),
    ];
    let ratings = BTreeMap::new();
    let result = decide(tally(&votes, ConsensusMode::Majority, 0.6, &ratings));
    assert!(close(result.agreeing_share, 2.0 / 3.0));
    assert!(close(result.confidence, 0.6));
    assert_eq!(result.status, ConsensusStatus::ConsensusReached);
    assert_eq!(result.threshold, Some(0.6));
    // A supermajority raises the threshold to 2/3, which 2/3 just meets.
    let result = decide(tally(&votes, ConsensusMode::Supermajority, 0.5, &ratings));
    assert_eq!(result.threshold, Some(2.0 / 3.0));
    assert_eq!(result.status, ConsensusStatus::ConsensusReached);
    let result = decide(tally(&votes, ConsensusMode::Unanimous, 0.0, &ratings));
    assert_eq!(result.threshold, Some(1.0));
    assert_eq!(result.status, ConsensusStatus::NoConsensus);
    // Modifications back the draft at 0.75.
    let votes = [
        ballot("a", AgreeWithModifications, 0.8),
        ballot("b", Agree, 0.4),
    ];
    let result = decide(tally(&votes, ConsensusMode::Majority, 0.6, &ratings));
    assert!(close(result.confidence, (0.8 * 0.75 + 0.4) / 2.0));
    assert!(close(result.agreeing_share, 1.0));
}

#[test]
fn weighted_mode_divides_each_rating_by_1500() {
    let votes = [
        ballot("a", Agree, 1.0),
        ballot("b", AgreeWithModifications, 0.8),
        ballot("c", Disagree, 0.5),
    ];
    let ratings: BTreeMap<String, f64> = [("a", 1800.0), ("b", BASE_RATING), ("c", 1200.0)]
        .map(|(a, r)| (a.to_owned(), r))
        .into();
    let result = decide(tally(&votes, ConsensusMode::Weighted, 0.7, &ratings));
    assert!(close(result.weights["a"], 1.2));
    assert!(close(result.weights["b"], 1.0));
    assert!(close(result.weights["c"], 0.8));
    assert!(close(result.agreeing_share, 2.2 / 3.0));
    assert!(close(result.confidence, (1.2 + 1.0 * 0.8 * 0.75) / 3.0));
    assert_eq!(result.status, ConsensusStatus::ConsensusReached);
    // One agent, one vote, would not have reached 0.7.
    let plain = decide(tally(&votes, ConsensusMode::Majority, 0.7, &ratings));
    assert_eq!(plain.status, ConsensusStatus::NoConsensus);
    assert!(plain.weights.values().all(|w| *w == 1.0));
}

#[test]
fn the_baseline_counts_heads_and_ties_go_to_the_cautious_choice() {
    let ratings = BTreeMap::new();
    let votes = [ballot("a", Agree, 1.0), ballot("b", Disagree, 1.0)];
    let result = decide(tally(&votes, ConsensusMode::Majority, 0.5, &ratings));
    assert_eq!(result.status, ConsensusStatus::ConsensusReached);
    assert_eq!(result.baseline.status, ConsensusStatus::NoConsensus);
    assert_eq!(result.baseline.choice, Disagree);
    assert_eq!(result.baseline.agreeing_share, 0.5);
    let votes = [
        ballot("a", Agree, 1.0),
        ballot("b", AgreeWithModifications, 1.0),
    ];
    let result = decide(tally(&votes, ConsensusMode::Majority, 0.5, &ratings));
    assert_eq!(result.baseline.choice, AgreeWithModifications);
    assert_eq!(result.baseline.status, ConsensusStatus::ConsensusReached);
    let none = decide(tally(&[], ConsensusMode::Majority, 0.0, &ratings));
    assert_eq!(none.status, ConsensusStatus::NoConsensus);
    assert_eq!(none.baseline.status, ConsensusStatus::NoConsensus);
    assert_eq!((none.agreeing_share, none.confidence), (0.0, 0.0));
}

#[test]
fn disagreements_are_attributed_and_a_silent_dissent_is_still_named() {
    let mut quiet = ballot("c", Disagree, 1.0);
    quiet.reasons.clear();
    let mut repeated = ballot("b", AgreeWithModifications, 1.0);
    repeated.modifications = names(&[" shorter ", "shorter"]);
    let votes = [
        ballot("a", Agree, 1.0),
        repeated,
        quiet,
        ballot("d", Disagree, 1.0),
    ];
    let result = decide(tally(
        &votes,
        ConsensusMode::Majority,
        0.5,
        &BTreeMap::new(),
    ));
    assert_eq!(
        result.disagreements,
        names(&[
            "b: shorter",
            "c disagrees with the summary",
            "d: d's reason"
        ])
    );
}

#[test]
fn a_judge_without_a_vote_falls_back_to_majority() {
    let votes = [ballot("b", Agree, 1.0), ballot("c", Agree, 1.0)];
    let result = decide(tally(&votes, ConsensusMode::Judge, 0.6, &BTreeMap::new()));
    assert_eq!(result.judge, None);
    assert_eq!(result.threshold, Some(0.6));
    assert_eq!(result.status, ConsensusStatus::ConsensusReached);
}

fn any_choice() -> impl Strategy<Value = VoteChoice> {
    prop::sample::select(vec![Agree, AgreeWithModifications, Disagree])
}

/// Up to 20 ballots by agents `a0`, `a1`, ... (so `a0` is always the judge
/// when anyone voted), with any confidence and an optional rating each.
fn any_ballots() -> impl Strategy<Value = (Vec<Ballot>, BTreeMap<String, f64>)> {
    let one = (
        any_choice(),
        prop::num::f64::ANY,
        prop::option::of(prop::num::f64::ANY),
        prop::collection::vec("[a-z ]{0,6}", 0..3),
        prop::collection::vec("[a-z ]{0,6}", 0..3),
    );
    prop::collection::vec(one, 0..20).prop_map(|votes| {
        let mut ratings = BTreeMap::new();
        let ballots = votes
            .into_iter()
            .enumerate()
            .map(
                |(i, (choice, confidence, rating, reasons, modifications))| {
                    let agent = format!("a{i}");
                    if let Some(rating) = rating {
                        ratings.insert(agent.clone(), rating);
                    }
                    Ballot {
                        agent,
                        choice,
                        confidence,
                        reasons,
                        modifications,
                    }
                },
            )
            .collect();
        (ballots, ratings)
    })
}

fn reached(result: &ConsensusResult) -> bool {
    result.status == ConsensusStatus::ConsensusReached
}

/// `decide` with `a0` as the judge.
fn decide_with(
    votes: &[Ballot],
    ratings: &BTreeMap<String, f64>,
    mode: ConsensusMode,
    threshold: f64,
) -> ConsensusResult {
    decide(Tally {
        judge: Some("a0"),
        ..tally(votes, mode, threshold, ratings)
    })
}

proptest! {
    #[test]
    fn any_ballots_give_a_consistent_result(
        (votes, ratings) in any_ballots(),
        mode in prop::sample::select(MODES.to_vec()),
        threshold in prop::num::f64::ANY,
    ) {
        let result = decide_with(&votes, &ratings, mode, threshold);
        let n = votes.len();
        let in_unit = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
        prop_assert!(in_unit(result.confidence), "confidence {}", result.confidence);
        prop_assert!(in_unit(result.agreeing_share), "share {}", result.agreeing_share);
        prop_assert!(in_unit(result.baseline.agreeing_share));
        prop_assert!(result.votes.iter().all(|b| in_unit(b.confidence)));
        prop_assert!(result.weights.values().all(|w| w.is_finite() && *w > 0.0));
        let counts = result.voting_summary;
        let total = counts.agree + counts.agree_with_modifications + counts.disagree;
        prop_assert_eq!(total as usize, n);
        if reached(&result) {
            prop_assert!(n > 0);
        }
        let disagree = votes.iter().filter(|b| b.choice == Disagree).count();
        let agreeing = n - disagree;
        prop_assert_eq!(
            result.baseline.status == ConsensusStatus::ConsensusReached,
            agreeing * 2 > n
        );
        // A full agreement is a share of exactly 1, whatever the weights.
        if n > 0 && disagree == 0 {
            prop_assert_eq!(result.agreeing_share, 1.0);
        }
        let by = |line: &str, agent: &str| {
            line.starts_with(&format!("{agent}: "))
                || line == format!("{agent} disagrees with the summary")
        };
        for line in &result.disagreements {
            prop_assert!(
                votes.iter().any(|b| b.choice != Agree && by(line, &b.agent)),
                "{} is not a dissenter's line", line
            );
        }
        for vote in votes.iter().filter(|b| b.choice == Disagree) {
            prop_assert!(result.disagreements.iter().any(|l| by(l, &vote.agent)));
        }
    }

    #[test]
    fn each_mode_reaches_consensus_exactly_when_it_says(
        (votes, ratings) in any_ballots(),
        threshold in prop::num::f64::ANY,
    ) {
        let n = votes.len();
        let clamped = if threshold.is_nan() { 0.0 } else { threshold.clamp(0.0, 1.0) };
        let any_disagree = votes.iter().any(|b| b.choice == Disagree);
        let unanimous = decide_with(&votes, &ratings, ConsensusMode::Unanimous, threshold);
        prop_assert_eq!(reached(&unanimous), n > 0 && !any_disagree);
        for mode in [ConsensusMode::Majority, ConsensusMode::Weighted] {
            let result = decide_with(&votes, &ratings, mode, threshold);
            prop_assert_eq!(
                reached(&result),
                n > 0 && result.agreeing_share + 1e-9 >= clamped,
                "{:?}: share {} threshold {}", mode, result.agreeing_share, clamped
            );
            prop_assert_eq!(result.threshold, Some(clamped));
        }
        let supermajority = decide_with(&votes, &ratings, ConsensusMode::Supermajority, threshold);
        let two_thirds = decide_with(&votes, &ratings, ConsensusMode::Majority, 2.0 / 3.0);
        prop_assert!(!reached(&supermajority) || reached(&two_thirds));
        let judged = decide_with(&votes, &ratings, ConsensusMode::Judge, threshold);
        match votes.first() {
            Some(judge) => {
                prop_assert_eq!(reached(&judged), judge.choice.agrees());
                prop_assert_eq!(judged.judge.as_deref(), Some("a0"));
            }
            None => prop_assert!(!reached(&judged)),
        }
    }
}
