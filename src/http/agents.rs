//! §4.3 agent operations: provider and circuit-breaker health, and the
//! ELO leaderboard kept by the `leaderboard` projection.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::ApiQuery;
use super::paging::Paging;
use super::routes::{RouteSpec, Routes};
use crate::agents::Agents;
use crate::agents::{BreakerStatus, ProviderStatus};
use crate::debates::Debates;
use crate::http::shared::Shared;
use crate::views::leaderboard::{self, Ranked};

pub fn routes() -> Routes {
    Routes::new()
        .add(routes!(agents_health), RouteSpec::new())
        .add(
            routes!(circuit_breakers),
            RouteSpec::new()
                .also_at("/api/circuit-breakers")
                .also_at("/api/system/circuit-breakers"),
        )
        .add(
            routes!(leaderboard),
            RouteSpec::new().v2_at("/api/v2/agents/leaderboard"),
        )
        .add(
            routes!(rankings),
            RouteSpec::new()
                .v2_at("/api/v2/agents/rankings")
                .also_at("/api/rankings"),
        )
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AgentsHealth {
    /// `healthy`, or `degraded` while a breaker is open.
    pub status: String,
    /// Demo agents need no key and are always available.
    pub demo_available: bool,
    /// Each provider: configured or not (and the variable it needs), default model, base URL.
    #[schema(value_type = Vec<Object>)]
    pub providers: Vec<ProviderStatus>,
    #[schema(value_type = Vec<Object>)]
    pub circuit_breakers: Vec<BreakerStatus>,
    /// Agents whose breaker is open.
    pub open: Vec<String>,
}

fn open_breakers(breakers: &[BreakerStatus]) -> Vec<String> {
    breakers
        .iter()
        .filter(|b| b.state == "open")
        .map(|b| b.agent.clone())
        .collect()
}

/// Providers and their keys, and every agent's circuit breaker.
#[utoipa::path(get, path = "/api/agents/health", tag = "operations",
    responses((status = 200, body = AgentsHealth)))]
async fn agents_health(State(agents): State<Agents>) -> Json<AgentsHealth> {
    let breakers = agents.breakers();
    let open = open_breakers(&breakers);
    Json(AgentsHealth {
        status: if open.is_empty() {
            "healthy"
        } else {
            "degraded"
        }
        .to_owned(),
        demo_available: true,
        providers: agents.providers(),
        circuit_breakers: breakers,
        open,
    })
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CircuitBreakers {
    /// One per agent that has made a call: state closed, half_open or open.
    #[schema(value_type = Vec<Object>)]
    pub circuit_breakers: Vec<BreakerStatus>,
    pub open: Vec<String>,
    pub total: usize,
}

/// Every agent's circuit breaker (5 failures open it, 60 s to half-open, 2 successes close it).
#[utoipa::path(get, path = "/api/agents/circuit-breakers", tag = "operations",
    responses((status = 200, body = CircuitBreakers)))]
async fn circuit_breakers(State(agents): State<Agents>) -> Json<CircuitBreakers> {
    let breakers = agents.breakers();
    Json(CircuitBreakers {
        open: open_breakers(&breakers),
        total: breakers.len(),
        circuit_breakers: breakers,
    })
}

/// Unknown parameters are ignored (not refused): clients send filters this
/// service does not keep (`view`, `domain`, `period`, `sort_by`, `order`),
/// and the ranking by ELO answers them all.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RankingQuery {
    /// How many agents, default 20, at most SERVICE_MAX_PAGE_SIZE (default 100).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    /// How many of the best to skip (default 0).
    #[param(minimum = 0)]
    pub offset: Option<i32>,
    /// Only agents with at least this many debates (default 0).
    #[param(minimum = 0)]
    pub min_debates: Option<i64>,
    /// Accepted and ignored (one overall ranking).
    pub view: Option<String>,
    /// Accepted and ignored (one overall ranking).
    pub domain: Option<String>,
    /// Accepted and ignored (one overall ranking).
    pub period: Option<String>,
    /// Accepted and ignored (always by ELO).
    pub sort_by: Option<String>,
    /// Accepted and ignored (always best first).
    pub order: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Rankings {
    #[schema(value_type = Vec<Ranked>)]
    pub agents: Shared<Ranked>,
    /// The same list as `agents` (the name some clients read).
    #[schema(value_type = Vec<Ranked>)]
    pub rankings: Shared<Ranked>,
    /// The same list again, where paginating clients read a page.
    #[schema(value_type = Vec<Ranked>)]
    pub items: Shared<Ranked>,
    /// Every ranked agent that passes `min_debates`, over all pages.
    pub total: usize,
    pub limit: u32,
    pub offset: u32,
}

async fn ranked(
    debates: &Debates,
    paging: Paging,
    query: RankingQuery,
) -> Result<Rankings, ApiError> {
    let limit = paging.limit(query.limit)?;
    let offset = Paging::offset(query.offset)?;
    let min_debates = u64::try_from(query.min_debates.unwrap_or(0))
        .map_err(|_| ApiError::bad_request("min_debates must not be negative"))?;
    let ranked = leaderboard::ranked(&*debates.leaderboard().await?, min_debates);
    let total = ranked.len();
    let agents = ranked
        .into_iter()
        .skip(offset as usize)
        .take(limit as usize)
        .collect();
    let agents = Shared::new(agents);
    Ok(Rankings {
        rankings: agents.clone(),
        items: agents.clone(),
        agents,
        total,
        limit,
        offset,
    })
}

/// Agents by ELO (from 1500, K 32; README "Leaderboard"), best first.
#[utoipa::path(get, path = "/api/leaderboard", tag = "agents", params(RankingQuery),
    responses((status = 200, body = Rankings)))]
async fn leaderboard(
    State(debates): State<Debates>,
    State(paging): State<Paging>,
    ApiQuery(query): ApiQuery<RankingQuery>,
) -> Result<Json<Rankings>, ApiError> {
    Ok(Json(ranked(&debates, paging, query).await?))
}

/// The same rankings under their other names (also `/api/rankings`).
#[utoipa::path(get, path = "/api/leaderboard/rankings", tag = "agents", params(RankingQuery),
    responses((status = 200, body = Rankings)))]
async fn rankings(
    State(debates): State<Debates>,
    State(paging): State<Paging>,
    ApiQuery(query): ApiQuery<RankingQuery>,
) -> Result<Json<Rankings>, ApiError> {
    Ok(Json(ranked(&debates, paging, query).await?))
}
