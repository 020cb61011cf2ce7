//! Starting a debate: `/debates/new`, the form of `POST /api/debates`, its
//! checks and limits the service's own (a debate's own page is [`super::live`]).

use agon_aggregates::debate::{ConsensusMode, DEFAULT_PHASES, DEFAULT_THRESHOLD, Limits};
use askama::Template;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use super::{Chrome, Fields, render};
use crate::agents::Provider;
use crate::debates::{CreateError, Debates, NewDebate};
use crate::web::error::PageError;
use crate::web::session::SignedIn;

/// One agent the form offers.
#[derive(Debug)]
pub struct AgentOption {
    pub value: String,
    pub checked: bool,
    /// The variable that would make its provider available, when it is not.
    pub missing: Option<&'static str>,
    /// Why calls to it are refused right now (an open circuit breaker).
    pub breaker: Option<String>,
}

/// What the form shows: the values as sent (or the defaults).
#[derive(Debug)]
pub struct FormValues {
    pub topic: String,
    pub context: String,
    pub other_agents: String,
    pub rounds: String,
    pub phases: String,
    pub consensus: String,
    pub threshold: String,
    pub judge: String,
}

impl FormValues {
    /// What a request naming nothing gets, within `limits`.
    fn defaults(limits: &Limits) -> Self {
        Self {
            topic: String::new(),
            context: String::new(),
            other_agents: String::new(),
            rounds: limits.default_rounds().to_string(),
            phases: DEFAULT_PHASES.join(", "),
            consensus: ConsensusMode::default().as_str().to_owned(),
            threshold: DEFAULT_THRESHOLD.to_string(),
            judge: String::new(),
        }
    }
}

#[derive(Template)]
#[template(path = "debate_new.html")]
struct NewDebatePage {
    chrome: Chrome,
    agents: Vec<AgentOption>,
    /// How many of them are offered disabled, folded away below the others.
    unconfigured: usize,
    /// Every agent whose breaker is open, and for how many more seconds.
    open_breakers: Vec<(String, u64)>,
    /// Each consensus mode with what it decides by.
    modes: Vec<(&'static str, &'static str)>,
    values: FormValues,
    errors: Vec<String>,
    max_rounds: u32,
    topic_chars: usize,
    context_chars: usize,
}

fn form_page(
    debates: &Debates,
    chrome: Chrome,
    chosen: &[String],
    values: FormValues,
    errors: Vec<String>,
) -> NewDebatePage {
    let agents = debates.agents();
    let open: Vec<_> = agents
        .breakers()
        .into_iter()
        .filter(|b| b.state == "open")
        .collect();
    let options = agents
        .providers()
        .into_iter()
        .flat_map(|p| {
            let names: Vec<String> = if p.provider == Provider::Demo {
                ["demo-a", "demo-b", "demo-c"].map(str::to_owned).to_vec()
            } else {
                vec![format!("{}:{}", p.provider.as_str(), p.default_model)]
            };
            let missing = (!p.configured).then_some(p.variable).flatten();
            names.into_iter().map(move |value| (value, missing))
        })
        .map(|(value, missing)| AgentOption {
            checked: chosen.contains(&value),
            breaker: open.iter().find(|b| b.agent == value).map(|b| {
                format!(
                    "circuit open: calls refused for {} more seconds",
                    b.retry_in_seconds.unwrap_or_default()
                )
            }),
            value,
            missing,
        })
        .collect::<Vec<_>>();
    let limits = debates.limits();
    NewDebatePage {
        chrome,
        unconfigured: options.iter().filter(|o| o.missing.is_some()).count(),
        agents: options,
        open_breakers: open
            .iter()
            .map(|b| (b.agent.clone(), b.retry_in_seconds.unwrap_or_default()))
            .collect(),
        modes: ConsensusMode::ALL
            .iter()
            .map(|&m| (m.as_str(), decides_by(m)))
            .collect(),
        values,
        errors,
        max_rounds: limits.shape.rounds,
        topic_chars: limits.topic_chars,
        context_chars: limits.context_chars,
    }
}

