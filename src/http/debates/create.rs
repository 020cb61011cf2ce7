//! `POST /api/debates` in its three body forms (current, v1, v2) and the
//! deprecated paths that lead to it.

use agon_aggregates::debate::ConsensusMode;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use crate::app::App;
use crate::auth::Caller;
use crate::debates::{self, CreateError, NewDebate};
use crate::http::error::ApiError;
use crate::http::extract::ApiJson;

/// `protocol` of the current create form.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProtocolBody {
    /// Phase names in order; default opening, critique, revision, vote.
    #[schema(max_items = 8)]
    pub phases: Option<Vec<String>>,
    /// The agreeing share that counts as consensus, 0 to 1; default 0.6.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub consensus_threshold: Option<f64>,
    #[schema(minimum = 1, maximum = 12)]
    pub rounds: Option<u32>,
    /// majority (default), supermajority, unanimous, judge or weighted.
    pub consensus: Option<String>,
    /// The deciding agent in judge mode (default: the first agent).
    pub judge: Option<String>,
}

/// A new debate. `topic` (or v2 `task`) and `agents` are needed; `rounds`
/// (or v1 `max_rounds`) defaults to 3, at most 12.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateDebateBody {
    #[schema(min_length = 1, max_length = 2000)]
    pub topic: Option<String>,
    /// v2 name of `topic`.
    #[schema(min_length = 1, max_length = 2000)]
    pub task: Option<String>,
    pub context: Option<String>,
    /// Agent names: `demo-<name>`, a provider alias (`claude`, `gpt-4o`) or `provider:model`.
    #[schema(max_items = 12)]
    pub agents: Option<Vec<String>>,
    #[schema(minimum = 1, maximum = 12)]
    pub rounds: Option<u32>,
    /// v1 name of `rounds`.
    #[schema(minimum = 1, maximum = 12)]
    pub max_rounds: Option<u32>,
    pub protocol: Option<ProtocolBody>,
    /// v2: majority (default), supermajority, unanimous, judge or weighted.
    pub consensus: Option<String>,
    /// v2: pick agents when none are named (default true).
    pub auto_select: Option<bool>,
    pub judge: Option<String>,
}

/// The created debate.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedDebate {
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

fn agree<T: PartialEq + std::fmt::Display>(
    a: Option<T>,
    b: Option<T>,
    names: &str,
) -> Result<Option<T>, ApiError> {
    match (a, b) {
        (Some(a), Some(b)) if a != b => Err(ApiError::bad_request(format!(
            "{names} are the same field and disagree ({a} and {b})"
        ))),
        (a, b) => Ok(a.or(b)),
    }
}

impl CreateDebateBody {
    fn into_new(self) -> Result<NewDebate, ApiError> {
        let protocol = self.protocol.unwrap_or_default();
        let topic = agree(self.topic, self.task, "topic and task")?
            .ok_or_else(|| ApiError::bad_request("topic (or task) is required"))?;
        let rounds = agree(self.rounds, self.max_rounds, "rounds and max_rounds")?;
        let rounds = agree(rounds, protocol.rounds, "rounds and protocol.rounds")?;
        let consensus = agree(self.consensus, protocol.consensus, "consensus and protocol.consensus")?
            .map(|text| {
                ConsensusMode::parse(&text).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "consensus {text:?} is not one of majority, supermajority, unanimous, judge, weighted"
                    ))
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
            judge: agree(self.judge, protocol.judge, "judge and protocol.judge")?,
        })
    }
}

/// Creates a debate; it starts at once when a slot is free.
#[utoipa::path(post, path = "/api/debates", tag = "debates",
    request_body = CreateDebateBody,
    responses((status = 201, body = CreatedDebate),
        (status = 400, description = "Unusable request: no topic, unknown agent, missing provider key, bad protocol")))]
pub async fn create_debate(
    State(app): State<App>,
    caller: Caller,
    headers: HeaderMap,
    ApiJson(body): ApiJson<CreateDebateBody>,
) -> Result<(StatusCode, Json<CreatedDebate>), ApiError> {
    let new = body.into_new()?;
    let request_id = headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let debate = debates::create(&app, new, Some(&caller), request_id)
        .await
        .map_err(|e| match e {
            CreateError::Invalid(message) => ApiError::BadRequest {
                message,
                details: json!({}),
            },
            CreateError::Store(cause) => ApiError::Internal(cause.into()),
        })?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedDebate {
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
