//! Sign-in through identity providers, a service: the OAuth 2.0 provider
//! `extidp` (§5.3) and enterprise SSO (§5.4), both spoken as OpenID Connect
//! (`oidc.rs`), with the flow between redirect and callback kept as a
//! one-use ticket (`flows.rs`). What a provider vouches for goes to the
//! accounts service (`auth::providers`), which finds, links or provisions
//! the account and opens an ordinary session.

pub mod flows;
mod oidc;

use std::sync::Arc;

use agon_aggregates::account::{Device, RevokeReason};
use agon_aggregates::organization::OrgRole;
use serde_json::Value;
use url::Url;

pub use flows::Purpose;

use crate::auth::login::LoginOutcome;
use crate::auth::providers::{Asserted, Placement};
use crate::auth::{Auth, AuthError, Caller};
use crate::clock::Clock;
use crate::config::{OAuthSettings, SsoProtocol, SsoSettings};
use crate::store::{EventLog, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum SsoError {
    #[error("{0} sign-in is not configured")]
    NotConfigured(&'static str),
    #[error("Invalid redirect URL")]
    InvalidRedirect,
    #[error("State token expired")]
    StateExpired,
    #[error("Invalid state token")]
    InvalidState,
    #[error("Invalid client credentials")]
    InvalidClient,
    #[error("The identity provider refused the sign-in: {0}")]
    Refused(String),
    #[error("The identity provider's ID token was rejected: {0}")]
    Token(String),
    /// Internal: the token named a key the cached set lacks (keys are
    /// fetched again once before this becomes [`SsoError::Token`]).
    #[error("The identity provider's ID token was rejected: no key matches it")]
    UnknownKey,
    #[error("User not authorized")]
    NotAuthorized,
    #[error("The identity provider could not be reached: {0}")]
    Unreachable(String),
    #[error("identity provider setting: {0}")]
    Provider(String),
    #[error("sign-in flow: {0}")]
    Flow(String),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("event store: {0}")]
    Store(#[from] StoreError),
}

impl SsoError {
    /// Whether the service, not the caller or the provider's answer, failed.
    pub fn is_fault(&self) -> bool {
        match self {
            SsoError::Flow(_) | SsoError::Store(_) => true,
            SsoError::Auth(e) => e.is_fault(),
            _ => false,
        }
    }
}

/// Which provider a route speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// The OAuth 2.0 provider of the `extidp` paths.
    ExtIdp,
    /// Enterprise SSO.
    Sso,
}

impl Which {
    pub fn name(self) -> &'static str {
        match self {
            Which::ExtIdp => "extidp",
            Which::Sso => "sso",
        }
    }
}

/// A provider a client may send its users to.
#[derive(Debug, Clone)]
pub struct ProviderInfo {
    /// `extidp` or `sso`.
    pub id: &'static str,
    /// `oauth2` (OpenID Connect underneath) or `oidc`.
    pub protocol: &'static str,
    /// `SERVICE_SSO_PROVIDER_TYPE` for SSO.
    pub provider_type: String,
    pub issuer_url: String,
    /// Where a browser starts the sign-in.
    pub login_url: &'static str,
}

/// What the provider's redirect to the callback carried.
#[derive(Debug, Default)]
pub struct Answer {
    pub code: Option<String>,
    /// The provider's refusal, with its description.
    pub error: Option<String>,
    /// `iss` (RFC 9207), when the provider sends it.
    pub issuer: Option<String>,
}

/// How a callback ended, and where the browser goes next.
#[derive(Debug)]
pub enum Finished {
    SignedIn {
        outcome: LoginOutcome,
        redirect: String,
    },
    Linked {
        redirect: String,
    },
}

/// The service; cheap to clone.
#[derive(Debug, Clone)]
pub struct Sso(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    auth: Auth,
    log: EventLog,
    clock: Clock,
    settings: OAuthSettings,
    extidp: Option<oidc::Provider>,
    sso: Option<oidc::Provider>,
}

