//! A debate as its events leave it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::consensus::{Ballot, ConsensusResult};
use super::events::{DebateEvent, Protocol, Usage};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DebateStatus {
    #[default]
    Pending,
    Running,
    Paused,
    Completed,
    Failed,
}

impl DebateStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DebateStatus::Pending => "pending",
            DebateStatus::Running => "running",
            DebateStatus::Paused => "paused",
            DebateStatus::Completed => "completed",
            DebateStatus::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "pending" => Some(Self::Pending),
            "running" => Some(Self::Running),
            "paused" => Some(Self::Paused),
            "completed" => Some(Self::Completed),
            "failed" => Some(Self::Failed),
            _ => None,
        }
    }

    pub fn is_finished(self) -> bool {
        matches!(self, DebateStatus::Completed | DebateStatus::Failed)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub round: u32,
    pub phase: String,
    pub agent: String,
    pub content: String,
    pub targets: Vec<String>,
    pub usage: Usage,
    pub at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Synthesis {
    pub agent: String,
    pub summary: String,
    pub key_points: Vec<String>,
    pub usage: Usage,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentFailure {
    pub round: u32,
    pub phase: String,
    pub agent: String,
    pub code: String,
    pub error: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Debate {
    pub id: String,
    pub topic: String,
    pub context: Option<String>,
    pub agents: Vec<String>,
    pub protocol: Option<Protocol>,
    pub status: DebateStatus,
    pub created_by: Option<String>,
    pub org_id: Option<String>,
    pub messages: Vec<Message>,
    pub failures: Vec<AgentFailure>,
    pub synthesis: Option<Synthesis>,
    pub votes: Vec<Ballot>,
    pub consensus: Option<ConsensusResult>,
    pub failure_reason: Option<String>,
    pub checkpoints: Vec<String>,
    pub created_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// When the debate was put in the public gallery; `None` while it is
    /// not there (documents from before the gallery lack the field).
    #[serde(default)]
    pub published_at: Option<DateTime<Utc>>,
}

impl Debate {
    /// Whether the debate exists (has been created).
    pub fn exists(&self) -> bool {
        self.protocol.is_some()
    }

    /// Agents that have not failed, in seating order.
    pub fn active_agents(&self) -> impl Iterator<Item = &String> {
        self.agents
            .iter()
            .filter(|agent| !self.failures.iter().any(|f| &f.agent == *agent))
    }

    /// Names of agents that failed, in the order they failed.
    pub fn failed_agents(&self) -> Vec<String> {
        self.failures.iter().map(|f| f.agent.clone()).collect()
    }

    /// The agent's latest message in one of `phases`, if any.
    pub fn latest(&self, agent: &str, phases: &[&str]) -> Option<&Message> {
        self.messages
            .iter()
            .rev()
            .find(|m| m.agent == agent && phases.contains(&m.phase.as_str()))
    }

    /// Folds one event in (the aggregate and the `debates` read model share it).
    pub fn apply_event(&mut self, event: DebateEvent) {
        match event {
            DebateEvent::DebateCreated {
                debate_id,
                topic,
                context,
                agents,
                protocol,
                created_by,
                org_id,
                at,
            } => {
                *self = Debate {
                    id: debate_id,
                    topic,
                    context,
                    agents,
                    protocol: Some(protocol),
                    created_by,
                    org_id,
                    created_at: Some(at),
                    ..Debate::default()
                };
            }
            DebateEvent::DebateStarted { at } => {
                self.status = DebateStatus::Running;
                self.started_at = Some(at);
            }
            DebateEvent::MessageRecorded {
                round,
                phase,
                agent,
                content,
                targets,
                usage,
                at,
            } => self.messages.push(Message {
                round,
                phase,
                agent,
                content,
                targets,
                usage,
                at,
            }),
            DebateEvent::AgentFailed {
                round,
                phase,
                agent,
                code,
                error,
                ..
            } => self.failures.push(AgentFailure {
                round,
                phase,
                agent,
                code,
                error,
            }),
            DebateEvent::SynthesisDrafted {
                agent,
                summary,
                key_points,
                usage,
                ..
            } => {
                self.synthesis = Some(Synthesis {
                    agent,
                    summary,
                    key_points,
                    usage,
                })
            }
            DebateEvent::VoteCast {
                agent,
                choice,
                confidence,
                reasons,
                modifications,
                ..
            } => self.votes.push(Ballot {
                agent,
                choice,
                confidence,
                reasons,
                modifications,
            }),
            DebateEvent::ConsensusComputed { result, .. } => self.consensus = Some(result),
            DebateEvent::DebateCompleted { at } => {
                self.status = DebateStatus::Completed;
                self.finished_at = Some(at);
            }
            DebateEvent::DebateFailed { reason, at } => {
                self.status = DebateStatus::Failed;
                self.failure_reason = Some(reason);
                self.finished_at = Some(at);
            }
            DebateEvent::CheckpointCreated { checkpoint_id, .. } => {
                self.checkpoints.push(checkpoint_id)
            }
            DebateEvent::DebatePaused { .. } => self.status = DebateStatus::Paused,
            DebateEvent::DebateResumed { .. } => self.status = DebateStatus::Running,
            DebateEvent::DebatePublished { at } => self.published_at = Some(at),
            DebateEvent::DebateUnpublished { .. } => self.published_at = None,
        }
    }
}
