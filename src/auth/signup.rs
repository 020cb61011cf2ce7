//! Sign-up with email verification, organizations and invitations. Tokens
//! sent by mail name their stream (`<user id>.<secret>`,
//! `<org id>.<invite id>.<secret>`); only the secret's SHA-256 is stored.

use agon_aggregates::CommandMeta;
use agon_aggregates::account::{Account, AccountCommand, Email};
use agon_aggregates::organization::{OrgRole, Organization, OrganizationCommand};
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::login::NewAccount;
use super::{Auth, AuthError, Caller};
use crate::crypto::secrets::{random_token, sha256_hex};
use crate::mail::Mail;

/// An invitation as its link reveals it.
#[derive(Debug, Serialize, ToSchema)]
pub struct InviteCheck {
    pub valid: bool,
    /// Why it cannot be accepted, when it cannot.
    pub reason: Option<String>,
    pub email: Option<String>,
    pub org_id: Option<String>,
    pub org_name: Option<String>,
    pub role: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// A membership that an accepted invitation created.
#[derive(Debug, Serialize, ToSchema)]
pub struct Membership {
    pub user_id: String,
    pub org_id: String,
    pub org_name: String,
    pub role: String,
}

/// An invitation just sent.
#[derive(Debug, Serialize, ToSchema)]
pub struct SentInvite {
    pub invite_id: String,
    pub email: String,
    pub role: String,
    pub expires_at: DateTime<Utc>,
    /// Whether the invitation mail went out.
    pub email_sent: bool,
}

impl Auth {
    /// Registers an unverified account and mails its verification link.
    /// Returns the account and whether the mail went out.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn signup(&self, new: NewAccount<'_>) -> Result<(Account, bool), AuthError> {
        let account = self.register(new, false).await?;
        let sent = self.send_verification(&account).await?;
        Ok((account, sent))
    }

    /// Issues a fresh verification token (the old one stops working) and
    /// mails it; tells whether the mail went out.
    pub async fn send_verification(&self, account: &Account) -> Result<bool, AuthError> {
        let secret = random_token(32);
        let now = self.clock().now();
        let hours = self.settings().verification_hours;
        let issue = AccountCommand::IssueVerification {
            token_hash: sha256_hex(&secret),
            expires_at: now + Duration::hours(hours.into()),
            at: now,
        };
        self.command(&account.user_id, issue, &account.user_id)
            .await?;
        let token = format!("{}.{secret}", account.user_id);
        let link = format!(
            "{}/api/v1/auth/verify-email?token={token}",
            self.settings().public_url
        );
        Ok(self
            .send(Mail {
                to: account.email.clone(),
                subject: "Verify your Agon email address".to_owned(),
                body: format!(
                    "Hello {},\n\nOpen this link to verify your email address:\n\n{link}\n\n\
                 or POST {{\"token\": \"{token}\"}} to /api/v1/auth/verify-email.\n\
                 The link works once, for {hours} hours.\n",
                    account.name
                ),
            })
            .await)
    }

