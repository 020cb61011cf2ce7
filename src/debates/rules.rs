//! What makes a debate request acceptable: the checks and defaults that
//! turn what a caller asked for into the create command's protocol, shared
//! by the HTTP API and the `agon debate` command.

use agon_aggregates::debate::rules::{self, ProtocolRequest, Topic, same_agent};
use agon_aggregates::debate::{ConsensusMode, DebateError, Limits, MIN_AGENTS, Protocol};
use thiserror::Error;

use crate::agents::{Agents, Provider, ResolveError};
use crate::store::{CommandError, StoreError};

/// How long a topic and a context may be (`SERVICE_MAX_TOPIC_CHARS`,
/// `SERVICE_MAX_CONTEXT_CHARS`), in characters as sent, a search of the
/// list (`SERVICE_DEBATE_SEARCH_MAX_CHARS`), and how big a debate may be
/// (agents, rounds, phases: [`Limits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DebateLimits {
    pub topic_chars: usize,
    pub context_chars: usize,
    pub search_chars: usize,
    pub shape: Limits,
}

/// A debate as asked for, before checks.
#[derive(Debug, Clone, Default)]
pub struct NewDebate {
    pub topic: String,
    pub context: Option<String>,
    /// Empty with `auto_select`: the service picks.
    pub agents: Vec<String>,
    pub auto_select: bool,
    pub rounds: Option<u32>,
    pub phases: Option<Vec<String>>,
    pub threshold: Option<f64>,
    pub consensus: Option<ConsensusMode>,
    pub judge: Option<String>,
}

#[derive(Debug, Error)]
pub enum CreateError {
    /// A field's value cannot make a debate (a 422 naming the field).
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
    /// The request is valid but this deployment cannot serve it: an agent's
    /// provider has no key here (a 400 naming the missing variable).
    #[error("{field}: {reason}")]
    Unserved { field: String, reason: String },
    /// The aggregate refused the command (a rule the checks above missed).
    #[error(transparent)]
    Rejected(#[from] DebateError),
    #[error("event store: {0}")]
    Store(#[from] StoreError),
    /// Other writers kept the new debate's stream busy through every retry.
    #[error("the debate's stream stayed contended; retry shortly")]
    Contended,
}

impl From<CommandError<DebateError>> for CreateError {
    fn from(e: CommandError<DebateError>) -> Self {
        match e {
            CommandError::Rejected(e) => CreateError::Rejected(e),
            CommandError::Store(e) => CreateError::Store(e),
            CommandError::Contended { .. } => CreateError::Contended,
        }
    }
}

/// A broken debate rule, named by the request field it is about.
fn rule_broken(rule: DebateError) -> CreateError {
    invalid(rule.field().unwrap_or("debate"), rule.reason())
}

fn invalid(field: &str, reason: impl Into<String>) -> CreateError {
    CreateError::Invalid {
        field: field.to_owned(),
        reason: reason.into(),
    }
}

/// Agents chosen when the caller names none: one per configured provider
/// (up to three) when at least two are configured, else three demo agents.
pub fn auto_agents(agents: &Agents) -> Vec<String> {
    let real: Vec<String> = agents
        .providers()
        .into_iter()
        .filter(|p| p.configured && p.provider != Provider::Demo)
        .take(3)
        .map(|p| format!("{}:{}", p.provider.as_str(), p.default_model))
        .collect();
    if real.len() >= 2 {
        real
    } else {
        ["demo-a", "demo-b", "demo-c"].map(str::to_owned).to_vec()
    }
}

/// Checks a request and turns it into the create command's parts.
pub fn protocol_for(
    new: &mut NewDebate,
    agents: &Agents,
    limits: DebateLimits,
) -> Result<Protocol, CreateError> {
    new.topic = Topic::parse(&new.topic, limits.topic_chars)
        .map_err(rule_broken)?
        .into_inner();
    if new
        .context
        .as_ref()
        .is_some_and(|c| c.chars().count() > limits.context_chars)
    {
        return Err(invalid(
            "context",
            format!("must be at most {} characters", limits.context_chars),
        ));
    }
    new.agents = new.agents.iter().map(|a| a.trim().to_owned()).collect();
    if new.agents.is_empty() {
        if !new.auto_select {
            return Err(invalid(
                "agents",
                format!("must name at least {MIN_AGENTS} agents (or set auto_select)"),
            ));
        }
        new.agents = auto_agents(agents);
    }
    // A judge from outside the panel takes a seat of its own (one more than
    // the named agents), so that its vote is there to decide.
    let named = new.agents.len();
    if let Some(judge) = new.judge.as_mut() {
        *judge = judge.trim().to_owned();
        match new.agents.iter().find(|a| same_agent(a, judge)) {
            // The judge takes the seat's spelling, so the runner finds its vote.
            Some(seat) => *judge = seat.clone(),
            None => new.agents.push(judge.clone()),
        }
    }
    rules::check_seats(&new.agents, new.judge.as_deref(), &limits.shape).map_err(rule_broken)?;
    let request = ProtocolRequest {
        phases: new.phases.clone(),
        rounds: new.rounds,
        consensus: new.consensus,
        threshold: new.threshold,
        judge: new.judge.clone(),
    };
    let protocol = Protocol::parse(request, &new.agents, &limits.shape).map_err(rule_broken)?;
    for (i, name) in new.agents.iter().enumerate() {
        let field = if i < named { "agents" } else { "judge" };
        agents.resolve(name).map_err(|e| match e {
            ResolveError::MissingKey { .. } => CreateError::Unserved {
                field: field.to_owned(),
                reason: e.to_string(),
            },
            unknown @ ResolveError::Unknown { .. } => invalid(field, unknown.to_string()),
        })?;
    }
    Ok(protocol)
}
