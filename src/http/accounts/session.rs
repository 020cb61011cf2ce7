//! Register, sign in, refresh, sign out, the caller's profile, sessions
//! and password.

use agon_aggregates::account::RevokeReason;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::{ClientDevice, Done, UserProfile};
use crate::auth::login::{LoginOutcome, NewAccount};
use crate::auth::tokens::TokenPair;
use crate::auth::{Auth, Caller};
use crate::http::caller::AccountHolder;
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, ApiPath};
use crate::http::ratelimit::{AuthPath, PathLimit};
use crate::http::routes::{RouteSpec, Routes};
use crate::http::shared::Shared;

pub fn routes() -> Routes {
    let login_limit = PathLimit::Auth(AuthPath::Login);
    Routes::new()
        .add(
            routes!(register),
            RouteSpec::new()
                .public()
                .limit(PathLimit::Auth(AuthPath::Register)),
        )
        .add(routes!(login), RouteSpec::new().public().limit(login_limit))
        .add(
            routes!(login_second_factor),
            RouteSpec::new().public().limit(login_limit),
        )
        .add(routes!(refresh), RouteSpec::new().public())
        .add(routes!(logout), RouteSpec::new())
        .add(routes!(me), RouteSpec::new().v2_at("/api/v2/users/me"))
        .add(routes!(list_sessions, end_other_sessions), RouteSpec::new())
        .add(routes!(end_session), RouteSpec::new())
        .add(routes!(change_password), RouteSpec::new())
}

/// The body of register and sign-up.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterBody {
    /// A valid address; compared without case.
    #[schema(format = Email, max_length = 254)]
    pub email: String,
    /// 8 to 128 characters, case-sensitive.
    #[schema(min_length = 8, max_length = 128)]
    pub password: String,
    // At least one character that trimming keeps: the server trims Unicode
    // white space (U+0085 and U+00A0 included) before counting.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "[^\\s\\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
    )]
    pub name: String,
}

impl RegisterBody {
    pub fn new_account(&self) -> NewAccount<'_> {
        NewAccount {
            email: &self.email,
            password: &self.password,
            name: &self.name,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Registered {
    pub success: bool,
    pub user: UserProfile,
}

/// Creates an account (role `user`, or `admin` for `SERVICE_ADMIN_EMAILS`).
#[utoipa::path(post, path = "/api/auth/register", tag = "auth", request_body = RegisterBody,
    responses((status = 201, body = Registered), (status = 409, description = "Email already registered")))]
async fn register(
    State(auth): State<Auth>,
    ApiJson(body): ApiJson<RegisterBody>,
) -> Result<(StatusCode, Json<Registered>), ApiError> {
    let account = auth.register(body.new_account(), false).await?;
    Ok((
        StatusCode::CREATED,
        Json(Registered {
            success: true,
            user: UserProfile::of(&account),
        }),
    ))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginBody {
    pub email: String,
    pub password: String,
}

/// Tokens and the user they belong to.
#[derive(Debug, Serialize, ToSchema)]
pub struct SignedIn {
    #[serde(flatten)]
    pub tokens: TokenPair,
    pub user: UserProfile,
}

/// The password was right; a second factor must follow.
#[derive(Debug, Serialize, ToSchema)]
pub struct SecondFactorRequired {
    pub mfa_required: bool,
    /// Pass it with a code to `POST /api/auth/mfa/verify` within 5 minutes.
    pub mfa_token: String,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum LoginResponse {
    Signed(Box<SignedIn>),
    SecondFactor(SecondFactorRequired),
}

impl From<LoginOutcome> for LoginResponse {
    fn from(outcome: LoginOutcome) -> Self {
        match outcome {
            LoginOutcome::Signed { tokens, account } => LoginResponse::Signed(Box::new(SignedIn {
                tokens,
                user: UserProfile::of(&account),
            })),
            LoginOutcome::SecondFactorRequired { mfa_token } => {
                LoginResponse::SecondFactor(SecondFactorRequired {
                    mfa_required: true,
                    mfa_token,
                    message: "A second factor is required".to_owned(),
                })
            }
        }
    }
}

/// Signs in with email and password. Wrong email and wrong password get the
/// same answer; repeated failures lock the account (423). While locked,
/// every password gets the same 423, unchecked; checks are reserved before
/// they run, so a burst of attempts gets 423 once the attempts already
/// under way could reach the next lock.
#[utoipa::path(post, path = "/api/auth/login", tag = "auth", request_body = LoginBody,
    responses((status = 200, body = LoginResponse),
        (status = 401, description = "Invalid email or password"),
        (status = 403, description = "Account disabled (only for the right password)"),
        (status = 423, description = "Account locked for X seconds: locked, or enough checks already under way to reach the next lock (`Retry-After` and `details.retry_after` give the seconds)")))]
