//! What the runner asks of an agent (a [`Turn`]) and what comes back (a
//! [`Reply`]): the one contract between the debate runner, the demo agents
//! and the real providers.

use serde::{Deserialize, Serialize};

/// One agent's stated position or critique, as another agent sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub agent: String,
    pub content: String,
}

/// What the agent is asked to do in this turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Task {
    /// State a first position on the topic (round 1).
    Opening,
    /// Critique every other agent's latest position.
    Critique { targets: Vec<Position> },
    /// Revise `own` (the agent's latest position) in the light of the critiques others wrote.
    Revision {
        own: String,
        critiques: Vec<Position>,
    },
    /// A phase the protocol names that is none of the above: contribute to it
    /// given the transcript so far.
    Custom {
        phase: String,
        transcript: Vec<Position>,
    },
    /// Draft the consensus: a summary and key points from every active agent's latest position.
    Synthesis { positions: Vec<Position> },
    /// Vote on the drafted consensus given the agent's own latest position.
    Vote {
        summary: String,
        key_points: Vec<String>,
        own: String,
    },
}

impl Task {
    /// The phase name this task records under.
    pub fn phase(&self) -> &str {
        match self {
            Task::Opening => "opening",
            Task::Critique { .. } => "critique",
            Task::Revision { .. } => "revision",
            Task::Custom { phase, .. } => phase,
            Task::Synthesis { .. } => "synthesis",
            Task::Vote { .. } => "vote",
        }
    }
}

/// One request to one agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    pub topic: String,
    pub context: Option<String>,
    /// The agent's name as the debate lists it (`demo-a`, `claude`, `openai:gpt-4o`).
    pub agent: String,
    /// 1-based round; synthesis and votes carry the last round.
    pub round: u32,
    pub rounds: u32,
    pub task: Task,
}

/// What a call cost and who answered it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// `anthropic`, `openai`, `openrouter`, `mistral`, `gemini`, `xai`, `compatible` or `demo`.
    pub provider: String,
    pub model: String,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub latency_ms: u64,
    /// True when the answer came from the OpenRouter fallback.
    pub fallback: bool,
}

/// An agent's answer: its text and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub content: String,
    pub usage: Usage,
}
