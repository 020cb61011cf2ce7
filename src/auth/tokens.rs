//! Issuing the access/refresh pair of a session, and the short-lived token
//! that carries a half-finished sign-in to its second factor.

use agon_aggregates::account::{Account, ProviderIdentity};
use serde::Serialize;
use utoipa::ToSchema;

use super::{Auth, AuthError};
use crate::crypto::jwt::{Claims, TokenType};

/// What a successful sign-in or refresh returns.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TokenPair {
    pub access_token: String,
    pub refresh_token: String,
    /// Always `bearer`.
    pub token_type: &'static str,
    /// Seconds until the access token expires.
    pub expires_in: u64,
    /// Seconds until the refresh token expires.
    pub refresh_expires_in: u64,
    /// The session both tokens belong to (the tokens' `jti`).
    pub session_id: String,
}

impl Auth {
    /// Signs the tokens of `session_id`, refresh generation `generation`.
    pub fn issue_pair(
        &self,
        account: &Account,
        session_id: &str,
        generation: u32,
    ) -> Result<TokenPair, AuthError> {
        let settings = self.settings();
        let now = self.clock().unix();
        let access_ttl = settings.access_ttl.as_secs();
        let refresh_ttl = settings.refresh_ttl.as_secs();
        let ttl = |seconds: u64| i64::try_from(seconds).unwrap_or(i64::MAX);
        let access = Claims {
            exp: now.saturating_add(ttl(access_ttl)),
            iat: now,
            sub: account.user_id.clone(),
            jti: session_id.to_owned(),
            token_type: TokenType::Access,
            email: Some(account.email.clone()),
            role: Some(account.role.as_str().to_owned()),
            generation: None,
            org_id: account.org_id.clone(),
            org_role: account.org_role.clone(),
            via: None,
        };
        let refresh = Claims {
            exp: now.saturating_add(ttl(refresh_ttl)),
            iat: now,
            sub: account.user_id.clone(),
            jti: session_id.to_owned(),
            token_type: TokenType::Refresh,
            email: None,
            role: None,
            generation: Some(generation),
            org_id: None,
            org_role: None,
            via: None,
        };
        Ok(TokenPair {
            access_token: self.sign(&access)?,
            refresh_token: self.sign(&refresh)?,
            token_type: "bearer",
            expires_in: access_ttl,
            refresh_expires_in: refresh_ttl,
            session_id: session_id.to_owned(),
        })
    }

    /// A token proving that `user_id` passed the first step just now: the
    /// password, or the provider identity `via`.
    pub fn issue_mfa_token(
        &self,
        user_id: &str,
        via: Option<ProviderIdentity>,
    ) -> Result<String, AuthError> {
        let now = self.clock().unix();
        let claims = Claims {
            exp: now + i64::from(self.settings().mfa_step_seconds),
            iat: now,
            sub: user_id.to_owned(),
            jti: uuid::Uuid::new_v4().to_string(),
            token_type: TokenType::Mfa,
            email: None,
            role: None,
            generation: None,
            org_id: None,
            org_role: None,
            via,
        };
        self.sign(&claims)
    }

    fn sign(&self, claims: &Claims) -> Result<String, AuthError> {
        self.keys().issue(claims).map_err(AuthError::Signing)
    }

    /// The claims of `token` if it is a valid token of type `kind` now.
    pub fn check_token(&self, token: &str, kind: TokenType) -> Result<Claims, AuthError> {
        Ok(self.keys().verify(token, kind, self.clock().unix())?)
    }
}