    /// Marks the token's account verified.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn verify_email(&self, token: &str) -> Result<Account, AuthError> {
        let invalid = || AuthError::NotFound {
            resource_type: "verification token",
            resource_id: String::new(),
        };
        let (user_id, secret) = token.trim().split_once('.').ok_or_else(invalid)?;
        let account = self.account(user_id).await?;
        if !account.exists() {
            return Err(invalid());
        }
        let verify = AccountCommand::VerifyEmail {
            token_hash: sha256_hex(secret),
            at: self.clock().now(),
        };
        Ok(self.command(user_id, verify, user_id).await?.0)
    }

    /// Mails the caller a new verification link.
    pub async fn resend_verification(&self, user_id: &str) -> Result<bool, AuthError> {
        let account = self.existing(user_id).await?;
        if account.email_verified {
            return Err(AuthError::Conflict("Email is already verified".to_owned()));
        }
        self.send_verification(&account).await
    }

    /// Creates an organization owned by the caller.
    pub async fn setup_organization(
        &self,
        user_id: &str,
        name: &str,
    ) -> Result<Membership, AuthError> {
        let account = self.existing(user_id).await?;
        if account.org_id.is_some() {
            return Err(AuthError::Conflict(
                "User already belongs to an organization".to_owned(),
            ));
        }
        let org_id = uuid::Uuid::new_v4().to_string();
        let now = self.clock().now();
        let create = OrganizationCommand::Create {
            org_id: org_id.clone(),
            name: name.to_owned(),
            owner_id: user_id.to_owned(),
            at: now,
        };
        let org = self
            .log()
            .execute::<Organization>(&org_id, create, CommandMeta::by(user_id))
            .await?
            .state;
        self.join(user_id, &org, OrgRole::Owner).await
    }

    /// Invites `email` into the caller's organization as `role`.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn invite(
        &self,
        caller: &Caller,
        email: &str,
        role: &str,
    ) -> Result<SentInvite, AuthError> {
        let role = OrgRole::parse_invitable(role).ok_or_else(|| {
            AuthError::Invalid("Role must be one of admin, member, viewer".to_owned())
        })?;
        let email = Email::parse(email)?.into_string();
        let account = self.existing(&caller.user_id).await?;
        let org_id = account.org_id.ok_or_else(|| {
            AuthError::Conflict(
                "Set up an organization first (POST /api/v1/auth/setup-organization)".to_owned(),
            )
        })?;
        let invite_id = uuid::Uuid::new_v4().to_string();
        let secret = random_token(32);
        let now = self.clock().now();
        let days = self.settings().invite_days;
        let expires_at = now + Duration::days(days.into());
        let invite = OrganizationCommand::Invite {
            invite_id: invite_id.clone(),
            email: email.clone(),
            role,
            token_hash: sha256_hex(&secret),
            expires_at,
            by: caller.user_id.to_string(),
            at: now,
        };
        let org = self
            .log()
            .execute::<Organization>(&org_id, invite, CommandMeta::by(caller.user_id.as_str()))
            .await?
            .state;
        let token = format!("{org_id}.{invite_id}.{secret}");
        let base = &self.settings().public_url;
        let email_sent = self.send(Mail {
            to: email.clone(),
            subject: format!("You are invited to {} on Agon", org.name),
            body: format!(
                "{} invited you to join {} as {}.\n\n\
                 See the invitation: {base}/api/v1/auth/check-invite?token={token}\n\n\
                 Accept it by POSTing {{\"token\": \"{token}\"}} to {base}/api/v1/auth/accept-invite \
                 (signed in, or with \"name\" and \"password\" to create your account).\n\
                 The invitation works once, for {days} days.\n",
                account.name,
                org.name,
                role.as_str()
            ),
        })
        .await;
        Ok(SentInvite {
            invite_id,
            email,
            role: role.as_str().to_owned(),
            expires_at,
            email_sent,
        })
    }

    /// What an invitation token opens, without using it.
    pub async fn check_invite(&self, token: &str) -> Result<InviteCheck, AuthError> {
        let mut check = InviteCheck {
            valid: false,
            reason: None,
            email: None,
            org_id: None,
            org_name: None,
            role: None,
            expires_at: None,
        };
        let Some((org_id, invite_id, secret)) = split_invite(token) else {
            check.reason = Some("invitation not found".to_owned());
            return Ok(check);
        };
        let org: Organization = self.log().load(org_id).await?;
        match org.open_invite(invite_id, &sha256_hex(secret), self.clock().now()) {
            Ok(invite) => {
                check.valid = true;
                check.email = Some(invite.email.clone());
                check.org_id = Some(org.org_id.clone());
                check.org_name = Some(org.name.clone());
                check.role = Some(invite.role.as_str().to_owned());
                check.expires_at = Some(invite.expires_at);
            }
            Err(e) => {
                check.reason =
                    Some(AuthError::from(crate::store::CommandError::Rejected(e)).to_string())
            }
        }
        Ok(check)
    }

    /// Accepts an invitation as the signed-in caller, or creates the invited
    /// account (its email counts as verified: the link reached it).
    pub async fn accept_invite(
        &self,
        token: &str,
        caller: Option<&Caller>,
        new_account: Option<(&str, &str)>,
    ) -> Result<Membership, AuthError> {
        let (org_id, invite_id, secret) = split_invite(token).ok_or(AuthError::NotFound {
            resource_type: "invitation",
            resource_id: String::new(),
        })?;
        let token_hash = sha256_hex(secret);
        let org: Organization = self.log().load(org_id).await?;
        let invite = org
            .open_invite(invite_id, &token_hash, self.clock().now())
            .map_err(|e| AuthError::from(crate::store::CommandError::Rejected(e)))?
            .clone();
        let account = match (caller, new_account) {
            (Some(caller), _) => self.existing(&caller.user_id).await?,
            (None, Some((name, password))) => {
                if self.account_by_email(&invite.email).await?.is_some() {
                    return Err(AuthError::Conflict(
                        "An account with this email exists: sign in, then accept the invitation"
                            .to_owned(),
                    ));
                }
                let new = NewAccount {
                    email: &invite.email,
                    password,
                    name,
                };
                self.register(new, true).await?
            }
            (None, None) => {
                return Err(AuthError::Invalid(
                    "Sign in, or give name and password to create the invited account".to_owned(),
                ));
            }
        };
        if account.org_id.is_some() {
            return Err(AuthError::Conflict(
                "User already belongs to an organization".to_owned(),
            ));
        }
        let accept = OrganizationCommand::AcceptInvite {
            invite_id: invite_id.to_owned(),
            token_hash,
            user_id: account.user_id.clone(),
            email: account.email.clone(),
            at: self.clock().now(),
        };
        let org = self
            .log()
            .execute::<Organization>(org_id, accept, CommandMeta::by(&account.user_id))
            .await?
            .state;
        self.join(&account.user_id, &org, invite.role).await
    }

    pub(super) async fn join(
        &self,
        user_id: &str,
        org: &Organization,
        role: OrgRole,
    ) -> Result<Membership, AuthError> {
        let join = AccountCommand::JoinOrganization {
            org_id: org.org_id.clone(),
            org_role: role.as_str().to_owned(),
            at: self.clock().now(),
        };
        self.command(user_id, join, user_id).await?;
        Ok(Membership {
            user_id: user_id.to_owned(),
            org_id: org.org_id.clone(),
            org_name: org.name.clone(),
            role: role.as_str().to_owned(),
        })
    }

    /// Sends `mail`; a failure is logged and reported as `false`, since the
    /// change that asked for the mail has already been recorded.
    async fn send(&self, mail: Mail) -> bool {
        let limit = self.settings().smtp_timeout;
        match tokio::time::timeout(limit, self.mailer().send(&mail)).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::error!(to = %mail.to, error = %e, "mail could not be sent");
                false
            }
            Err(_) => {
                tracing::error!(to = %mail.to, seconds = limit.as_secs(), "mail server did not answer in time");
                false
            }
        }
    }
}

fn split_invite(token: &str) -> Option<(&str, &str, &str)> {
    let mut parts = token.trim().splitn(3, '.');
    let org_id = parts.next().filter(|s| !s.is_empty())?;
    let invite_id = parts.next().filter(|s| !s.is_empty())?;
    let secret = parts.next().filter(|s| !s.is_empty())?;
    Some((org_id, invite_id, secret))
}