async fn login(
    State(auth): State<Auth>,
    ClientDevice(device): ClientDevice,
    ApiJson(body): ApiJson<LoginBody>,
) -> Result<Json<LoginResponse>, ApiError> {
    let outcome = auth.login(&body.email, &body.password, device).await?;
    Ok(Json(outcome.into()))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SecondFactorBody {
    pub mfa_token: String,
    /// A 6-digit TOTP code or a backup code.
    pub code: String,
}

/// Completes a sign-in with a TOTP or backup code. A wrong code counts
/// towards the lockout like a wrong password; an MFA token finishes one
/// sign-in only.
#[utoipa::path(post, path = "/api/auth/mfa/verify", tag = "auth", request_body = SecondFactorBody,
    responses((status = 200, body = LoginResponse),
        (status = 401, description = "Invalid token (expired, malformed or already used MFA token) or invalid authentication code"),
        (status = 403, description = "Account disabled"),
        (status = 423, description = "Account locked for X seconds (as for sign-in)")))]
async fn login_second_factor(
    State(auth): State<Auth>,
    ClientDevice(device): ClientDevice,
    ApiJson(body): ApiJson<SecondFactorBody>,
) -> Result<Json<LoginResponse>, ApiError> {
    let outcome = auth
        .login_second_factor(&body.mfa_token, &body.code, device)
        .await?;
    Ok(Json(outcome.into()))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RefreshBody {
    pub refresh_token: String,
}

/// Exchanges a refresh token for a new pair. Each refresh token works once;
/// presenting a used one again revokes its session.
#[utoipa::path(post, path = "/api/auth/refresh", tag = "auth", request_body = RefreshBody,
    responses((status = 200, body = TokenPair),
        (status = 401, description = "Token expired or invalid (also when the session ended or the account is disabled)")))]
async fn refresh(
    State(auth): State<Auth>,
    ApiJson(body): ApiJson<RefreshBody>,
) -> Result<Json<TokenPair>, ApiError> {
    Ok(Json(auth.refresh(&body.refresh_token).await?))
}

/// Ends the session of the presented access token.
#[utoipa::path(post, path = "/api/auth/logout", tag = "auth",
    responses((status = 200, body = Done)))]
async fn logout(State(auth): State<Auth>, caller: Caller) -> Result<Json<Done>, ApiError> {
    let session_id = caller
        .session_id()
        .ok_or_else(|| {
            ApiError::Forbidden(
                "Logout needs an access token; revoke API keys with DELETE /api/auth/api-key"
                    .to_owned(),
            )
        })?
        .to_owned();
    auth.end_session(&caller, &session_id, RevokeReason::Logout)
        .await?;
    Ok(Json(Done::new("Logged out")))
}

/// The caller's profile.
#[utoipa::path(get, path = "/api/auth/me", tag = "auth",
    responses((status = 200, body = UserProfile)))]
