//! How a finished review debate becomes a review: the consensus decides the
//! action (reached without reservations: approve; reached with requested
//! modifications or recorded disagreements: comment; not reached: request
//! changes), and each concern the agents voted with becomes a comment on
//! the file it names (else the first changed file), at that file's anchor.

use std::fmt::Write as _;

use super::{Anchor, ReviewAction, ReviewComment};
use crate::debate::{ConsensusResult, ConsensusStatus, VoteChoice};

/// A review drawn from a debate's consensus.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub action: ReviewAction,
    pub body: String,
    pub comments: Vec<ReviewComment>,
    pub confidence: f64,
}

/// The review `consensus` amounts to, with at most `max_comments` comments.
pub fn verdict(consensus: &ConsensusResult, anchors: &[Anchor], max_comments: usize) -> Verdict {
    let concerns = concerns(consensus);
    let action = match consensus.status {
        ConsensusStatus::NoConsensus => ReviewAction::RequestChanges,
        ConsensusStatus::ConsensusReached if concerns.is_empty() => ReviewAction::Approve,
        ConsensusStatus::ConsensusReached => ReviewAction::Comment,
    };
    let comments = concerns
        .iter()
        .filter_map(|concern| {
            anchor_for(concern, anchors).map(|anchor| ReviewComment {
                path: anchor.path.clone(),
                position: anchor.position,
                body: concern.clone(),
            })
        })
        .take(max_comments)
        .collect();
    Verdict {
        action,
        body: body(action, consensus, &concerns),
        comments,
        confidence: consensus.confidence,
    }
}

/// The modifications asked for in votes, then the recorded disagreements,
/// each once, in that order.
fn concerns(consensus: &ConsensusResult) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let asked = consensus
        .votes
        .iter()
        .filter(|b| b.choice != VoteChoice::Agree || !b.modifications.is_empty())
        .flat_map(|b| b.modifications.iter());
    for text in asked.chain(consensus.disagreements.iter()) {
        let text = text.trim();
        if !text.is_empty() && !found.iter().any(|f| f == text) {
            found.push(text.to_owned());
        }
    }
    found
}

/// The anchor of the file `concern` names (the longest path it mentions,
/// else the file name alone), else the first file's.
fn anchor_for<'a>(concern: &str, anchors: &'a [Anchor]) -> Option<&'a Anchor> {
    let named = anchors
        .iter()
        .filter(|a| concern.contains(a.path.as_str()))
        .max_by_key(|a| a.path.len())
        .or_else(|| {
            anchors.iter().find(|a| {
                a.path
                    .rsplit('/')
                    .next()
                    .is_some_and(|name| concern.contains(name))
            })
        });
    named.or_else(|| anchors.first())
}

fn body(action: ReviewAction, consensus: &ConsensusResult, concerns: &[String]) -> String {
    let mut text = format!(
        "Review: {} (confidence {:.2})\n\n{}\n",
        action.as_str(),
        consensus.confidence,
        consensus.summary.trim()
    );
    let mut list = |title: &str, items: &[String]| {
        if !items.is_empty() {
            let _ = write!(text, "\n{title}:\n");
            for item in items {
                let _ = writeln!(text, "- {item}");
            }
        }
    };
    list("Key points", &consensus.key_points);
    list("Concerns", concerns);
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::debate::consensus::MajorityBaseline;
    use crate::debate::{Ballot, ConsensusMode, ConsensusResult};

    fn consensus(status: ConsensusStatus, modifications: &[&str]) -> ConsensusResult {
        let ballot = Ballot {
            agent: "demo-a".to_owned(),
            choice: if modifications.is_empty() {
                VoteChoice::Agree
            } else {
                VoteChoice::AgreeWithModifications
            },
            confidence: 0.8,
            reasons: Vec::new(),
            modifications: modifications.iter().map(|m| (*m).to_owned()).collect(),
        };
        ConsensusResult {
            status,
            summary: "Merge it.".to_owned(),
            confidence: 0.8,
            key_points: vec!["Small change".to_owned()],
            disagreements: Vec::new(),
            voting_summary: Default::default(),
            mode: ConsensusMode::Majority,
            threshold: Some(0.5),
            agreeing_share: 1.0,
            judge: None,
            votes: vec![ballot],
            weights: Default::default(),
            baseline: MajorityBaseline {
                status,
                choice: VoteChoice::Agree,
                agreeing_share: 1.0,
            },
            failed_agents: Vec::new(),
        }
    }

    fn anchors() -> Vec<Anchor> {
        vec![
            Anchor {
                path: "src/lib.rs".to_owned(),
                position: 3,
            },
            Anchor {
                path: "src/db/pool.rs".to_owned(),
                position: 7,
            },
        ]
    }

    #[test]
    fn the_consensus_decides_the_action() {
        let clean = verdict(
            &consensus(ConsensusStatus::ConsensusReached, &[]),
            &anchors(),
            5,
        );
        assert_eq!(clean.action, ReviewAction::Approve);
        assert!(clean.comments.is_empty());
        let split = verdict(&consensus(ConsensusStatus::NoConsensus, &[]), &anchors(), 5);
        assert_eq!(split.action, ReviewAction::RequestChanges);
    }

    #[test]
    fn concerns_land_on_the_file_they_name() {
        let reached = consensus(
            ConsensusStatus::ConsensusReached,
            &["Close the handle in pool.rs", "Add a test"],
        );
        let review = verdict(&reached, &anchors(), 5);
        assert_eq!(review.action, ReviewAction::Comment);
        let placed: Vec<_> = review
            .comments
            .iter()
            .map(|c| (c.path.as_str(), c.position))
            .collect();
        assert_eq!(placed, [("src/db/pool.rs", 7), ("src/lib.rs", 3)]);
        assert!(review.body.contains("Add a test"));
        assert_eq!(verdict(&reached, &anchors(), 1).comments.len(), 1);
    }
}
