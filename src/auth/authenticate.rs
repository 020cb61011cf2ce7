//! Turns a request's credentials into a [`Caller`]: an access token, an API
//! key, the static API token, or trusted service-to-service headers.

use std::net::IpAddr;

use agon_aggregates::account::{AccountCommand, RevokeReason, Role};
use agon_aggregates::ids::{OrgId, SessionId, UserId};
use agon_projections::{Accounts, ApiKeys, Sessions};

use super::activity::recent;
use super::caller::STATIC_TOKEN_USER;
use super::{Auth, AuthError, Caller, Credential};
use crate::crypto::jwt::TokenType;
use crate::crypto::secrets::{API_KEY_PREFIX, constant_time_eq, parse_api_key, sha256_hex};

/// Longest `X-User-Roles` list honoured.
const MAX_SERVICE_ROLES: usize = 16;
/// Longest service claim honoured, in bytes; a longer one counts as absent.
const MAX_SERVICE_CLAIM_BYTES: usize = 256;

/// A credential as a request presented it, read out of the request by the
/// face that received it; what it proves is decided here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Presented {
    /// No credential at all.
    #[default]
    Nothing,
    /// An `Authorization` value that is not `Bearer <token>`.
    Malformed,
    /// A bearer token: an access token, an API key or the static token.
    Bearer(String),
    /// Claims of a trusted service (`X-User-ID`, `X-Org-ID`, `X-User-Roles`),
    /// honoured only from a trusted network.
    Service(ServiceClaims),
}

/// What a trusted service asserts about the user it calls for; each value
/// trimmed, absent when empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceClaims {
    pub user_id: Option<String>,
    pub org_id: Option<String>,
    pub roles: Option<String>,
}

impl Auth {
    /// Who presented `credential` from `peer`: `Ok(None)` when it carries
    /// no credential, an error when its credential is not good.
    pub async fn identify(
        &self,
        credential: Presented,
        peer: Option<IpAddr>,
    ) -> Result<Option<Caller>, AuthError> {
        match credential {
            Presented::Nothing => Ok(None),
            Presented::Malformed => Err(AuthError::InvalidToken),
            Presented::Bearer(token) => self.bearer(&token).await.map(Some),
            Presented::Service(claims) => Ok(peer
                .filter(|ip| self.trusted_networks().iter().any(|net| net.contains(ip)))
                .and_then(|_| service_caller(claims))),
        }
    }

    async fn bearer(&self, token: &str) -> Result<Caller, AuthError> {
        if let Some(expected) = &self.settings().api_token
            && constant_time_eq(expected.expose().as_bytes(), token.as_bytes())
        {
            return Ok(Caller {
                user_id: UserId::from_trusted(STATIC_TOKEN_USER),
                email: None,
                role: Role::Admin,
                org_id: None,
                org_role: None,
                service_roles: Vec::new(),
                credential: Credential::StaticToken,
            });
        }
        if token.starts_with(API_KEY_PREFIX) {
            return self.api_key(token).await;
        }
        self.access_token(token).await
    }

    async fn api_key(&self, token: &str) -> Result<Caller, AuthError> {
        let parts = parse_api_key(token).ok_or(AuthError::InvalidToken)?;
        let key = self
            .live_key(&parts.key_id, &sha256_hex(&parts.secret))
            .await?
            .ok_or(AuthError::InvalidToken)?;
        let account = self
            .docs()
            .get::<Accounts>(&key.user_id)
            .await?
            .filter(|account| !account.disabled)
            .ok_or(AuthError::InvalidToken)?;
        let account = self.revealed_view(account).await?;
        self.key_used(&key.key_id).await?;
        Ok(Caller {
            credential: Credential::ApiKey {
                key_id: parts.key_id,
            },
            user_id: UserId::from_trusted(account.user_id),
            email: Some(account.email),
            role: account.role,
            org_id: account.org_id.map(OrgId::from_trusted),
            org_role: account.org_role,
            service_roles: Vec::new(),
        })
    }