impl Sso {
    pub fn new(
        settings: &OAuthSettings,
        auth: Auth,
        log: EventLog,
        clock: Clock,
    ) -> Result<Self, SsoError> {
        // Provider addresses come from the operator's settings; redirects
        // are still never followed (the discovery and token calls expect
        // answers, not redirects).
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(settings.timeout)
            .build()
            .map_err(|e| SsoError::Provider(format!("HTTP client: {e}")))?;
        let provider = |client| oidc::Provider::new(client, http.clone(), settings.discovery_ttl);
        let sso = settings.sso.as_ref().map(|sso| match &sso.protocol {
            SsoProtocol::Oidc(client) => provider(client.clone()),
        });
        Ok(Self(Arc::new(Inner {
            extidp: settings.extidp.clone().map(provider),
            sso,
            auth,
            log,
            clock,
            settings: settings.clone(),
        })))
    }

    pub fn sso_settings(&self) -> Option<&SsoSettings> {
        self.0.settings.sso.as_ref()
    }

    fn provider(&self, which: Which) -> Result<&oidc::Provider, SsoError> {
        match which {
            Which::ExtIdp => self.0.extidp.as_ref(),
            Which::Sso => self.0.sso.as_ref(),
        }
        .ok_or(SsoError::NotConfigured(which.name()))
    }

    /// The providers configured, for a sign-in page.
    pub fn providers(&self) -> Vec<ProviderInfo> {
        let mut providers = Vec::new();
        if let Some(extidp) = &self.0.extidp {
            providers.push(ProviderInfo {
                id: "extidp",
                protocol: "oauth2",
                provider_type: "extidp".to_owned(),
                issuer_url: extidp.settings().issuer_url.clone(),
                login_url: "/api/auth/oauth/extidp",
            });
        }
        if let (Some(sso), Some(settings)) = (&self.0.sso, self.sso_settings()) {
            providers.push(ProviderInfo {
                id: "sso",
                protocol: "oidc",
                provider_type: settings.provider_type.clone(),
                issuer_url: sso.settings().issuer_url.clone(),
                login_url: "/api/v1/auth/sso/login",
            });
        }
        providers
    }

    /// `url` if it is an http(s) address on an allowed host.
    pub fn checked_redirect(&self, url: &str) -> Result<String, SsoError> {
        let parsed = Url::parse(url).map_err(|_| SsoError::InvalidRedirect)?;
        let allowed = matches!(parsed.scheme(), "http" | "https")
            && parsed.host_str().is_some_and(|host| {
                self.0
                    .settings
                    .allowed_redirect_hosts
                    .iter()
                    .any(|allowed| allowed.eq_ignore_ascii_case(host))
            });
        if allowed {
            Ok(parsed.to_string())
        } else {
            Err(SsoError::InvalidRedirect)
        }
    }

    /// Starts a flow at `which`: the provider's authorization address.
    pub async fn start(
        &self,
        which: Which,
        purpose: Purpose,
        redirect: Option<&str>,
    ) -> Result<String, SsoError> {
        let provider = self.provider(which)?;
        let redirect = redirect.map(|url| self.checked_redirect(url)).transpose()?;
        let inner = &self.0;
        let ttl = i64::try_from(inner.settings.state_ttl.as_secs()).unwrap_or(600);
        let state = flows::new_state(&inner.clock, ttl);
        let authorization = provider.authorize(state.clone()).await?;
        let pending = flows::Pending {
            provider: which.name().to_owned(),
            purpose,
            redirect,
            pkce_verifier: authorization.pkce_verifier,
            nonce: authorization.nonce,
        };
        flows::keep(&inner.log, &inner.clock, &state, &pending).await?;
        Ok(authorization.url)
    }

