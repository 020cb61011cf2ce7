//! Sign-in through an identity provider, on the account side: which account
//! a provider's identity is, linking and unlinking, provisioning a new
//! account just in time, and the session it opens. The protocols (OAuth 2.0,
//! OIDC, SAML) live in `crate::sso`; what reaches here was already checked.

use agon_aggregates::CommandMeta;
use agon_aggregates::account::{
    Account, AccountCommand, Device, DisplayName, Email, ProviderIdentity, ProviderRefusal,
};
use agon_aggregates::identity_claim::{IdentityClaim, IdentityClaimCommand};
use agon_aggregates::organization::{OrgRole, Organization};

use super::login::{LoginOutcome, NewFields, Opening};
use super::{Auth, AuthError};
use crate::crypto::secrets::random_token;

/// How many times a first sign-in that lost a race for its address looks
/// again for the winner's account (about 0.3 s in all).
const RESOLVE_TRIES: u64 = 5;

/// What a provider vouched for, its signature and claims already checked.
#[derive(Debug, Clone)]
pub struct Asserted {
    /// `extidp` or `sso`.
    pub provider: &'static str,
    /// The provider's stable id of the user (OIDC `sub`, SAML NameID).
    pub subject: String,
    pub email: Option<String>,
    /// The provider says it verified the address.
    pub email_verified: bool,
    pub name: Option<String>,
}

/// Where a just-provisioned account goes: an organization and its role there.
#[derive(Debug, Clone)]
pub struct Placement {
    pub org_id: String,
    pub role: OrgRole,
}

impl Auth {
    /// The identity's blind index: its claim stream and what account events
    /// name it by, so the subject itself (an email, in SAML) is never stored.
    pub fn identity_of(&self, provider: &str, subject: &str) -> ProviderIdentity {
        ProviderIdentity {
            provider: provider.to_owned(),
            subject_index: self.inner.blind_index.of(&format!("{provider}\n{subject}")),
        }
    }

    /// The account the identity is linked to, if it still exists.
    async fn linked_account(
        &self,
        identity: &ProviderIdentity,
    ) -> Result<Option<Account>, AuthError> {
        let claim = self
            .log()
            .load::<IdentityClaim>(&identity.subject_index)
            .await?;
        let Some(user_id) = claim.user_id else {
            return Ok(None);
        };
        let account = self.account(&user_id).await?;
        Ok((account.exists() && account.is_linked(identity)).then_some(account))
    }

