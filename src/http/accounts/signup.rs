//! Sign-up with email verification, organizations and invitations (the
//! `/api/v1/auth/...` rows of §4.1).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use super::session::RegisterBody;
use super::{Done, UserProfile};
use crate::auth::signup::{InviteCheck, Membership, SentInvite};
use crate::auth::{Auth, Caller, Credential};
use crate::http::caller::AccountHolder;
use crate::http::error::ApiError;
use crate::http::extract::{ApiJson, ApiQuery, WantsHtml, error_page, page};
use crate::http::ratelimit::{AuthPath, PathLimit};
use crate::http::routes::{RouteSpec, Routes};

pub fn routes() -> Routes {
    Routes::new()
        .add(
            routes!(signup),
            RouteSpec::new()
                .public()
                .limit(PathLimit::Auth(AuthPath::Register)),
        )
        .add(
            routes!(verify_email, verify_email_link),
            RouteSpec::new().public(),
        )
        .add(routes!(resend_verification), RouteSpec::new())
        .add(
            routes!(setup_organization),
            RouteSpec::new().oauth_under_v2(),
        )
        .add(routes!(invite), RouteSpec::new().oauth_under_v2())
        .add(routes!(accept_invite), RouteSpec::new().public())
        .add(routes!(check_invite), RouteSpec::new().public())
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SignedUp {
    pub success: bool,
    pub user: UserProfile,
    /// Whether the verification mail went out (SMTP, or the outbox folder).
    pub verification_sent: bool,
}

/// Creates an account and mails an email-verification link (valid 24 hours).
#[utoipa::path(post, path = "/api/auth/signup", tag = "auth", request_body = RegisterBody,
    responses((status = 201, body = SignedUp), (status = 409, description = "Email already registered")))]
async fn signup(
    State(auth): State<Auth>,
    ApiJson(body): ApiJson<RegisterBody>,
) -> Result<(StatusCode, Json<SignedUp>), ApiError> {
    let (account, verification_sent) = auth.signup(body.new_account()).await?;
    Ok((
        StatusCode::CREATED,
        Json(SignedUp {
            success: true,
            user: UserProfile::of(&account),
            verification_sent,
        }),
    ))
}

#[derive(Debug, Deserialize, ToSchema, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TokenBody {
    /// The token from the mail.
    pub token: String,
}

/// Verifies an email address with the token from the mail (single use).
#[utoipa::path(post, path = "/api/auth/verify-email", tag = "auth", request_body = TokenBody,
    responses((status = 200, body = Done), (status = 404, description = "Unknown token"),
        (status = 409, description = "Token expired, or the email is already verified")))]
async fn verify_email(
    State(auth): State<Auth>,
    ApiJson(body): ApiJson<TokenBody>,
) -> Result<Json<Done>, ApiError> {
    auth.verify_email(&body.token).await?;
    Ok(Json(Done::new("Email verified")))
}

/// The same as the POST, for the link in the mail.
#[utoipa::path(get, path = "/api/auth/verify-email", tag = "auth", params(TokenBody),
    responses((status = 200, body = Done), (status = 404, description = "Unknown token"),
        (status = 409, description = "Token expired, or the email is already verified")))]
async fn verify_email_link(
    State(auth): State<Auth>,
    WantsHtml(html): WantsHtml,
    ApiQuery(query): ApiQuery<TokenBody>,
) -> Result<Response, ApiError> {
    let verified = auth.verify_email(&query.token).await;
    if html {
        // A browser opened the link in the mail: answer with a page.
        let title = "Email verification";
        return Ok(match verified {
            Ok(_) => page(
                StatusCode::OK,
                "Email verified",
                &["Your email address is verified. You can close this page.".to_owned()],
            ),
            Err(e) => error_page(title, e.into()),
        });
    }
    verified?;
    Ok(Json(Done::new("Email verified")).into_response())
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MailSent {
    pub success: bool,
    pub sent: bool,
}

/// Mails the caller a new verification link; earlier links stop working.
#[utoipa::path(post, path = "/api/auth/resend-verification", tag = "auth",
    responses((status = 200, body = MailSent), (status = 409, description = "Already verified")))]
async fn resend_verification(
    State(auth): State<Auth>,
    AccountHolder(caller): AccountHolder,
) -> Result<Json<MailSent>, ApiError> {
    let sent = auth.resend_verification(&caller.user_id).await?;
    Ok(Json(MailSent {
        success: true,
        sent,
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OrganizationBody {
    /// 1 to 100 characters; also accepted as `name` (the upstream client's
    /// spelling).
    // At least one character that trimming keeps: the server trims Unicode
    // white space (U+0085 and U+00A0 included) before counting.
    #[schema(
        min_length = 1,
        max_length = 100,
        pattern = "[^\\s\\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
    )]
    #[serde(alias = "name")]
    pub org_name: String,
}

/// Creates an organization owned by the caller.
#[utoipa::path(post, path = "/api/auth/setup-organization", tag = "auth", request_body = OrganizationBody,
    responses((status = 201, body = Membership), (status = 409, description = "Already in an organization")))]