async fn me(
    State(auth): State<Auth>,
    AccountHolder(caller): AccountHolder,
) -> Result<Json<UserProfile>, ApiError> {
    Ok(Json(auth.view(&caller.user_id).await?.into()))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionInfo {
    pub session_id: String,
    pub device_type: String,
    pub browser: String,
    pub ip_address: Option<String>,
    pub created_at: DateTime<Utc>,
    pub last_activity: Option<DateTime<Utc>>,
    /// Whether this is the session of the request.
    pub current: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionList {
    #[schema(value_type = Vec<SessionInfo>)]
    pub sessions: Shared<SessionInfo>,
    /// The same list (where paginating clients read it).
    #[schema(value_type = Vec<SessionInfo>)]
    pub items: Shared<SessionInfo>,
    pub total: usize,
}

/// The caller's open sessions, newest first.
#[utoipa::path(get, path = "/api/auth/sessions", tag = "auth",
    responses((status = 200, body = SessionList)))]
async fn list_sessions(
    State(auth): State<Auth>,
    AccountHolder(caller): AccountHolder,
) -> Result<Json<SessionList>, ApiError> {
    let sessions: Vec<SessionInfo> = auth
        .sessions(&caller.user_id)
        .await?
        .into_iter()
        .map(|(session, last)| SessionInfo {
            current: caller.session_id() == Some(session.session_id.as_str()),
            session_id: session.session_id,
            device_type: session.device.device_type,
            browser: session.device.browser,
            ip_address: session.device.ip,
            created_at: session.created_at,
            last_activity: last.and_then(|t| DateTime::from_timestamp(t, 0)),
        })
        .collect();
    let total = sessions.len();
    let sessions = Shared::new(sessions);
    Ok(Json(SessionList {
        total,
        items: sessions.clone(),
        sessions,
    }))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Revoked {
    pub success: bool,
    pub revoked: usize,
}

/// Ends every session of the caller except the current one.
#[utoipa::path(delete, path = "/api/auth/sessions", tag = "auth",
    responses((status = 200, body = Revoked)))]
async fn end_other_sessions(
    State(auth): State<Auth>,
    AccountHolder(caller): AccountHolder,
) -> Result<Json<Revoked>, ApiError> {
    let revoked = auth.end_other_sessions(&caller).await?;
    Ok(Json(Revoked {
        success: true,
        revoked,
    }))
}

/// Ends one of the caller's sessions.
#[utoipa::path(delete, path = "/api/auth/sessions/{session_id}", tag = "auth",
    params(("session_id" = String, Path, description = "A session id (a token's jti)")),
    responses((status = 200, body = Done), (status = 404, description = "No such session of the caller")))]
async fn end_session(
    State(auth): State<Auth>,
    AccountHolder(caller): AccountHolder,
    ApiPath(session_id): ApiPath<String>,
) -> Result<Json<Done>, ApiError> {
    auth.end_session(&caller, &session_id, RevokeReason::Deleted)
        .await?;
    Ok(Json(Done::new("Session revoked")))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PasswordBody {
    pub current_password: String,
    /// 8 to 128 characters.
    #[schema(min_length = 8, max_length = 128)]
    pub new_password: String,
}

/// Changes the caller's password; every session ends, this one too. The
/// account's sign-in lock does not apply: wrong current passwords count
/// against the caller's session (or API key), which ends at the fifth.
#[utoipa::path(post, path = "/api/auth/password", tag = "auth", request_body = PasswordBody,
    responses((status = 200, body = Revoked),
        (status = 401, description = "The fifth wrong current password with this session or key: it has ended"),
        (status = 403, description = "Current password is incorrect"),
        (status = 409, description = "Enough password checks of this session or key are already under way to reach the limit; retry shortly"),
        (status = 422, description = "New password breaks the policy, or equals the current one")))]
async fn change_password(
    State(auth): State<Auth>,
    AccountHolder(caller): AccountHolder,
    ApiJson(body): ApiJson<PasswordBody>,
) -> Result<Json<Revoked>, ApiError> {
    let revoked = auth
        .change_password(&caller, &body.current_password, &body.new_password)
        .await?;
    Ok(Json(Revoked {
        success: true,
        revoked,
    }))
}
