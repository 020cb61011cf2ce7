//! Publishing to the public gallery: only a completed debate, once;
//! unpublishing takes it out, and asking again changes nothing.

use std::collections::BTreeMap;

use super::*;
use crate::Decide;

/// A completed debate of two agents in one round, both agreeing.
fn completed() -> Vec<DebateEvent> {
    let mut events = running(&["a", "b"], 1);
    let mut state = Debate::default();
    for event in &events {
        state.apply_event(event.clone());
    }
    let mut commands: Vec<DebateCommand> = default_turns(1)
        .into_iter()
        .map(|(round, phase)| record(vec![says(round, phase, "a"), says(round, phase, "b")]))
        .collect();
    commands.push(record(vec![drafts("a")]));
    commands.push(record(vec![
        votes("a", VoteChoice::Agree, 0.9),
        votes("b", VoteChoice::Agree, 0.8),
    ]));
    commands.push(DebateCommand::Conclude {
        weights: BTreeMap::new(),
        at: at(),
    });
    for command in commands {
        for event in state.decide(command).unwrap() {
            state.apply_event(event.clone());
            events.push(event);
        }
    }
    assert_eq!(state.status, DebateStatus::Completed);
    events
}

#[test]
fn a_completed_debate_is_published_once() {
    Given::with(())
        .given(completed())
        .when(DebateCommand::Publish { at: at() })
        .then_expect_events(vec![DebateEvent::DebatePublished { at: at() }]);
    let mut published = completed();
    published.push(DebateEvent::DebatePublished { at: at() });
    Given::with(())
        .given(published)
        .when(DebateCommand::Publish { at: at() })
        .then_expect_events(vec![]);
}

#[test]
fn only_a_completed_debate_is_published() {
    Given::with(())
        .given_no_previous_events()
        .when(DebateCommand::Publish { at: at() })
        .then_expect_error(DebateError::NotFound);
    let created = completed()[..1].to_vec();
    Given::with(())
        .given(created.clone())
        .when(DebateCommand::Publish { at: at() })
        .then_expect_error(DebateError::WrongStatus {
            status: "pending",
            action: "publish",
        });
    let mut failed = created;
    failed.push(DebateEvent::DebateFailed {
        reason: "stop".to_owned(),
        at: at(),
    });
    Given::with(())
        .given(failed)
        .when(DebateCommand::Publish { at: at() })
        .then_expect_error(DebateError::WrongStatus {
            status: "failed",
            action: "publish",
        });
}

#[test]
fn unpublishing_takes_it_out_and_folds() {
    let mut published = completed();
    published.push(DebateEvent::DebatePublished { at: at() });
    Given::with(())
        .given(published.clone())
        .when(DebateCommand::Unpublish { at: at() })
        .then_expect_events(vec![DebateEvent::DebateUnpublished { at: at() }]);
    Given::with(())
        .given(completed())
        .when(DebateCommand::Unpublish { at: at() })
        .then_expect_events(vec![]);

    let mut state = Debate::default();
    for event in published {
        state.apply_event(event);
    }
    assert_eq!(state.published_at, Some(at()));
    state.apply_event(DebateEvent::DebateUnpublished { at: at() });
    assert_eq!(state.published_at, None);
}
