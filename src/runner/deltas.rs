//! The streamed text of the calls a debate waits on, handed to the push as
//! [`Delta`]s while the agents write. Deltas are not events: they go over
//! the bus's [`Ephemeral`] channel (in process, or core NATS to every
//! replica), never into the log, and a lost one costs only a preview. The
//! recorded message that follows is the truth, and a drive cut off
//! mid-stream repeats only the calls in flight, as before.

use agon_aggregates::debate::Debate;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::agents::{Chunk, OnText, Turn};
use crate::bus::Ephemeral;
use crate::clock::Clock;

/// One piece of an agent's text, as replicas pass it to their sockets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delta {
    pub debate_id: String,
    /// Who may read the debate (the push checks it per socket).
    pub created_by: Option<String>,
    pub org_id: Option<String>,
    pub round: u32,
    pub phase: String,
    pub agent: String,
    /// 1 for a call's first try; a retry or the fallback starts the text afresh.
    pub attempt: u32,
    /// Order within the attempt, from 0.
    pub seq: u32,
    pub text: String,
    pub at: DateTime<Utc>,
}

impl Delta {
    /// The delta as it travels between replicas.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn decode(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }
}

/// Publishes one turn's text as deltas of its debate.
pub struct TurnText {
    out: Ephemeral,
    clock: Clock,
    debate_id: String,
    created_by: Option<String>,
    org_id: Option<String>,
    round: u32,
    phase: String,
    agent: String,
}

impl TurnText {
    pub fn new(out: &Ephemeral, clock: &Clock, debate: &Debate, turn: &Turn) -> Self {
        Self {
            out: out.clone(),
            clock: clock.clone(),
            debate_id: debate.id.clone(),
            created_by: debate.created_by.clone(),
            org_id: debate.org_id.clone(),
            round: turn.round,
            phase: turn.task.phase().to_owned(),
            agent: turn.agent.clone(),
        }
    }
}

impl OnText for TurnText {
    fn chunk(&self, chunk: Chunk<'_>) {
        let delta = Delta {
            debate_id: self.debate_id.clone(),
            created_by: self.created_by.clone(),
            org_id: self.org_id.clone(),
            round: self.round,
            phase: self.phase.clone(),
            agent: self.agent.clone(),
            attempt: chunk.attempt,
            seq: chunk.seq,
            text: chunk.text.to_owned(),
            at: self.clock.now(),
        };
        self.out.publish(&self.debate_id, delta.encode().into());
    }
}