    /// Signs in as the account `asserted` is: the one it is linked to; else
    /// the one of its email when the provider verified that email (linked
    /// now); else a new account, provisioned into `placement`. An account
    /// of that email whose address the provider did not verify is refused:
    /// its owner links the provider after signing in.
    pub async fn sign_in_with_provider(
        &self,
        asserted: &Asserted,
        placement: Option<&Placement>,
        device: Device,
    ) -> Result<LoginOutcome, AuthError> {
        let identity = self.identity_of(asserted.provider, &asserted.subject);
        // A first sign-in of the same person at the same moment may have
        // claimed the address first: its account is there to link once it
        // is registered, a moment later.
        let mut tries = 0;
        let account = loop {
            match self.resolve(asserted, &identity, placement).await {
                Err(AuthError::Rejected(_)) if tries < RESOLVE_TRIES => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(20 * tries)).await;
                }
                other => break other?,
            }
        };
        let now = self.clock().now();
        let refusal = if account.disabled {
            Some((ProviderRefusal::Disabled, AuthError::Disabled))
        } else {
            account.lock_remaining(now).map(|remaining_seconds| {
                (
                    ProviderRefusal::Locked,
                    AuthError::Locked { remaining_seconds },
                )
            })
        };
        if let Some((reason, error)) = refusal {
            self.refuse(&account.user_id, identity, reason).await?;
            return Err(error);
        }
        if account.mfa.enabled {
            return Ok(LoginOutcome::SecondFactorRequired {
                mfa_token: self.issue_mfa_token(&account.user_id, Some(identity))?,
            });
        }
        let gate = self.inner.attempts.gate(&account.user_id);
        let opening = Opening {
            device,
            second_factor: None,
            step_token: None,
            attempt_id: None,
            via: Some(identity),
        };
        let outcome = self.open_session(&gate, &account.user_id, opening).await;
        self.inner.attempts.release(&account.user_id, gate);
        outcome
    }

    async fn resolve(
        &self,
        asserted: &Asserted,
        identity: &ProviderIdentity,
        placement: Option<&Placement>,
    ) -> Result<Account, AuthError> {
        match self.linked_account(identity).await? {
            Some(account) => Ok(account),
            None => self.link_or_provision(asserted, identity, placement).await,
        }
    }

    /// Records on the linked account, if there is one, that the provider's
    /// settings refused this identity (domain or group checks).
    pub async fn refuse_unauthorized(
        &self,
        provider: &str,
        subject: &str,
    ) -> Result<(), AuthError> {
        let identity = self.identity_of(provider, subject);
        if let Some(account) = self.linked_account(&identity).await? {
            self.refuse(&account.user_id, identity, ProviderRefusal::NotAuthorized)
                .await?;
        }
        Ok(())
    }

    async fn refuse(
        &self,
        user_id: &str,
        identity: ProviderIdentity,
        reason: ProviderRefusal,
    ) -> Result<(), AuthError> {
        let refuse = AccountCommand::RefuseProviderLogin {
            identity,
            reason,
            at: self.clock().now(),
        };
        self.command(user_id, refuse, user_id).await?;
        Ok(())
    }

    async fn link_or_provision(
        &self,
        asserted: &Asserted,
        identity: &ProviderIdentity,
        placement: Option<&Placement>,
    ) -> Result<Account, AuthError> {
        let email = asserted.email.as_deref().ok_or_else(|| {
            AuthError::Invalid("The identity provider did not share an email address".to_owned())
        })?;
        let email = Email::parse(email)?;
        if let Some(account) = self.account_by_email(email.as_str()).await? {
            if !asserted.email_verified {
                return Err(AuthError::Conflict(
                    "An account with this email exists: sign in to it and link the provider there"
                        .to_owned(),
                ));
            }
            self.link(&account.user_id, identity.clone()).await?;
            return self.account(&account.user_id).await;
        }
        let fallback = email.as_str().split('@').next().unwrap_or_default();
        let name = asserted
            .name
            .as_deref()
            .and_then(|name| DisplayName::parse(name).ok())
            .map_or_else(|| DisplayName::parse(fallback), Ok)?;
        // A password nobody holds: the account signs in through its provider
        // until its owner sets one.
        let password_hash = self.hasher().hash(random_token(32)).await?;
        let fields = NewFields {
            email: &email,
            name: &name,
            password_hash,
            email_verified: asserted.email_verified,
        };
        // The email's claim keeps a second account from being made for the
        // same person; the identity's claim follows, and a sign-in that
        // finds it missing links again by the (verified) email.
        let account = self.create_account(fields, Some(identity.clone())).await?;
        self.claim(identity, &account.user_id).await?;
        match placement {
            Some(placement) => {
                let org = self.log().load::<Organization>(&placement.org_id).await?;
                if org.created_at.is_none() {
                    return Err(AuthError::NotFound {
                        resource_type: "organization",
                        resource_id: placement.org_id.clone(),
                    });
                }
                self.join(&account.user_id, &org, placement.role).await?;
                self.account(&account.user_id).await
            }
            None => Ok(account),
        }
    }

    /// Links `identity` to the signed-in owner `user_id`.
    pub async fn link(&self, user_id: &str, identity: ProviderIdentity) -> Result<(), AuthError> {
        self.claim(&identity, user_id).await?;
        let link = AccountCommand::LinkIdentity {
            identity: identity.clone(),
            at: self.clock().now(),
        };
        if let Err(e) = self.command(user_id, link, user_id).await {
            self.release(&identity.subject_index, user_id).await?;
            return Err(e);
        }
        Ok(())
    }

    /// Unlinks the caller's identity at `provider`, unless it is their last
    /// way to sign in.
    pub async fn unlink(&self, user_id: &str, provider: &str) -> Result<(), AuthError> {
        let unlink = AccountCommand::UnlinkIdentity {
            provider: provider.to_owned(),
            at: self.clock().now(),
        };
        let (_, events) = self.command(user_id, unlink, user_id).await?;
        for event in events {
            if let agon_aggregates::account::AccountEvent::IdentityUnlinked {
                subject_index, ..
            } = event
            {
                self.release(&subject_index, user_id).await?;
            }
        }
        Ok(())
    }

    /// Ends every session of the account `identity` is linked to: the
    /// provider says its user signed out (single logout). How many ended.
    pub async fn end_provider_sessions(
        &self,
        identity: &ProviderIdentity,
    ) -> Result<usize, AuthError> {
        let Some(account) = self.linked_account(identity).await? else {
            return Ok(0);
        };
        let user_id = account.user_id.as_str();
        let mut ended = Vec::new();
        for session_id in account.sessions.keys() {
            let end = AccountCommand::EndSession {
                session_id: session_id.clone(),
                reason: agon_aggregates::account::RevokeReason::Logout,
                at: self.clock().now(),
            };
            match self.command(user_id, end, user_id).await {
                Ok((_, events)) => ended.extend(events),
                // Ended meanwhile (signed out, expired, evicted): as wanted.
                Err(AuthError::InvalidToken) => {}
                Err(e) => return Err(e),
            }
        }
        // One wait, for the last: the read model applies them in order.
        self.await_revocations(&ended).await?;
        Ok(ended.len())
    }

    async fn claim(&self, identity: &ProviderIdentity, user_id: &str) -> Result<(), AuthError> {
        let claim = IdentityClaimCommand::Claim {
            user_id: user_id.to_owned(),
        };
        self.log()
            .execute::<IdentityClaim>(&identity.subject_index, claim, CommandMeta::by(user_id))
            .await?;
        Ok(())
    }

    /// Lets an identity be linked again (unlinked, or its account erased).
    pub(super) async fn release(
        &self,
        subject_index: &str,
        user_id: &str,
    ) -> Result<(), AuthError> {
        let release = IdentityClaimCommand::Release {
            user_id: user_id.to_owned(),
        };
        self.log()
            .execute::<IdentityClaim>(subject_index, release, CommandMeta::by(user_id))
            .await?;
        Ok(())
    }
}
