//! `/account`: the signed-in user's own profile and second factor, and
//! beside it (each a page of its own, [`Part`]) password, sessions, named
//! API keys, organization and rate limits, each form calling the
//! same accounts command as its `/api/auth/…` route. Secrets (a new API key,
//! the TOTP secret, backup codes) appear on the one response that made
//! them, which like every page is `no-store`; what removes something asks
//! first on a page of its own ([`super::confirm`]).

use agon_aggregates::account::RevokeReason;
use askama::Template;
use axum::body::Bytes;
use axum::extract::{MatchedPath, Path, Query, State};
use axum::http::StatusCode;
use axum::http::header::SET_COOKIE;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::{Chrome, Confirm, Fields, SubNav, render};
use crate::auth::api_keys::ApiKeyInfo;
use crate::auth::{Auth, AuthError, Caller};
use crate::web::WebState;
use crate::web::error::PageError;
use crate::web::session::{REFRESH, SESSION, SignedIn, clear_cookie};

/// One open session as the page lists it.
#[derive(Debug)]
pub struct SessionRow {
    pub id: String,
    pub device: String,
    pub browser: String,
    pub address: String,
    pub last_use: String,
    pub current: bool,
}

/// The profile part of the page.
#[derive(Debug)]
pub struct Profile {
    pub name: String,
    pub email: String,
    pub role: String,
    pub verified: bool,
    pub mfa: bool,
    pub org: Option<(String, String)>,
}

/// The account's pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Profile,
    Password,
    Sessions,
    Keys,
    Organization,
    Limits,
}

impl Part {
    const LINKS: &'static [(&'static str, &'static str)] = &[
        ("/account", "Profile and security"),
        ("/account/password", "Password"),
        ("/account/sessions", "Sessions"),
        ("/account/keys", "API keys"),
        ("/account/organization", "Organization"),
        ("/account/limits", "Rate limits"),
    ];

    const ALL: [Self; 6] = [
        Self::Profile,
        Self::Password,
        Self::Sessions,
        Self::Keys,
        Self::Organization,
        Self::Limits,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// The part whose page `path` is.
    fn at(path: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.path() == path)
    }

    fn path(self) -> &'static str {
        Self::LINKS[self.index()].0
    }

    fn heading(self) -> &'static str {
        Self::LINKS[self.index()].1
    }

    /// The name the template tests.
    fn name(self) -> &'static str {
        match self {
            Self::Profile => "profile",
            Self::Password => "password",
            Self::Sessions => "sessions",
            Self::Keys => "keys",
            Self::Organization => "organization",
            Self::Limits => "limits",
        }
    }

    /// The page a `done` code is reported on.
    fn of_done(code: &str) -> Self {
        match code {
            "session" | "others" => Self::Sessions,
            "key" => Self::Keys,
            "org" => Self::Organization,
            _ => Self::Profile,
        }
    }
}

#[derive(Template)]
#[template(path = "account.html")]
struct AccountPage {
    chrome: Chrome,
    subnav: SubNav,
    /// [`Part::name`] of this page.
    part: &'static str,
    heading: &'static str,
    profile: Profile,
    sessions: Vec<SessionRow>,
    keys: Vec<ApiKeyInfo>,
    notice: Option<&'static str>,
    error: Option<String>,
    /// A key just created: shown this once.
    new_key: Option<String>,
    /// Invitation sent: the address, and whether the mail went out.
    invited: Option<(String, bool)>,
    /// The user's rate-limit buckets ([`Part::Limits`] only).
    buckets: Vec<Bucket>,
}

/// One action's rate-limit bucket, as `GET /api/rate-limit/status` has it.
#[derive(Debug)]
pub struct Bucket {
    pub action: String,
    pub remaining: String,
    pub limit: String,
    pub retry_after: String,
}

