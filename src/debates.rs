//! Starting debates and deciding who may see them, shared by the HTTP API
//! and the `agon debate` command.

use agon_aggregates::CommandMeta;
use agon_aggregates::debate::{
    ConsensusMode, DEFAULT_PHASES, DEFAULT_ROUNDS, DEFAULT_THRESHOLD, Debate, DebateCommand,
    DebateError, MAX_AGENTS, MAX_ROUNDS, Next, Protocol,
};
use agon_projections::Debates;
use thiserror::Error;

use crate::agents::{Agents, Provider};
use crate::app::App;
use crate::auth::Caller;
use crate::projection::Documents;
use crate::store::CommandError;

/// Longest topic accepted, in characters.
pub const MAX_TOPIC_CHARS: usize = 2_000;
/// Longest context accepted, in characters.
pub const MAX_CONTEXT_CHARS: usize = 20_000;
/// How long a create waits for the read model to list the new debate.
const READ_MODEL_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// Most phases a protocol may name.
pub const MAX_PHASES: usize = 8;

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
    /// The request cannot make a debate; the message says why (a 400).
    #[error("{0}")]
    Invalid(String),
    #[error("event store: {0}")]
    Store(String),
}

fn invalid(message: impl Into<String>) -> CreateError {
    CreateError::Invalid(message.into())
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
pub fn protocol_for(new: &mut NewDebate, agents: &Agents) -> Result<Protocol, CreateError> {
    new.topic = new.topic.trim().to_owned();
    if new.topic.is_empty() {
        return Err(invalid("topic must not be empty"));
    }
    if new.topic.chars().count() > MAX_TOPIC_CHARS {
        return Err(invalid(format!(
            "topic is longer than {MAX_TOPIC_CHARS} characters"
        )));
    }
    if new
        .context
        .as_ref()
        .is_some_and(|c| c.chars().count() > MAX_CONTEXT_CHARS)
    {
        return Err(invalid(format!(
            "context is longer than {MAX_CONTEXT_CHARS} characters"
        )));
    }
    new.agents = new.agents.iter().map(|a| a.trim().to_owned()).collect();
    if new.agents.is_empty() {
        if !new.auto_select {
            return Err(invalid(
                "agents must name at least one agent (or set auto_select)",
            ));
        }
        new.agents = auto_agents(agents);
    }
    if new.agents.len() > MAX_AGENTS {
        return Err(invalid(format!(
            "a debate seats at most {MAX_AGENTS} agents"
        )));
    }
    for (i, name) in new.agents.iter().enumerate() {
        if name.is_empty() {
            return Err(invalid("agent names must not be empty"));
        }
        if new.agents[..i].contains(name) {
            return Err(invalid(format!("agent {name} is listed twice")));
        }
        agents.resolve(name).map_err(|e| invalid(e.to_string()))?;
    }
    let rounds = new.rounds.unwrap_or(DEFAULT_ROUNDS);
    if !(1..=MAX_ROUNDS).contains(&rounds) {
        return Err(invalid(format!(
            "rounds must be between 1 and {MAX_ROUNDS}"
        )));
    }
    let phases = match &new.phases {
        None => DEFAULT_PHASES.map(str::to_owned).to_vec(),
        Some(phases) => {
            let phases: Vec<String> = phases
                .iter()
                .map(|p| p.trim().to_ascii_lowercase())
                .collect();
            if phases.is_empty() || phases.len() > MAX_PHASES {
                return Err(invalid(format!(
                    "protocol.phases must name 1 to {MAX_PHASES} phases"
                )));
            }
            let well_formed = |p: &String| {
                !p.is_empty()
                    && p.len() <= 40
                    && p.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            };
            if let Some(bad) = phases.iter().find(|p| !well_formed(p)) {
                return Err(invalid(format!(
                    "phase {bad:?} is not a phase name (letters, digits, - and _, up to 40)"
                )));
            }
            for (i, phase) in phases.iter().enumerate() {
                if phases[..i].contains(phase) {
                    return Err(invalid(format!("phase {phase} is listed twice")));
                }
            }
            phases
        }
    };
    let threshold = new.threshold.unwrap_or(DEFAULT_THRESHOLD);
    if !threshold.is_finite() || !(0.0..=1.0).contains(&threshold) {
        return Err(invalid(
            "protocol.consensus_threshold must be between 0 and 1",
        ));
    }
    if let Some(judge) = &new.judge
        && !new.agents.contains(judge)
    {
        return Err(invalid(format!("judge {judge} is not one of the agents")));
    }
    Ok(Protocol {
        phases,
        rounds,
        consensus: new.consensus.unwrap_or_default(),
        threshold,
        judge: new.judge.clone(),
    })
}

/// Creates a debate and, when a slot is free, starts it before returning.
pub async fn create(
    app: &App,
    mut new: NewDebate,
    caller: Option<&Caller>,
    request_id: Option<String>,
) -> Result<Debate, CreateError> {
    let protocol = protocol_for(&mut new, &app.agents)?;
    let id = uuid::Uuid::now_v7().to_string();
    let command = DebateCommand::Create {
        debate_id: id.clone(),
        topic: new.topic,
        context: new.context.filter(|c| !c.trim().is_empty()),
        agents: new.agents,
        protocol,
        created_by: caller.map(|c| c.user_id.clone()),
        org_id: caller.and_then(|c| c.org_id.clone()),
        at: app.clock.now(),
    };
    let meta = CommandMeta {
        request_id,
        ..CommandMeta::by(caller.map_or("cli", |c| c.user_id.as_str()))
    };
    app.runner.reserve(&id);
    let admission = app.runner.admission(&id).await;
    let start = admission.as_ref().map(|_| DebateCommand::Start {
        at: app.clock.now(),
    });
    let created = match app.log.load_held::<Debate>(&id).await {
        Ok(mut held) => app
            .log
            .run_then(
                &mut held,
                command,
                |state| start.clone().filter(|_| state.next() == Next::Start),
                meta,
            )
            .await
            .map(|_| held.state().clone()),
        Err(e) => Err(e),
    };
    let created = match created {
        Ok(created) => created,
        Err(e) => {
            app.runner.abandon(&id, admission).await;
            return Err(match e {
                CommandError::Rejected(DebateError::Invalid(m)) => CreateError::Invalid(m),
                other => CreateError::Store(other.to_string()),
            });
        }
    };
    metrics::counter!("service_debates_total").increment(1);
    let debate = app.runner.launch(admission, created).await;
    // Answer once the read model lists it, so that the creator (on any
    // replica) can read it straight away.
    Documents::new(app.log.clone())
        .wait_for::<Debates>(&id, READ_MODEL_WAIT, |_| true)
        .await
        .map_err(|e| CreateError::Store(e.to_string()))?;
    Ok(debate)
}

/// Whether `caller` may see `debate`: its creator, members of its
/// organization, and admins.
pub fn visible(caller: &Caller, debate: &Debate) -> bool {
    visible_to(
        caller,
        debate.created_by.as_deref(),
        debate.org_id.as_deref(),
    )
}

/// [`visible`] from a debate's creator and organization alone.
pub fn visible_to(caller: &Caller, created_by: Option<&str>, org_id: Option<&str>) -> bool {
    caller.is_admin()
        || created_by == Some(caller.user_id.as_str())
        || (caller.org_id.is_some() && org_id == caller.org_id.as_deref())
}