    /// Finishes the flow of `state` with the provider's `code`.
    pub async fn finish(
        &self,
        which: Which,
        state: &str,
        answer: Answer,
        device: Device,
    ) -> Result<Finished, SsoError> {
        let Answer {
            code,
            error: provider_error,
            issuer,
        } = answer;
        let inner = &self.0;
        let pending = flows::take(&inner.log, &inner.clock, state).await?;
        if pending.provider != which.name() {
            return Err(SsoError::InvalidState);
        }
        if let Some(error) = provider_error {
            return Err(SsoError::Refused(error));
        }
        let code = code.ok_or_else(|| SsoError::Refused("no authorization code".to_owned()))?;
        let provider = self.provider(which)?;
        // RFC 9207: a response naming another issuer is a mix-up.
        if issuer.is_some_and(|issuer| issuer != provider.settings().issuer_url) {
            return Err(SsoError::Refused(
                "the answer names another issuer".to_owned(),
            ));
        }
        let identity = provider
            .finish(code, pending.pkce_verifier, &pending.nonce)
            .await?;
        let placement = match which {
            Which::Sso => self.authorize_sso(&identity).await?,
            Which::ExtIdp => None,
        };
        let asserted = Asserted {
            provider: which.name(),
            subject: identity.subject,
            email: identity.email,
            email_verified: identity.email_verified,
            name: identity.name,
        };
        match pending.purpose {
            Purpose::Link { user_id } => {
                let linked = inner.auth.identity_of(which.name(), &asserted.subject);
                inner.auth.link(&user_id, linked).await?;
                Ok(Finished::Linked {
                    redirect: pending
                        .redirect
                        .unwrap_or_else(|| inner.settings.success_url.clone()),
                })
            }
            Purpose::SignIn => {
                let outcome = inner
                    .auth
                    .sign_in_with_provider(&asserted, placement.as_ref(), device)
                    .await?;
                Ok(Finished::SignedIn {
                    outcome,
                    redirect: pending
                        .redirect
                        .unwrap_or_else(|| inner.settings.success_url.clone()),
                })
            }
        }
    }

    /// The domain and group checks of SSO; the organization and role a
    /// provisioned account gets.
    async fn authorize_sso(
        &self,
        identity: &oidc::Identity,
    ) -> Result<Option<Placement>, SsoError> {
        let Some(settings) = self.sso_settings() else {
            return Err(SsoError::NotConfigured("sso"));
        };
        let groups = groups(&identity.claims, &settings.groups_claim);
        let domain_ok = settings.allowed_domains.is_empty()
            || identity
                .email
                .as_deref()
                .and_then(|email| email.rsplit_once('@'))
                .is_some_and(|(_, domain)| {
                    settings
                        .allowed_domains
                        .iter()
                        .any(|allowed| allowed.eq_ignore_ascii_case(domain))
                });
        let group_ok = settings.allowed_groups.is_empty()
            || groups
                .iter()
                .any(|group| settings.allowed_groups.contains(group));
        if !(domain_ok && group_ok) {
            tracing::info!(
                domain_ok,
                group_ok,
                "SSO sign-in refused by the domain or group settings"
            );
            self.0
                .auth
                .refuse_unauthorized("sso", &identity.subject)
                .await?;
            return Err(SsoError::NotAuthorized);
        }
        Ok(settings.org_id.as_ref().map(|org_id| Placement {
            org_id: org_id.clone(),
            role: role_for(&groups, &settings.group_roles, settings.default_role),
        }))
    }

    /// Where a finished sign-in lands when the caller named no address.
    pub fn success_url(&self) -> &str {
        &self.0.settings.success_url
    }

    /// Where a failed callback sends the browser: the error address with
    /// the message in its query (a fault of the service says only that).
    pub fn error_redirect(&self, error: &SsoError) -> String {
        let message = if error.is_fault() {
            "Sign-in failed on our side; please try again".to_owned()
        } else {
            error.to_string()
        };
        // The setting was checked to be a URL when it was read.
        let Ok(mut url) = Url::parse(&self.0.settings.error_url) else {
            return self.0.settings.error_url.clone();
        };
        url.query_pairs_mut().append_pair("error", &message);
        url.to_string()
    }

    /// Ends the caller's session; the provider's end-session address (an
    /// RP-initiated logout) when SSO has one.
    pub async fn logout(&self, caller: &Caller) -> Result<Option<String>, SsoError> {
        let session_id = caller.session_id().ok_or_else(|| {
            AuthError::Forbidden(
                "Logout needs an access token; revoke API keys with DELETE /api/auth/api-key"
                    .to_owned(),
            )
        })?;
        self.0
            .auth
            .end_session(caller, session_id, RevokeReason::Logout)
            .await?;
        match &self.0.sso {
            Some(sso) => sso.end_session(&self.0.settings.success_url).await,
            None => Ok(None),
        }
    }
}

/// The groups a token lists under `claim`: an array of strings, or one string.
fn groups(claims: &Value, claim: &str) -> Vec<String> {
    match claims.get(claim) {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => Vec::new(),
    }
}

/// The role of the first mapping whose group the user is in.
fn role_for(groups: &[String], mapping: &[(String, OrgRole)], default: OrgRole) -> OrgRole {
    mapping
        .iter()
        .find(|(group, _)| groups.contains(group))
        .map_or(default, |(_, role)| *role)
}