/// The buckets of a `GET /api/rate-limit/status` body.
fn buckets(status: &serde_json::Value) -> Vec<Bucket> {
    let text = |v: &serde_json::Value| v.as_u64().map_or_else(|| "?".to_owned(), |n| n.to_string());
    status["limits"]
        .as_object()
        .map(|limits| {
            limits
                .iter()
                .map(|(action, b)| Bucket {
                    action: action.clone(),
                    remaining: text(&b["remaining"]),
                    limit: text(&b["limit"]),
                    retry_after: text(&b["retry_after"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

#[derive(Debug, Deserialize)]
pub struct AccountQuery {
    done: Option<String>,
}

/// What a `done` code in the address says (never text from the address).
fn notice(code: Option<&str>) -> Option<&'static str> {
    Some(match code? {
        "session" => "The session was signed out.",
        "others" => "Every other session was signed out.",
        "key" => "The API key was revoked; it no longer works.",
        "mfa-off" => "Two-factor authentication is off.",
        "org" => "Your organization was created.",
        _ => return None,
    })
}

/// A refusal the user can act on, or the page failing.
pub(super) fn refused(e: AuthError) -> Result<String, PageError> {
    if e.is_fault() {
        return Err(PageError::internal(e));
    }
    Ok(e.to_string())
}

fn when(t: Option<chrono::DateTime<chrono::Utc>>) -> String {
    t.map_or_else(
        || "never".to_owned(),
        |t| t.format("%Y-%m-%d %H:%M UTC").to_string(),
    )
}

/// One of the account's pages; each reads only what it shows (and the
/// profile, which they all use).
async fn page(
    auth: &Auth,
    caller: &Caller,
    part: Part,
    notice: Option<&'static str>,
    error: Option<String>,
) -> Result<AccountPage, PageError> {
    let account = auth
        .account(&caller.user_id)
        .await
        .map_err(PageError::internal)?;
    let org = match &account.org_id {
        Some(id) => {
            let name = auth
                .docs()
                .get::<agon_projections::Organizations>(id)
                .await
                .map_err(PageError::internal)?
                .map_or_else(|| id.clone(), |o| o.name);
            Some((name, account.org_role.clone().unwrap_or_default()))
        }
        None => None,
    };
    let sessions = if part == Part::Sessions {
        auth.sessions(&caller.user_id)
            .await
            .map_err(PageError::internal)?
    } else {
        Vec::new()
    };
    let sessions = sessions
        .into_iter()
        .map(|(s, last)| SessionRow {
            current: caller.session_id() == Some(s.session_id.as_str()),
            device: s.device.device_type,
            browser: s.device.browser,
            address: s.device.ip.unwrap_or_else(|| "unknown".to_owned()),
            last_use: when(last.and_then(|t| chrono::DateTime::from_timestamp(t, 0))),
            id: s.session_id,
        })
        .collect();
    let keys = if part == Part::Keys {
        auth.api_keys(&caller.user_id)
            .await
            .map_err(PageError::internal)?
    } else {
        Vec::new()
    };
    Ok(AccountPage {
        chrome: Chrome::for_caller(Some(caller), "account"),
        subnav: SubNav {
            label: "Account",
            links: Part::LINKS,
            current: part.path(),
        },
        part: part.name(),
        heading: part.heading(),
        profile: Profile {
            name: account.name.clone(),
            email: account.email.clone(),
            role: account.role.as_str().to_owned(),
            verified: account.email_verified,
            mfa: account.mfa.enabled,
            org,
        },
        sessions,
        keys,
        notice,
        error,
        new_key: None,
        invited: None,
        buckets: Vec::new(),
    })
}

/// The form's page again with a refusal, as 422.
async fn with_error(
    auth: &Auth,
    caller: &Caller,
    part: Part,
    error: String,
) -> Result<Response, PageError> {
    let page = page(auth, caller, part, None, Some(error)).await?;
    Ok((StatusCode::UNPROCESSABLE_ENTITY, render(&page)?).into_response())
}

/// The form's page again with what the service refused, or the fault's page.
pub(super) async fn refusal(
    auth: &Auth,
    caller: &Caller,
    part: Part,
    e: AuthError,
) -> Result<Response, PageError> {
    let message = refused(e)?;
    with_error(auth, caller, part, message).await
}

pub(super) fn done(code: &str) -> Response {
    let path = Part::of_done(code).path();
    Redirect::to(&format!("{path}?done={code}")).into_response()
}

/// `GET /account` (profile and second factor) and its other parts' pages
/// (`/account/password`, `/account/sessions`, `/account/keys`,
/// `/account/organization`, `/account/limits`), told apart by the route.
pub async fn show(
    State(state): State<WebState>,
    SignedIn(caller): SignedIn,
    route: MatchedPath,
    Query(query): Query<AccountQuery>,
) -> Result<Response, PageError> {
    let part = Part::at(route.as_str()).ok_or(PageError::NotFound)?;
    let mut page = page(
        &state.auth,
        &caller,
        part,
        notice(query.done.as_deref()),
        None,
    )
    .await?;
    if let (Part::Limits, Some(console)) = (part, &state.console) {
        page.buckets = buckets(&console.platform.rate_status(&caller).await);
    }
    render(&page)
}

/// `POST /account/password`: every session ends, this one too, so the
/// browser is signed out and sent to sign in with the new password.
pub async fn password(
    State(auth): State<Auth>,
    SignedIn(caller): SignedIn,
    body: Bytes,
) -> Result<Response, PageError> {
    let fields = Fields::parse(&body);
    let (current, new) = (fields.raw("current_password"), fields.raw("new_password"));
    if new != fields.raw("confirm_password") {
        return with_error(
            &auth,
            &caller,
            Part::Password,
            "The new passwords differ".to_owned(),
        )
        .await;
    }
    match auth.change_password(&caller, current, new).await {
        Ok(_) => Ok((
            [
                (SET_COOKIE, clear_cookie(SESSION)),
                (SET_COOKIE, clear_cookie(REFRESH)),
            ],
            Redirect::to("/login?notice=password"),
        )
            .into_response()),
        Err(e) => refusal(&auth, &caller, Part::Password, e).await,
    }
}

/// `POST /account/keys`: a named key, shown on this response only.
pub async fn create_key(
    State(auth): State<Auth>,
    SignedIn(caller): SignedIn,
    body: Bytes,
) -> Result<Response, PageError> {
    let fields = Fields::parse(&body);
    let name = fields.get("name").unwrap_or_default();
    match auth.create_named_api_key(&caller.user_id, name).await {
        Ok(key) => {
            let mut page = page(&auth, &caller, Part::Keys, None, None).await?;
            page.new_key = Some(key.api_key);
            Ok((StatusCode::CREATED, render(&page)?).into_response())
        }
        Err(e) => refusal(&auth, &caller, Part::Keys, e).await,
    }
}

/// `GET /account/keys/{id}/revoke`: asks first.
pub async fn confirm_key(
    State(auth): State<Auth>,
    SignedIn(caller): SignedIn,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let keys = auth
        .api_keys(&caller.user_id)
        .await
        .map_err(PageError::internal)?;
    let key = keys
        .iter()
        .find(|k| k.key_id == id)
        .ok_or(PageError::NotFound)?;
    render(&Confirm::new(
        Chrome::for_caller(Some(&caller), "account"),
        "Revoke API key",
        format!(
            "Revoke the key “{}” ({})? Programs using it stop working at once.",
            key.name, key.prefix
        ),
        format!("/account/keys/{}/revoke", super::encode(&id)),
        "Revoke key",
        "/account/keys",
    ))
}

/// `POST /account/keys/{id}/revoke`.
pub async fn revoke_key(
    State(auth): State<Auth>,
    SignedIn(caller): SignedIn,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    match auth.revoke_api_key_by_id(&caller.user_id, &id).await {
        Ok(()) => Ok(done("key")),
        Err(AuthError::NotFound { .. }) => Err(PageError::NotFound),
        Err(e) => refusal(&auth, &caller, Part::Keys, e).await,
    }
}

/// `GET /account/sessions/{id}/revoke`: asks first.
pub async fn confirm_session(
    SignedIn(caller): SignedIn,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let (question, button) = if id == "others" {
        (
            "Sign out every other session? This browser stays signed in.".to_owned(),
            "Sign out other sessions",
        )
    } else {
        (
            "Sign out this session? It must sign in again.".to_owned(),
            "Sign out session",
        )
    };
    render(&Confirm::new(
        Chrome::for_caller(Some(&caller), "account"),
        "Sign out sessions",
        question,
        format!("/account/sessions/{}/revoke", super::encode(&id)),
        button,
        "/account/sessions",
    ))
}

/// `POST /account/sessions/{id}/revoke` (`others`: all but this one).
pub async fn revoke_session(
    State(auth): State<Auth>,
    SignedIn(caller): SignedIn,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    let result = if id == "others" {
        auth.end_other_sessions(&caller).await.map(|_| "others")
    } else {
        auth.end_session(&caller, &id, RevokeReason::Deleted)
            .await
            .map(|()| "session")
    };
    match result {
        Ok(code) => Ok(done(code)),
        Err(AuthError::NotFound { .. }) => Err(PageError::NotFound),
        Err(e) => refusal(&auth, &caller, Part::Sessions, e).await,
    }
}

/// `POST /account/organization`: creates one owned by the user.
pub async fn organization(
    State(auth): State<Auth>,
    SignedIn(caller): SignedIn,
    body: Bytes,
) -> Result<Response, PageError> {
    let fields = Fields::parse(&body);
    let name = fields.get("org_name").unwrap_or_default();
    match auth.setup_organization(&caller.user_id, name).await {
        Ok(_) => Ok(done("org")),
        Err(e) => refusal(&auth, &caller, Part::Organization, e).await,
    }
}

/// `POST /account/invite`: invites an address into the organization.
pub async fn invite(
    State(auth): State<Auth>,
    SignedIn(caller): SignedIn,
    body: Bytes,
) -> Result<Response, PageError> {
    let fields = Fields::parse(&body);
    let (email, role) = (
        fields.get("email").unwrap_or_default(),
        fields.get("role").unwrap_or("member"),
    );
    match auth.invite(&caller, email, role).await {
        Ok(sent) => {
            let mut page = page(&auth, &caller, Part::Organization, None, None).await?;
            page.invited = Some((sent.email, sent.email_sent));
            render(&page)
        }
        Err(e) => refusal(&auth, &caller, Part::Organization, e).await,
    }
}