async fn setup_organization(
    State(auth): State<Auth>,
    AccountHolder(caller): AccountHolder,
    ApiJson(body): ApiJson<OrganizationBody>,
) -> Result<(StatusCode, Json<Membership>), ApiError> {
    let membership = auth
        .setup_organization(&caller.user_id, &body.org_name)
        .await?;
    Ok((StatusCode::CREATED, Json(membership)))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InviteBody {
    #[schema(format = Email, max_length = 254)]
    pub email: String,
    /// `admin`, `member` or `viewer`.
    #[schema(pattern = "^(admin|member|viewer)$")]
    pub role: String,
}

/// Invites someone into the caller's organization (owner or admin only);
/// the invitation mail works once, for 7 days.
#[utoipa::path(post, path = "/api/auth/invite", tag = "auth", request_body = InviteBody,
    responses((status = 201, body = SentInvite), (status = 403, description = "Not an owner or admin of the organization"),
        (status = 409, description = "The caller has no organization yet, or the address cannot be invited into it")))]
async fn invite(
    State(auth): State<Auth>,
    AccountHolder(caller): AccountHolder,
    ApiJson(body): ApiJson<InviteBody>,
) -> Result<(StatusCode, Json<SentInvite>), ApiError> {
    let sent = auth.invite(&caller, &body.email, &body.role).await?;
    Ok((StatusCode::CREATED, Json(sent)))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AcceptInviteBody {
    pub token: String,
    /// With `password`: create the invited account (when not signed in).
    pub name: Option<String>,
    pub password: Option<String>,
}

/// Accepts an invitation: signed in as the invited address, or creating
/// the invited account with `name` and `password`.
#[utoipa::path(post, path = "/api/auth/accept-invite", tag = "auth", request_body = AcceptInviteBody,
    responses((status = 200, body = Membership), (status = 404, description = "No such invitation"),
        (status = 403, description = "The invitation is addressed to someone else"),
        (status = 409, description = "Expired or used; or the invited address already has an account; or the user already has an organization")))]
async fn accept_invite(
    State(auth): State<Auth>,
    caller: Option<Caller>,
    ApiJson(body): ApiJson<AcceptInviteBody>,
) -> Result<Json<Membership>, ApiError> {
    let new_account = body.name.as_deref().zip(body.password.as_deref());
    // Only a user's own credential accepts as that user; the static token or
    // service headers count as no one here.
    let caller = caller.filter(|c| {
        matches!(
            c.credential,
            Credential::Session { .. } | Credential::ApiKey { .. }
        )
    });
    let membership = auth
        .accept_invite(&body.token, caller.as_ref(), new_account)
        .await?;
    Ok(Json(membership))
}

/// Whether an invitation token is valid, and what it offers.
#[utoipa::path(get, path = "/api/auth/check-invite", tag = "auth", params(TokenBody),
    responses((status = 200, body = InviteCheck)))]
async fn check_invite(
    State(auth): State<Auth>,
    WantsHtml(html): WantsHtml,
    ApiQuery(query): ApiQuery<TokenBody>,
) -> Result<Response, ApiError> {
    let check = auth.check_invite(&query.token).await;
    if html {
        // A browser opened the link in the mail: answer with a page.
        return Ok(match check {
            Ok(check) => invitation_page(&check, &query.token),
            Err(e) => error_page("Invitation", e.into()),
        });
    }
    Ok(Json(check?).into_response())
}

/// What an invitation offers, for a person, with how to accept it.
fn invitation_page(check: &InviteCheck, token: &str) -> Response {
    let or_unknown = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".to_owned());
    if !check.valid {
        let reason = check.reason.clone().unwrap_or_default();
        return page(
            StatusCode::OK,
            "Invitation",
            &[format!("This invitation cannot be accepted: {reason}")],
        );
    }
    let until = check
        .expires_at
        .map(|at| format!(" It is valid until {}.", at.format("%Y-%m-%d %H:%M UTC")))
        .unwrap_or_default();
    page(
        StatusCode::OK,
        "You are invited",
        &[
            format!(
                "{} is invited to join {} on Agon as {}.{until}",
                or_unknown(&check.email),
                or_unknown(&check.org_name),
                or_unknown(&check.role),
            ),
            format!(
                "To accept, POST {{\"token\": \"{token}\"}} to /api/v1/auth/accept-invite signed \
             in as that address, or add \"name\" and \"password\" to create the account."
            ),
        ],
    )
}
