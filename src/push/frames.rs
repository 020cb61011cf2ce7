//! The public messages of the WebSocket push (`event-schemas/ws/`), and the
//! one mapping from debate events to them.
//!
//! Frames are built here from decoded events and never from serialised
//! domain enums: a domain change lands behind the upcasters and this file,
//! not in clients. [`Track`] is the little a frame needs beyond its own
//! event (who owns the debate, its topic and rounds, the last round that
//! began), folded from the debate's earlier events; the mapping is a pure
//! function of it and the event.

use agon_aggregates::debate::{ConsensusResult, DebateEvent, VoteChoice};
use agon_projections::Cursor;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::{Value, json};

use crate::runner::Delta;

/// The version of every frame's form (`v` in each frame).
pub const FRAME_VERSION: u32 = 1;

/// The type of the frames of streamed text.
pub const DELTA: &str = "agent.delta";

/// The frame types a client may filter on (`kinds` in a subscribe).
pub const EVENT_KINDS: [&str; 13] = [
    DELTA,
    "debate_start",
    "round_start",
    "agent_message",
    "critique",
    "synthesis",
    "vote",
    "consensus",
    "warning",
    "checkpoint",
    "debate_paused",
    "debate_resumed",
    "debate_end",
];

/// One frame of a debate event, ready to send to every subscriber.
#[derive(Debug, Clone)]
pub struct Frame {
    pub debate_id: String,
    pub kind: &'static str,
    /// The feed cursor of the event the frame comes from; frames of one
    /// event share it, and `position` in the JSON is its position.
    pub cursor: Cursor,
    /// Who the debate belongs to, for the visibility check.
    pub created_by: Option<String>,
    pub org_id: Option<String>,
    /// The serialised frame.
    pub json: std::sync::Arc<str>,
    /// The event it comes from (none for deltas), for another form of it
    /// (the web UI's HTML mode, [`super::Render`]); frames of one event
    /// share it.
    pub event: Option<std::sync::Arc<DebateEvent>>,
}

/// The wire form of every frame (`event-schemas/ws/<type>.v1.json`).
#[derive(Debug, Serialize)]
struct Wire<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    data: Value,
    timestamp: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    debate_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    position: Option<i64>,
    v: u32,
}

fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A frame that is not a debate event: `pong`, `error`.
pub fn control(kind: &str, data: Value, debate_id: Option<&str>, at: DateTime<Utc>) -> String {
    let wire = Wire {
        kind,
        data,
        timestamp: timestamp(at),
        debate_id,
        position: None,
        v: FRAME_VERSION,
    };
    serde_json::to_string(&wire).unwrap_or_default()
}

/// The frame of a piece of an agent's text as it is written. It has no
/// position: deltas are not in the log, so `since` never replays them; the
/// recorded `agent_message` (or `critique`, `synthesis`, `vote`) that
/// follows is the truth. A higher `attempt` starts the text afresh (the
/// call was retried or failed over).
pub fn delta(delta: &Delta) -> Frame {
    let data = json!({
        "debate_id": delta.debate_id,
        "round": delta.round,
        "phase": delta.phase,
        "agent": delta.agent,
        "text": delta.text,
        "seq": delta.seq,
        "attempt": delta.attempt,
    });
    let wire = Wire {
        kind: DELTA,
        data,
        timestamp: timestamp(delta.at),
        debate_id: Some(&delta.debate_id),
        position: None,
        v: FRAME_VERSION,
    };
    Frame {
        debate_id: delta.debate_id.clone(),
        kind: DELTA,
        cursor: Cursor::START,
        created_by: delta.created_by.clone(),
        org_id: delta.org_id.clone(),
        json: serde_json::to_string(&wire).unwrap_or_default().into(),
        event: None,
    }
}

/// What the frames of a debate need from its earlier events.
#[derive(Debug, Clone, Default)]
pub struct Track {
    pub created_by: Option<String>,
    pub org_id: Option<String>,
    topic: String,
    agents: Vec<String>,
    total_rounds: u32,
    consensus_mode: &'static str,
    /// The highest round any message was recorded in.
    round: u32,
    started_at: Option<DateTime<Utc>>,
    consensus: Option<(bool, String)>,
    /// The debate completed or failed.
    pub ended: bool,
    /// Its creation was folded in (a stream without it is not a debate).
    created: bool,
}

