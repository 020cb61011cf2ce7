//! `POST /api/debates` in its three body forms (current, v1, v2) and the
//! deprecated paths that lead to it.

use agon_aggregates::Refusal;
use agon_aggregates::debate::ConsensusMode;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use crate::agents::{Agents, ResolveError};
use crate::auth::Caller;
use crate::debates::{CreateError, Debates, NewDebate};
use crate::http::error::ApiError;
use crate::http::extract::ApiJson;
use crate::http::whole;

/// `protocol` of the current create form.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProtocolBody {
    /// Phase names in order; default opening, critique, revision, vote. At
    /// most `SERVICE_MAX_PHASES` (8), each up to `SERVICE_MAX_PHASE_CHARS`
    /// (40).
    pub phases: Option<Vec<String>>,
    /// The agreeing share that counts as consensus, 0 to 1; default 0.6.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub consensus_threshold: Option<f64>,
    /// 1 to `SERVICE_MAX_ROUNDS` (12).
    #[schema(minimum = 1)]
    #[serde(default, deserialize_with = "whole::optional")]
    pub rounds: Option<i64>,
    /// majority (default), supermajority, unanimous, judge or weighted.
    pub consensus: Option<String>,
    /// The deciding agent in judge mode (default: the first agent); one not
    /// among the agents sits as one more (past the most named, too).
    pub judge: Option<String>,
}

/// A new debate. `topic` (or v2 `task`) is needed; `rounds` (or v1
/// `max_rounds`, or `protocol.rounds`) defaults to 3, at most
/// `SERVICE_MAX_ROUNDS` (12; the schema states the deployment's). Two
/// spellings of one setting are given once (equal values are also taken).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDebateBody {
    /// At most `SERVICE_MAX_TOPIC_CHARS` (2000) characters as sent.
    #[schema(min_length = 1)]
    pub topic: Option<String>,
    /// v2 name of `topic`.
    #[schema(min_length = 1)]
    pub task: Option<String>,
    pub context: Option<String>,
    /// Agent names: `demo-<name>`, a provider alias (`claude`, `gpt-4o`) or
    /// `provider:model`, at least 2, or none to let the service pick. The
    /// pattern lists the names this deployment seats, in lower case; the
    /// service also takes other cases (names are compared ignoring case)
    /// and trims surrounding spaces. At most `SERVICE_MAX_AGENTS` (12).
    pub agents: Option<Vec<String>>,
    // Signed, so that `-1` is refused as out of range exactly like `0`.
    #[schema(minimum = 1)]
    #[serde(default, deserialize_with = "whole::optional")]
    pub rounds: Option<i64>,
    /// v1 name of `rounds`.
    #[schema(minimum = 1)]
    #[serde(default, deserialize_with = "whole::optional")]
    pub max_rounds: Option<i64>,
    pub protocol: Option<ProtocolBody>,
    /// v2: majority (default), supermajority, unanimous, judge or weighted.
    pub consensus: Option<String>,
    /// v2: pick agents when none are named (default true).
    pub auto_select: Option<bool>,
    /// As `protocol.judge`.
    pub judge: Option<String>,
}

/// The created debate.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedDebate {
    /// Always true (the upstream SDK's create response requires it).
    pub success: bool,
    pub id: String,
    /// The same value as `id`.
    pub debate_id: String,
    /// `running` when it started at once, `pending` while it waits for a slot.
    pub status: String,
    pub topic: String,
    pub agents: Vec<String>,
    pub rounds: u32,
    pub created_at: DateTime<Utc>,
}

/// A 422 naming `field` ([`ApiError::field`]).
pub(super) fn field_error(field: &str, reason: impl Into<String>) -> ApiError {
    ApiError::field(field, reason)
}

impl From<CreateError> for ApiError {
    fn from(error: CreateError) -> Self {
        match error {
            CreateError::Invalid { field, reason } => ApiError::field(&field, reason),
            CreateError::Unserved { field, reason } => ApiError::BadRequest {
                message: format!("{field}: {reason}"),
                details: json!({"field": field, "reason": reason}),
            },
            CreateError::Rejected(rule) => ApiError::rejected(&Refusal::of(&rule), rule.field()),
            CreateError::Store(e) => e.into(),
            e @ CreateError::Contended => ApiError::Unavailable(e.to_string()),
        }
    }
}

