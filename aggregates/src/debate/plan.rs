//! The order of a debate's work, derived from its protocol and what is
//! recorded: the runner asks [`Debate::next`] and does exactly that.
//!
//! Each round runs the protocol's phases in order; `opening` runs in the
//! first round only. After the last round one agent drafts the synthesis
//! (the judge in `judge` mode, else the first active agent) and every
//! active agent votes; `vote` and `synthesis` in `phases` are therefore not
//! round phases. An agent that failed takes no further turns.

use super::consensus::ConsensusMode;
use super::state::{Debate, DebateStatus};

/// A unit of the debate's work: every active agent's turn in it may run at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    Turns { round: u32, phase: String },
    Synthesis,
    Vote,
}

/// What a debate needs next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Pending: it needs a runner to start it.
    Start,
    /// These agents still owe their turn in this stage.
    Work { stage: Stage, agents: Vec<String> },
    /// Every vote is in: compute the consensus.
    Conclude,
    /// Nothing until someone resumes it.
    Paused,
    /// Completed or failed.
    Finished,
}

impl Debate {
    /// The stages of the debate in order.
    pub fn stages(&self) -> Vec<Stage> {
        let Some(protocol) = &self.protocol else {
            return Vec::new();
        };
        let mut stages = Vec::new();
        for round in 1..=protocol.rounds {
            for phase in &protocol.phases {
                let skip = matches!(phase.as_str(), "vote" | "synthesis")
                    || (phase == "opening" && round > 1);
                if !skip {
                    stages.push(Stage::Turns {
                        round,
                        phase: phase.clone(),
                    });
                }
            }
        }
        stages.push(Stage::Synthesis);
        stages.push(Stage::Vote);
        stages
    }

    /// Who drafts the synthesis: the judge (in `judge` mode, while active),
    /// else the first active agent.
    pub fn synthesizer(&self) -> Option<String> {
        let judge = self
            .protocol
            .as_ref()
            .filter(|p| p.consensus == ConsensusMode::Judge)
            .and_then(|p| p.judge.clone().or_else(|| self.agents.first().cloned()));
        let mut active = self.active_agents();
        match judge {
            Some(judge) if self.active_agents().any(|a| *a == judge) => Some(judge),
            _ => active.next().cloned(),
        }
    }

    /// Active agents that still owe a turn in `stage`.
    pub fn missing(&self, stage: &Stage) -> Vec<String> {
        match stage {
            Stage::Turns { round, phase } => self
                .active_agents()
                .filter(|agent| {
                    !self
                        .messages
                        .iter()
                        .any(|m| m.round == *round && &m.phase == phase && &m.agent == *agent)
                })
                .cloned()
                .collect(),
            Stage::Synthesis => match (&self.synthesis, self.synthesizer()) {
                (None, Some(agent)) => vec![agent],
                _ => Vec::new(),
            },
            Stage::Vote => self
                .active_agents()
                .filter(|agent| !self.votes.iter().any(|v| &v.agent == *agent))
                .cloned()
                .collect(),
        }
    }

    pub fn next(&self) -> Next {
        match self.status {
            DebateStatus::Pending => Next::Start,
            DebateStatus::Paused => Next::Paused,
            DebateStatus::Completed | DebateStatus::Failed => Next::Finished,
            DebateStatus::Running => match self.current_stage() {
                Some(stage) => Next::Work {
                    agents: self.missing(&stage),
                    stage,
                },
                None => Next::Conclude,
            },
        }
    }

    /// The first stage with work left, whatever the status (a paused debate
    /// is still in its stage); none once finished or when only the
    /// conclusion is left.
    pub fn current_stage(&self) -> Option<Stage> {
        if self.status.is_finished() {
            return None;
        }
        self.stages()
            .into_iter()
            .find(|stage| !self.missing(stage).is_empty())
    }

    /// The last round the debate runs.
    pub fn last_round(&self) -> u32 {
        self.protocol.as_ref().map_or(0, |p| p.rounds)
    }
}
