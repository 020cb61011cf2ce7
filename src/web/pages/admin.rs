//! `/admin`: the console of §4.3 for users with the admin role (others get
//! the 403 page, anonymous visitors the sign-in page). The overview reads
//! what `/api/admin/stats`, `/api/agents/health`, the push service and
//! the platform's detailed health (in brief) serve; the whole health
//! report, recent errors, rate limits and the metrics' sums are pages of
//! their own, each reading only its document; `/admin/users` searches the
//! directory and each account action
//! (unlock, MFA reset, disable, enable, revoke all) asks first on a page
//! of its own, then runs the same accounts command as its API route.

use agon_aggregates::ids::UserId;
use askama::Template;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::{Chrome, Confirm, SubNav, render};
use crate::agents::BreakerStatus;
use crate::auth::{Auth, AuthError, Caller};
use crate::config::WebSettings;
use crate::web::WebState;
use crate::web::console::{RecentError, health_summary, metric_sections, recent_errors};
use crate::web::error::PageError;
use crate::web::report::{Section, sections};
use crate::web::session::SignedIn;

/// A signed-in admin; any other signed-in user gets the 403 page.
#[derive(Debug, Clone)]
pub struct Admin(pub Caller);

impl<S: Send + Sync> FromRequestParts<S> for Admin {
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, PageError> {
        let SignedIn(caller) = SignedIn::from_request_parts(parts, state).await?;
        if !caller.is_admin() {
            return Err(PageError::Forbidden(
                "The admin console is for administrators only.".to_owned(),
            ));
        }
        Ok(Admin(caller))
    }
}

/// The console's pages.
fn console_nav(current: &'static str) -> SubNav {
    SubNav {
        label: "Console",
        links: &[
            ("/admin", "Overview"),
            ("/admin/users", "Users"),
            ("/admin/health", "Health"),
            ("/admin/errors", "Recent errors"),
            ("/admin/limits", "Rate limits"),
            ("/admin/metrics", "Metrics"),
            ("/metrics", "Metrics (Prometheus)"),
        ],
        current,
    }
}

/// The overview's own figures; the console's other parts show the report.
#[derive(Debug)]
pub struct Activity {
    pub active_debates: u64,
    pub total_events: u64,
    pub events_by_type: Vec<(String, u64)>,
    pub ws_connections: i64,
    pub ws_subscriptions: i64,
    pub breakers: Vec<BreakerStatus>,
}

/// What a part of the console shows: each reads only its own document.
#[derive(Debug)]
pub enum Shown {
    /// Activity, breakers and the health report in a few lines.
    Overview {
        activity: Activity,
        health: Vec<(String, String)>,
    },
    /// `GET /api/health/detailed` as tables.
    Health(Vec<Section>),
    Errors(Vec<RecentError>),
    /// The limiter's live state and its configuration.
    Limits {
        live: Vec<Section>,
        config: Vec<Section>,
    },
    /// Each metric family's sum.
    Metrics(Vec<Section>),
}

#[derive(Template)]
#[template(path = "admin.html")]
struct ConsolePage {
    chrome: Chrome,
    subnav: SubNav,
    /// The part's name, in the title (none on the overview).
    heading: Option<&'static str>,
    shown: Shown,
}

/// `GET /admin`: activity, circuit breakers and detailed health in brief.
pub async fn overview(
    State(state): State<WebState>,
    Admin(caller): Admin,
) -> Result<Response, PageError> {
    let console = state.console()?;
    // Side by side: each reads the store, and the page waits for both.
    let (stats, health) = tokio::join!(console.ops.admin_stats(), console.platform.health());
    let stats = stats.map_err(PageError::internal)?;
    let push = console.push.stats();
    render(&ConsolePage {
        chrome: Chrome::for_caller(Some(&caller), "admin"),
        subnav: console_nav("/admin"),
        heading: None,
        shown: Shown::Overview {
            activity: Activity {
                active_debates: stats.active_debates,
                total_events: stats.total_events,
                events_by_type: stats.events_by_aggregate_type.into_iter().collect(),
                ws_connections: push.connections,
                ws_subscriptions: push.subscriptions,
                breakers: state.agents.breakers(),
            },
            health: health_summary(&health),
        },
    })
}

