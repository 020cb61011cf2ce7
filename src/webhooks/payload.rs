//! The bodies webhooks send: public, versioned DTOs (schemas and samples in
//! `event-schemas/webhooks/`), built from decoded domain events, never the
//! domain enums themselves. The envelope is Standard Webhooks' `type`,
//! `timestamp` and `data`, with our own `version` of the `data` form.

use agon_aggregates::debate::{ConsensusMode, ConsensusResult, ConsensusStatus, DebateEvent};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

/// The version of every payload form below; a change is a new version.
pub const PAYLOAD_VERSION: u32 = 1;

pub const DEBATE_COMPLETED: &str = "debate.completed";
pub const DEBATE_VERDICT: &str = "debate.verdict";
pub const DEBATE_FAILED: &str = "debate.failed";
/// The test message `POST /api/webhooks/{id}/test` sends.
pub const PING: &str = "webhook.ping";

/// One webhook body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message<D> {
    /// The event name (`debate.completed`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// The form of `data`: 1.
    pub version: u32,
    /// When the event happened (RFC 3339, UTC).
    pub timestamp: String,
    pub data: D,
}

/// How a debate's vote came out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Whether the agents reached consensus.
    pub reached: bool,
    /// `consensus_reached` or `no_consensus`.
    pub status: String,
    pub summary: String,
    pub confidence: f64,
    /// The share of weighted votes that agreed.
    pub agreeing_share: f64,
    /// `majority`, `supermajority`, `unanimous`, `judge` or `weighted`.
    pub mode: String,
    pub key_points: Vec<String>,
    pub disagreements: Vec<String>,
}

impl From<&ConsensusResult> for Verdict {
    fn from(result: &ConsensusResult) -> Self {
        let reached = result.status == ConsensusStatus::ConsensusReached;
        Self {
            reached,
            status: match result.status {
                ConsensusStatus::ConsensusReached => "consensus_reached",
                ConsensusStatus::NoConsensus => "no_consensus",
            }
            .to_owned(),
            summary: result.summary.clone(),
            confidence: result.confidence,
            agreeing_share: result.agreeing_share,
            mode: match result.mode {
                ConsensusMode::Majority => "majority",
                ConsensusMode::Supermajority => "supermajority",
                ConsensusMode::Unanimous => "unanimous",
                ConsensusMode::Judge => "judge",
                ConsensusMode::Weighted => "weighted",
            }
            .to_owned(),
            key_points: result.key_points.clone(),
            disagreements: result.disagreements.clone(),
        }
    }
}

/// `debate.completed`: the debate ran to its end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebateCompleted {
    pub debate_id: String,
    pub topic: String,
    /// Always `completed`.
    pub status: String,
    /// The vote's outcome; `null` when the debate ended without a vote.
    pub verdict: Option<Verdict>,
    pub completed_at: String,
}

/// `debate.verdict`: the agents' vote was counted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebateVerdict {
    pub debate_id: String,
    pub topic: String,
    pub verdict: Verdict,
    pub decided_at: String,
}

/// `debate.failed`: the debate ended without a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebateFailed {
    pub debate_id: String,
    pub topic: String,
    /// Always `failed`.
    pub status: String,
    pub reason: String,
    pub failed_at: String,
}

/// `webhook.ping`: a test message asked for by the subscription's owner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ping {
    pub subscription_id: String,
    pub message: String,
}

/// RFC 3339 in UTC with milliseconds: the form of every time in a payload.
pub fn time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The body of a message of `kind` at `at`.
pub fn body<D: Serialize>(kind: &str, at: DateTime<Utc>, data: D) -> String {
    let message = Message {
        kind: kind.to_owned(),
        version: PAYLOAD_VERSION,
        timestamp: time(at),
        data,
    };
    // Plain structs of strings and numbers always serialize.
    serde_json::to_string(&message).unwrap_or_default()
}

/// The message an ending or a verdict makes: its name, when, and its body.
/// Webhooks and the public NATS stream (`crate::outside`) send the same.
pub fn message_of(
    event: &DebateEvent,
    debate_id: String,
    topic: String,
    verdict: Option<Verdict>,
) -> Option<(&'static str, DateTime<Utc>, String)> {
    Some(match event {
        DebateEvent::ConsensusComputed { result, at } => {
            let data = DebateVerdict {
                debate_id,
                topic,
                verdict: Verdict::from(result),
                decided_at: time(*at),
            };
            (DEBATE_VERDICT, *at, body(DEBATE_VERDICT, *at, data))
        }
        DebateEvent::DebateCompleted { at } => {
            let data = DebateCompleted {
                debate_id,
                topic,
                status: "completed".to_owned(),
                verdict,
                completed_at: time(*at),
            };
            (DEBATE_COMPLETED, *at, body(DEBATE_COMPLETED, *at, data))
        }
        DebateEvent::DebateFailed { reason, at } => {
            let data = DebateFailed {
                debate_id,
                topic,
                status: "failed".to_owned(),
                reason: reason.clone(),
                failed_at: time(*at),
            };
            (DEBATE_FAILED, *at, body(DEBATE_FAILED, *at, data))
        }
        _ => return None,
    })
}