fn choice(choice: VoteChoice) -> &'static str {
    match choice {
        VoteChoice::Agree => "agree",
        VoteChoice::AgreeWithModifications => "agree_with_modifications",
        VoteChoice::Disagree => "disagree",
    }
}

fn reached(result: &ConsensusResult) -> bool {
    matches!(
        result.status,
        agon_aggregates::debate::ConsensusStatus::ConsensusReached
    )
}

impl Track {
    /// Whether the debate's creation was seen.
    pub fn created(&self) -> bool {
        self.created
    }

    /// The frames of `event` (the debate `debate_id`'s, at `cursor`) given
    /// the events before it, then folds it in.
    pub fn frames(&mut self, debate_id: &str, cursor: Cursor, event: &DebateEvent) -> Vec<Frame> {
        if let DebateEvent::DebateCreated {
            created_by, org_id, ..
        } = event
        {
            self.created = true;
            self.created_by.clone_from(created_by);
            self.org_id.clone_from(org_id);
        }
        let (owner, org) = (self.created_by.clone(), self.org_id.clone());
        let shared = std::sync::Arc::new(event.clone());
        let mut frames = Vec::new();
        let mut push = |kind: &'static str, at: DateTime<Utc>, mut data: Value| {
            data["debate_id"] = json!(debate_id);
            let wire = Wire {
                kind,
                data,
                timestamp: timestamp(at),
                debate_id: Some(debate_id),
                position: Some(cursor.position),
                v: FRAME_VERSION,
            };
            frames.push(Frame {
                debate_id: debate_id.to_owned(),
                kind,
                cursor,
                created_by: owner.clone(),
                org_id: org.clone(),
                json: serde_json::to_string(&wire).unwrap_or_default().into(),
                event: Some(shared.clone()),
            });
        };
        match event {
            DebateEvent::DebateCreated {
                topic,
                agents,
                protocol,
                ..
            } => {
                self.topic.clone_from(topic);
                self.agents.clone_from(agents);
                self.total_rounds = protocol.rounds;
                self.consensus_mode = protocol.consensus.as_str();
            }
            DebateEvent::DebateStarted { at } => {
                self.started_at = Some(*at);
                push(
                    "debate_start",
                    *at,
                    json!({
                        "task": self.topic,
                        "topic": self.topic,
                        "agents": self.agents,
                        "total_rounds": self.total_rounds,
                        "protocol": self.consensus_mode,
                    }),
                );
            }
            DebateEvent::MessageRecorded {
                round,
                phase,
                agent,
                content,
                targets,
                at,
                ..
            } => {
                if *round > self.round {
                    self.round = *round;
                    push(
                        "round_start",
                        *at,
                        json!({
                            "round": round,
                            "round_number": round,
                            "total_rounds": self.total_rounds,
                        }),
                    );
                }
                let mut data = json!({
                    "agent": agent,
                    "content": content,
                    "round": round,
                    "round_number": round,
                    "phase": phase,
                    "role": phase,
                });
                if phase == "critique" {
                    data["targets"] = json!(targets);
                    data["target_agent"] = json!(targets.first().cloned().unwrap_or_default());
                    push("critique", *at, data);
                } else {
                    push("agent_message", *at, data);
                }
            }
            DebateEvent::AgentFailed {
                round,
                phase,
                agent,
                code,
                at,
                ..
            } => push(
                "warning",
                *at,
                json!({
                    "agent": agent,
                    "round": round,
                    "phase": phase,
                    "code": code,
                    "message": format!("agent {agent} failed ({code}) and takes no further part"),
                    "severity": "warning",
                }),
            ),
            DebateEvent::SynthesisDrafted {
                agent,
                summary,
                key_points,
                at,
                ..
            } => push(
                "synthesis",
                *at,
                json!({
                    "agent": agent,
                    "content": summary,
                    "key_points": key_points,
                    "round_number": self.round,
                }),
            ),
            DebateEvent::VoteCast {
                agent,
                choice: vote,
                confidence,
                reasons,
                at,
                ..
            } => push(
                "vote",
                *at,
                json!({
                    "agent": agent,
                    "choice": choice(*vote),
                    "confidence": confidence,
                    "reasons": reasons,
                    "reasoning": reasons.join(" "),
                    "round_number": self.round,
                }),
            ),
            DebateEvent::ConsensusComputed { result, at } => {
                let reached = reached(result);
                self.consensus = Some((reached, result.summary.clone()));
                push(
                    "consensus",
                    *at,
                    json!({
                        "reached": reached,
                        "result": result.summary,
                        "confidence": result.confidence,
                        "method": result.mode.as_str(),
                        "key_points": result.key_points,
                        "disagreements": result.disagreements,
                        "round_number": self.round,
                    }),
                );
            }
            DebateEvent::DebateCompleted { at } => {
                self.ended = true;
                let data = self.end("completed", None, *at);
                push("debate_end", *at, data);
            }
            DebateEvent::DebateFailed { reason, at } => {
                self.ended = true;
                let data = self.end("failed", Some(reason), *at);
                push("debate_end", *at, data);
            }
            DebateEvent::CheckpointCreated {
                checkpoint_id,
                round,
                phase,
                messages,
                at,
            } => push(
                "checkpoint",
                *at,
                json!({
                    "checkpoint_id": checkpoint_id,
                    "round": round,
                    "phase": phase,
                    "messages": messages,
                }),
            ),
            DebateEvent::DebatePaused { checkpoint_id, at } => push(
                "debate_paused",
                *at,
                json!({"status": "paused", "checkpoint_id": checkpoint_id}),
            ),
            DebateEvent::DebateResumed { at } => {
                push("debate_resumed", *at, json!({"status": "running"}));
            }
            // The gallery is not part of the live debate: no frame.
            DebateEvent::DebatePublished { .. } | DebateEvent::DebateUnpublished { .. } => {}
        }
        frames
    }

    fn end(&self, status: &str, reason: Option<&String>, at: DateTime<Utc>) -> Value {
        let (reached, result) = self.consensus.clone().unwrap_or_default();
        let duration = self
            .started_at
            .map(|start| (at - start).num_milliseconds() as f64 / 1000.0);
        let mut data = json!({
            "status": status,
            "consensus_reached": reached,
            "result": result,
            "total_rounds": self.total_rounds,
            "duration_seconds": duration,
        });
        if let Some(reason) = reason {
            data["reason"] = json!(reason);
        }
        data
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agon_aggregates::debate::{ConsensusMode, Protocol};
    use chrono::TimeZone;

    fn at(second: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2027, 1, 15, 8, 0, second).unwrap()
    }

    fn message(round: u32, phase: &str) -> DebateEvent {
        DebateEvent::MessageRecorded {
            round,
            phase: phase.to_owned(),
            agent: "demo-a".to_owned(),
            content: "text".to_owned(),
            targets: vec!["demo-b".to_owned()],
            usage: agon_aggregates::debate::Usage {
                provider: "demo".to_owned(),
                model: "demo".to_owned(),
                tokens_in: 1,
                tokens_out: 1,
                latency_ms: 0,
                fallback: false,
            },
            at: at(2),
        }
    }

    #[test]
    fn a_round_starts_once_and_critiques_have_their_own_type() {
        let mut track = Track::default();
        let cursor = |position| Cursor { txid: 0, position };
        let created = DebateEvent::DebateCreated {
            debate_id: "d".to_owned(),
            topic: "t".to_owned(),
            context: None,
            agents: vec!["demo-a".to_owned()],
            protocol: Protocol {
                phases: vec!["opening".to_owned(), "critique".to_owned()],
                rounds: 2,
                consensus: ConsensusMode::Majority,
                threshold: 0.5,
                judge: None,
            },
            created_by: Some("u".to_owned()),
            org_id: None,
            at: at(0),
        };
        assert!(track.frames("d", cursor(1), &created).is_empty());
        let kinds = |frames: Vec<Frame>| frames.iter().map(|f| f.kind).collect::<Vec<_>>();
        assert_eq!(
            kinds(track.frames("d", cursor(2), &message(1, "opening"))),
            ["round_start", "agent_message"]
        );
        assert_eq!(
            kinds(track.frames("d", cursor(3), &message(1, "critique"))),
            ["critique"]
        );
        let frames = track.frames("d", cursor(4), &message(2, "critique"));
        assert_eq!(kinds(frames.clone()), ["round_start", "critique"]);
        let wire: Value = serde_json::from_str(&frames[1].json).unwrap();
        assert_eq!(wire["position"], 4);
        assert_eq!(wire["data"]["target_agent"], "demo-b");
        let end = track.frames("d", cursor(5), &DebateEvent::DebateCompleted { at: at(9) });
        assert!(track.ended);
        let wire: Value = serde_json::from_str(&end[0].json).unwrap();
        assert_eq!(wire["data"]["status"], "completed");
        assert_eq!(track.created_by.as_deref(), Some("u"));
    }
}