/// `GET /admin/{part}`: the whole health report, recent errors, rate
/// limits or the metrics' sums,
/// each a page of its own (together with the overview they ran to
/// hundreds of rows, all laid out before the first paint).
pub async fn part(
    State(state): State<WebState>,
    Admin(caller): Admin,
    Path(part): Path<String>,
) -> Result<Response, PageError> {
    let platform = &state.console()?.platform;
    let (heading, path, shown) = match part.as_str() {
        "health" => (
            "Health report",
            "/admin/health",
            Shown::Health(sections(&platform.health().await)),
        ),
        "errors" => (
            "Recent errors",
            "/admin/errors",
            Shown::Errors(recent_errors(&platform.errors())),
        ),
        "limits" => {
            let (live, config) = platform.rate_limits().await;
            (
                "Rate limits",
                "/admin/limits",
                Shown::Limits {
                    live: sections(&live),
                    config: sections(&config),
                },
            )
        }
        "metrics" => (
            "Metrics",
            "/admin/metrics",
            Shown::Metrics(metric_sections(&platform.metrics())),
        ),
        _ => return Err(PageError::NotFound),
    };
    render(&ConsolePage {
        chrome: Chrome::for_caller(Some(&caller), "admin"),
        subnav: console_nav(path),
        heading: Some(heading),
        shown,
    })
}

/// One user as the console lists them.
#[derive(Debug)]
pub struct UserRow {
    pub id: String,
    pub email: String,
    pub name: String,
    pub role: String,
    pub mfa: bool,
    pub disabled: bool,
    pub locked_seconds: i64,
    pub failed: u32,
    pub sessions: usize,
}

#[derive(Template)]
#[template(path = "admin_users.html")]
struct UsersPage {
    chrome: Chrome,
    subnav: SubNav,
    search: String,
    /// `search` encoded for the paging links.
    search_query: String,
    rows: Vec<UserRow>,
    total: u64,
    next: Option<u64>,
    previous: Option<u64>,
    notice: Option<&'static str>,
}

#[derive(Debug, Deserialize)]
pub struct UsersQuery {
    search: Option<String>,
    offset: Option<u64>,
    done: Option<String>,
}

/// What a `done` code in the address says (never text from the address).
fn notice(code: Option<&str>) -> Option<&'static str> {
    Some(match code? {
        "unlock" => "The account is unlocked.",
        "reset-mfa" => "Two-factor authentication is reset for the account.",
        "disable" => "The account is disabled and its sessions and keys revoked.",
        "enable" => "The account can sign in again.",
        "revoke-all" => "Every session and API key of the account is revoked.",
        _ => return None,
    })
}

/// `GET /admin/users?search=&offset=`.
pub async fn users(
    State(auth): State<Auth>,
    State(settings): State<WebSettings>,
    Admin(caller): Admin,
    Query(query): Query<UsersQuery>,
) -> Result<Response, PageError> {
    let search = query
        .search
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let offset = query.offset.unwrap_or(0);
    let (views, total) = match auth.list_users(search, settings.page_size, offset).await {
        Ok(found) => found,
        Err(e) if e.is_fault() => return Err(PageError::internal(e)),
        Err(e) => return Err(PageError::BadRequest(e.to_string())),
    };
    let mut rows = Vec::with_capacity(views.len());
    for view in views {
        let sessions = auth
            .sessions(&view.user_id)
            .await
            .map_err(PageError::internal)?
            .len();
        // Lock, MFA and state from the account itself: the directory may
        // lag a sign-in or an action just taken.
        let lock = auth
            .lockout_status(&user_id(&view.user_id)?)
            .await
            .map_err(failed)?;
        let account = auth.account(&view.user_id).await.map_err(failed)?;
        rows.push(UserRow {
            locked_seconds: lock.remaining_seconds,
            failed: lock.failed_login_count,
            role: view.role.as_str().to_owned(),
            mfa: account.mfa.enabled,
            disabled: account.disabled,
            id: view.user_id,
            email: view.email,
            name: view.name,
            sessions,
        });
    }
    let shown = offset + rows.len() as u64;
    render(&UsersPage {
        chrome: Chrome::for_caller(Some(&caller), "admin"),
        subnav: console_nav("/admin/users"),
        search: search.unwrap_or_default().to_owned(),
        search_query: super::encode(search.unwrap_or_default()),
        rows,
        total,
        next: (shown < total).then_some(shown),
        previous: (offset > 0).then(|| offset.saturating_sub(u64::from(settings.page_size))),
        notice: notice(query.done.as_deref()),
    })
}