/// What a consensus mode decides by, as the start page explains it beside
/// its choice (the README's "Consensus" has the arithmetic).
fn decides_by(mode: ConsensusMode) -> &'static str {
    match mode {
        ConsensusMode::Majority => "the agreeing share reaches the threshold",
        ConsensusMode::Supermajority => "the agreeing share reaches the threshold and two thirds",
        ConsensusMode::Unanimous => "every vote agrees, with or without modifications",
        ConsensusMode::Judge => "the judge's vote decides (without one, as majority)",
        ConsensusMode::Weighted => "as majority, each vote weighted by its agent's ELO",
    }
}

/// `GET /debates/new`.
pub async fn form(
    State(debates): State<Debates>,
    SignedIn(caller): SignedIn,
) -> Result<Response, PageError> {
    let chrome = Chrome::for_caller(Some(&caller), "new");
    render(&form_page(
        &debates,
        chrome,
        &[],
        FormValues::defaults(&debates.limits().shape),
        Vec::new(),
    ))
}

/// The form's fields as the service's request; the first field that does
/// not parse as its type is named.
fn new_debate(fields: &Fields, chosen: Vec<String>, max_rounds: u32) -> Result<NewDebate, String> {
    let rounds = fields
        .get("rounds")
        .map(|r| {
            r.parse::<u32>()
                .ok()
                .filter(|r| (1..=max_rounds).contains(r))
                .ok_or_else(|| format!("rounds: must be a whole number between 1 and {max_rounds}"))
        })
        .transpose()?;
    let threshold = fields
        .get("threshold")
        .map(|t| {
            t.parse::<f64>()
                .ok()
                .filter(|t| t.is_finite())
                .ok_or_else(|| "threshold: must be a number between 0 and 1".to_owned())
        })
        .transpose()?;
    let consensus = fields
        .get("consensus")
        .map(|c| ConsensusMode::parse(c).ok_or_else(|| format!("consensus: unknown mode {c:?}")))
        .transpose()?;
    let phases = fields.get("phases").map(|p| {
        p.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect()
    });
    Ok(NewDebate {
        topic: fields.get("topic").unwrap_or_default().to_owned(),
        context: fields.get("context").map(str::to_owned),
        auto_select: chosen.is_empty(),
        agents: chosen,
        rounds,
        phases,
        threshold,
        consensus,
        judge: fields.get("judge").map(str::to_owned),
    })
}

/// `POST /debates/new`: starts the debate and goes to its page (303), or
/// shows the form again with what the service refused.
pub async fn create(
    State(debates): State<Debates>,
    SignedIn(caller): SignedIn,
    body: Bytes,
) -> Result<Response, PageError> {
    let fields = Fields::parse(&body);
    let picked = fields.all("agents");
    let other = fields.get("other_agents").unwrap_or_default().to_owned();
    let mut chosen = picked.clone();
    chosen.extend(
        other
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned),
    );
    let shape = debates.limits().shape;
    let refused = match new_debate(&fields, chosen, shape.rounds) {
        Ok(new) => match debates.create(new, Some(&caller), None).await {
            Ok(debate) => {
                return Ok(Redirect::to(&format!("/debates/{}", debate.id)).into_response());
            }
            Err(e @ (CreateError::Invalid { .. } | CreateError::Unserved { .. })) => e.to_string(),
            Err(CreateError::Rejected(rule)) => rule.to_string(),
            Err(e @ CreateError::Contended) => return Err(PageError::Unavailable(e.to_string())),
            Err(CreateError::Store(e)) => return Err(PageError::internal(e)),
        },
        Err(reason) => reason,
    };
    let default = FormValues::defaults(&shape);
    let value = |name: &str, or: String| fields.get(name).map_or(or, str::to_owned);
    let values = FormValues {
        topic: value("topic", default.topic),
        context: value("context", default.context),
        other_agents: other,
        rounds: value("rounds", default.rounds),
        phases: value("phases", default.phases),
        consensus: value("consensus", default.consensus),
        threshold: value("threshold", default.threshold),
        judge: value("judge", default.judge),
    };
    let chrome = Chrome::for_caller(Some(&caller), "new");
    let page = form_page(&debates, chrome, &picked, values, vec![refused]);
    Ok((StatusCode::UNPROCESSABLE_ENTITY, render(&page)?).into_response())
}