/// Two spellings of one field: a body gives at most one (`null` is not
/// given). `second` is the field named when both are there.
fn one_of<T>(a: Option<T>, b: Option<T>, first: &str, second: &str) -> Result<Option<T>, ApiError> {
    match (a, b) {
        (Some(_), Some(_)) => Err(field_error(
            second,
            format!("is another spelling of {first}: give one of them"),
        )),
        (a, b) => Ok(a.or(b)),
    }
}

/// An agent name in the spelling the schema documents for this deployment;
/// otherwise the reason, as the resolver gives it when it has one.
fn documented_name(agents: &Agents, field: &str, name: &str) -> Result<(), ApiError> {
    if agents.spelled_as_documented(name) {
        return Ok(());
    }
    Err(match agents.resolve(name.trim()) {
        Err(e @ ResolveError::MissingKey { .. }) => ApiError::BadRequest {
            message: format!("{field}: {e}"),
            details: json!({"field": field, "reason": e.to_string()}),
        },
        Err(e @ ResolveError::Unknown { .. }) => field_error(field, e.to_string()),
        Ok(_) => field_error(
            field,
            format!(
                "write agent {name:?} in lower case without surrounding spaces ({:?}); \
                 only the model of provider:model keeps its case",
                name.trim().to_lowercase()
            ),
        ),
    })
}

impl CreateDebateBody {
    fn into_new(self, agents: &Agents, max_rounds: u32) -> Result<NewDebate, ApiError> {
        let protocol = self.protocol.unwrap_or_default();
        for name in self.agents.iter().flatten() {
            documented_name(agents, "agents", name)?;
        }
        let judge = one_of(self.judge, protocol.judge, "judge", "protocol.judge")?;
        if let Some(judge) = &judge {
            documented_name(agents, "judge", judge)?;
        }
        let topic = one_of(self.topic, self.task, "topic", "task")?
            .ok_or_else(|| field_error("topic", "is required (or task)"))?;
        let rounds = one_of(self.rounds, self.max_rounds, "rounds", "max_rounds")?;
        let rounds = one_of(rounds, protocol.rounds, "rounds", "protocol.rounds")?
            .map(|r| {
                u32::try_from(r)
                    .ok()
                    .filter(|r| (1..=max_rounds).contains(r))
                    .ok_or_else(|| {
                        field_error("rounds", format!("must be between 1 and {max_rounds}"))
                    })
            })
            .transpose()?;
        let consensus = one_of(
            self.consensus,
            protocol.consensus,
            "consensus",
            "protocol.consensus",
        )?
        .map(|text| {
            // As documented: the lower-case names only.
            ConsensusMode::parse(&text)
                .filter(|mode| mode.as_str() == text)
                .ok_or_else(|| {
                field_error(
                    "consensus",
                    format!(
                        "{text:?} is not one of majority, supermajority, unanimous, judge, weighted"
                    ),
                )
            })
        })
        .transpose()?;
        Ok(NewDebate {
            topic,
            context: self.context,
            agents: self.agents.unwrap_or_default(),
            auto_select: self.auto_select.unwrap_or(true),
            rounds,
            phases: protocol.phases,
            threshold: protocol.consensus_threshold,
            consensus,
            judge,
        })
    }
}

/// Creates a debate; it starts at once when a slot is free.
#[utoipa::path(post, path = "/api/debates", tag = "debates",
    request_body = CreateDebateBody,
    responses((status = 201, body = CreatedDebate),
        (status = 400, description = "Malformed JSON, or an agent whose provider has no key here"),
        (status = 422, description = "A field is missing, of the wrong type or out of range (fewer than 2 agents, a duplicate agent, rounds outside 1 to 12, a bad protocol); the message and `details` name the field")))]
pub async fn create_debate(
    State(debates): State<Debates>,
    caller: Caller,
    ApiJson(body): ApiJson<CreateDebateBody>,
) -> Result<(StatusCode, Json<CreatedDebate>), ApiError> {
    let new = body.into_new(debates.agents(), debates.limits().shape.rounds)?;
    let request_id = crate::request::current_request_id();
    let debate = debates.create(new, Some(&caller), request_id).await?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedDebate {
            success: true,
            id: debate.id.clone(),
            debate_id: debate.id.clone(),
            status: debate.status.as_str().to_owned(),
            topic: debate.topic.clone(),
            rounds: debate.last_round(),
            agents: debate.agents,
            created_at: debate.created_at.unwrap_or_default(),
        }),
    ))
}