/// The account actions, by the last segment of their path.
#[derive(Debug, Clone, Copy)]
enum Action {
    Unlock,
    ResetMfa,
    Disable,
    Enable,
    RevokeAll,
}

impl Action {
    fn parse(text: &str) -> Result<Self, PageError> {
        Ok(match text {
            "unlock" => Self::Unlock,
            "reset-mfa" => Self::ResetMfa,
            "disable" => Self::Disable,
            "enable" => Self::Enable,
            "revoke-all" => Self::RevokeAll,
            _ => return Err(PageError::NotFound),
        })
    }

    fn code(self) -> &'static str {
        match self {
            Self::Unlock => "unlock",
            Self::ResetMfa => "reset-mfa",
            Self::Disable => "disable",
            Self::Enable => "enable",
            Self::RevokeAll => "revoke-all",
        }
    }

    /// The confirm page's title, question and button.
    fn wording(self, who: &str) -> (&'static str, String, &'static str) {
        match self {
            Self::Unlock => (
                "Unlock account",
                format!("Clear the sign-in lock and failed count of {who}?"),
                "Unlock",
            ),
            Self::ResetMfa => (
                "Reset two-factor authentication",
                format!(
                    "Turn off two-factor authentication for {who}? They sign in with the password alone until they set it up again."
                ),
                "Reset MFA",
            ),
            Self::Disable => (
                "Disable account",
                format!(
                    "Disable {who}? Sign-in is refused and every session and API key is revoked."
                ),
                "Disable",
            ),
            Self::Enable => (
                "Re-enable account",
                format!("Let {who} sign in again? Revoked sessions and keys stay revoked."),
                "Re-enable",
            ),
            Self::RevokeAll => (
                "Revoke all sessions",
                format!("End every session and revoke every API key of {who}?"),
                "Revoke all",
            ),
        }
    }
}

fn user_id(text: &str) -> Result<UserId, PageError> {
    UserId::parse(text).map_err(|_| PageError::NotFound)
}

fn failed(e: AuthError) -> PageError {
    match e {
        AuthError::NotFound { .. } => PageError::NotFound,
        e if e.is_fault() => PageError::internal(e),
        e => PageError::BadRequest(e.to_string()),
    }
}

/// `GET /admin/accounts/{id}/{action}`: asks first.
pub async fn confirm(
    State(auth): State<Auth>,
    Admin(caller): Admin,
    Path((id, action)): Path<(String, String)>,
) -> Result<Response, PageError> {
    let action = Action::parse(&action)?;
    let user = user_id(&id)?;
    let status = auth.lockout_status(&user).await.map_err(failed)?;
    let (title, question, button) = action.wording(&status.email);
    render(&Confirm::new(
        Chrome::for_caller(Some(&caller), "admin"),
        title,
        question,
        format!("/admin/accounts/{}/{}", super::encode(&id), action.code()),
        button,
        "/admin/users",
    ))
}

/// `POST /admin/accounts/{id}/{action}`.
pub async fn act(
    State(auth): State<Auth>,
    Admin(caller): Admin,
    Path((id, action)): Path<(String, String)>,
) -> Result<Response, PageError> {
    let action = Action::parse(&action)?;
    let user = user_id(&id)?;
    let admin = &caller.user_id;
    match action {
        Action::Unlock => auth.unlock(admin, &user).await.map(drop),
        Action::ResetMfa => auth.reset_mfa(admin, &user).await,
        Action::Disable => auth.disable(admin, &user).await.map(drop),
        Action::Enable => auth.enable(admin, &user).await,
        Action::RevokeAll => auth.revoke_all(admin, &user).await.map(drop),
    }
    .map_err(failed)?;
    Ok(Redirect::to(&format!("/admin/users?done={}", action.code())).into_response())
}
