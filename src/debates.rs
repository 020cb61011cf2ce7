//! Starting debates and deciding who may see them, shared by the HTTP API
//! and the `agon debate` command.

use agon_aggregates::CommandMeta;
use agon_aggregates::debate::{
    ConsensusMode, DEFAULT_PHASES, DEFAULT_ROUNDS, DEFAULT_THRESHOLD, Debate, DebateCommand,
    DebateError, MAX_AGENTS, MAX_ROUNDS, MIN_AGENTS, Next, Protocol,
};
use agon_projections::accounts::AccountView;
use agon_projections::{Accounts, Debates};
use thiserror::Error;

use crate::agents::{Agents, Provider, ResolveError};
use crate::app::App;
use crate::auth::Caller;
use crate::projection::Documents;
use crate::store::{CommandError, StoreError};

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
    /// A field's value cannot make a debate (a 422 naming the field).
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
    /// The request is valid but this deployment cannot serve it: an agent's
    /// provider has no key here (a 400 naming the missing variable).
    #[error("{field}: {reason}")]
    Unserved { field: String, reason: String },
    #[error("event store: {0}")]
    Store(String),
}

fn invalid(field: &str, reason: impl Into<String>) -> CreateError {
    CreateError::Invalid {
        field: field.to_owned(),
        reason: reason.into(),
    }
}

/// The form agent names are compared in: seats and ratings treat `Claude`
/// and `claude` as one agent. Debates keep names as written, since some
/// providers' model ids are case-sensitive.
pub fn canonical_agent(name: &str) -> String {
    name.trim().to_lowercase()
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
    // The limit counts what was sent, spaces included.
    if new.topic.chars().count() > MAX_TOPIC_CHARS {
        return Err(invalid(
            "topic",
            format!("must be at most {MAX_TOPIC_CHARS} characters"),
        ));
    }
    new.topic = new.topic.trim().to_owned();
    if new.topic.is_empty() {
        return Err(invalid("topic", "must not be empty"));
    }
    if new
        .context
        .as_ref()
        .is_some_and(|c| c.chars().count() > MAX_CONTEXT_CHARS)
    {
        return Err(invalid(
            "context",
            format!("must be at most {MAX_CONTEXT_CHARS} characters"),
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
    if !(MIN_AGENTS..=MAX_AGENTS).contains(&new.agents.len()) {
        return Err(invalid(
            "agents",
            format!(
                "a debate seats {MIN_AGENTS} to {MAX_AGENTS} agents, not {}",
                new.agents.len()
            ),
        ));
    }
    // A judge from outside the panel takes a seat of its own (one more than
    // the named agents), so that its vote is there to decide.
    let named = new.agents.len();
    if let Some(judge) = new.judge.as_mut() {
        *judge = judge.trim().to_owned();
        match new
            .agents
            .iter()
            .find(|a| canonical_agent(a) == canonical_agent(judge))
        {
            // The judge takes the seat's spelling, so the runner finds its vote.
            Some(seat) => *judge = seat.clone(),
            None => new.agents.push(judge.clone()),
        }
    }
    for (i, name) in new.agents.iter().enumerate() {
        let field = if i < named { "agents" } else { "judge" };
        if name.is_empty() {
            return Err(invalid(field, "agent names must not be empty"));
        }
        let canonical = canonical_agent(name);
        if let Some(earlier) = new.agents[..i]
            .iter()
            .find(|a| canonical_agent(a) == canonical)
        {
            return Err(invalid(
                "agents",
                format!("agent {name} is listed twice (as {earlier}; names ignore case)"),
            ));
        }
        agents.resolve(name).map_err(|e| match e {
            ResolveError::MissingKey { .. } => CreateError::Unserved {
                field: field.to_owned(),
                reason: e.to_string(),
            },
            unknown @ ResolveError::Unknown { .. } => invalid(field, unknown.to_string()),
        })?;
    }
    let rounds = new.rounds.unwrap_or(DEFAULT_ROUNDS);
    if !(1..=MAX_ROUNDS).contains(&rounds) {
        return Err(invalid(
            "rounds",
            format!("must be between 1 and {MAX_ROUNDS}"),
        ));
    }
    let phases = match &new.phases {
        None => DEFAULT_PHASES.map(str::to_owned).to_vec(),
        Some(phases) => {
            let phases = phases.clone();
            if phases.is_empty() || phases.len() > MAX_PHASES {
                return Err(invalid(
                    "protocol.phases",
                    format!("must name 1 to {MAX_PHASES} phases"),
                ));
            }
            let well_formed = |p: &String| {
                !p.is_empty()
                    && p.len() <= 40
                    && p.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-'
                    })
            };
            if let Some(bad) = phases.iter().find(|p| !well_formed(p)) {
                return Err(invalid(
                    "protocol.phases",
                    format!(
                        "{bad:?} is not a phase name (lower-case letters, digits, - and _, up to 40)"
                    ),
                ));
            }
            for (i, phase) in phases.iter().enumerate() {
                if phases[..i].contains(phase) {
                    return Err(invalid(
                        "protocol.phases",
                        format!("phase {phase} is listed twice"),
                    ));
                }
            }
            phases
        }
    };
    let threshold = new.threshold.unwrap_or(DEFAULT_THRESHOLD);
    if !threshold.is_finite() || !(0.0..=1.0).contains(&threshold) {
        return Err(invalid(
            "protocol.consensus_threshold",
            "must be between 0 and 1",
        ));
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
                CommandError::Rejected(DebateError::Invalid(m)) => invalid("debate", m),
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
    crate::projection::reads::wait_listed(&app.log, &id, READ_MODEL_WAIT)
        .await
        .map_err(|e| CreateError::Store(e.to_string()))?;
    Ok(debate)
}

/// Whether `caller` may see `debate`: its creator, members of its
/// creator's organization, and admins. Membership is read from the
/// `accounts` read model as it is now, not from the organization a token
/// named when the debate was created (README "Who sees a debate").
pub async fn visible(app: &App, caller: &Caller, debate: &Debate) -> Result<bool, StoreError> {
    visible_to(
        app,
        caller,
        debate.created_by.as_deref(),
        debate.org_id.as_deref(),
    )
    .await
}

/// [`visible`] from a debate's creator and the organization recorded at
/// creation (used only for creators without an account, such as callers
/// identified by a trusted proxy's headers).
pub async fn visible_to(
    app: &App,
    caller: &Caller,
    created_by: Option<&str>,
    org_id: Option<&str>,
) -> Result<bool, StoreError> {
    if caller.is_admin() || created_by == Some(caller.user_id.as_str()) {
        return Ok(true);
    }
    let Some(creator) = created_by else {
        return Ok(false);
    };
    let documents = Documents::new(app.log.clone());
    let current_org = |account: Option<AccountView>, fallback: Option<&str>| match account {
        Some(account) => account.org_id,
        None => fallback.map(str::to_owned),
    };
    let theirs = current_org(documents.get::<Accounts>(creator).await?, org_id);
    let Some(theirs) = theirs else {
        return Ok(false);
    };
    let mine = current_org(
        documents.get::<Accounts>(&caller.user_id).await?,
        caller.org_id.as_deref(),
    );
    Ok(mine.as_deref() == Some(theirs.as_str()))
}