    async fn access_token(&self, token: &str) -> Result<Caller, AuthError> {
        let claims = self.check_token(token, TokenType::Access)?;
        let session_id = claims.jti.clone();
        // A missing document means the projection has not caught up with a
        // sign-in that just happened: the signature already vouches for it.
        if let Some(session) = self.docs().get::<Sessions>(&session_id).await?
            && (session.revoked_at.is_some() || session.user_id != claims.sub)
        {
            return Err(AuthError::InvalidToken);
        }
        self.check_activity(&claims.sub, &session_id).await?;
        Ok(Caller {
            user_id: UserId::from_trusted(claims.sub),
            email: claims.email,
            role: match claims.role.as_deref() {
                Some("admin") => Role::Admin,
                _ => Role::User,
            },
            org_id: claims.org_id.map(OrgId::from_trusted),
            org_role: claims.org_role,
            service_roles: Vec::new(),
            credential: Credential::Session {
                session_id: SessionId::from_trusted(session_id),
            },
        })
    }

    /// Whether the credential `caller` was identified by still stands: its
    /// session not ended, its API key live and its account enabled. For a
    /// caller identified a while ago (a WebSocket ticket).
    pub async fn still_valid(&self, caller: &Caller) -> Result<bool, AuthError> {
        match &caller.credential {
            Credential::Session { session_id } => Ok(self
                .docs()
                .get::<Sessions>(session_id.as_str())
                .await?
                .is_none_or(|session| session.revoked_at.is_none())),
            Credential::ApiKey { key_id } => {
                let key = self.docs().get::<ApiKeys>(key_id).await?;
                let account = self.docs().get::<Accounts>(caller.user_id.as_str()).await?;
                Ok(key.is_some_and(|key| key.is_live())
                    && account.is_some_and(|account| !account.disabled))
            }
            Credential::StaticToken | Credential::ServiceHeaders => Ok(true),
        }
    }

    /// Ends a session unused for longer than the inactivity timeout, else
    /// records this use.
    pub async fn check_activity(&self, user_id: &str, session_id: &str) -> Result<(), AuthError> {
        let now = self.clock().unix();
        let timeout =
            i64::try_from(self.settings().inactivity_timeout.as_secs()).unwrap_or(i64::MAX);
        let last = self.last_activity(session_id).await?;
        if let Some(last) = last
            && now.saturating_sub(last) > timeout
        {
            let end = AccountCommand::EndSession {
                session_id: session_id.to_owned(),
                reason: RevokeReason::Inactive,
                at: self.clock().now(),
            };
            // Another request may have ended it first; either way it is over.
            if let Ok((_, events)) = self.command(user_id, end, "system").await {
                self.await_revocations(&events).await?;
            }
            return Err(AuthError::TokenExpired);
        }
        // Most requests come well within a minute of the last recorded use:
        // no write for them.
        if recent(last, now) {
            return Ok(());
        }
        self.touch(session_id, now).await
    }
}

/// The caller a trusted service describes.
fn service_caller(claims: ServiceClaims) -> Option<Caller> {
    let fits = |v: &String| v.len() <= MAX_SERVICE_CLAIM_BYTES;
    let user_id = claims.user_id.filter(fits)?;
    let service_roles: Vec<String> = claims
        .roles
        .filter(fits)
        .unwrap_or_default()
        .split(',')
        .map(|role| role.trim().to_ascii_lowercase())
        .filter(|role| !role.is_empty())
        .take(MAX_SERVICE_ROLES)
        .collect();
    let role = if service_roles.iter().any(|r| r == "admin") {
        Role::Admin
    } else {
        Role::User
    };
    Some(Caller {
        user_id: UserId::parse(&user_id).ok()?,
        email: None,
        role,
        org_id: claims
            .org_id
            .filter(fits)
            .and_then(|o| OrgId::parse(&o).ok()),
        org_role: None,
        service_roles: if service_roles.is_empty() {
            vec!["user".to_owned()]
        } else {
            service_roles
        },
        credential: Credential::ServiceHeaders,
    })
}
