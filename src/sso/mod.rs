//! Sign-in through identity providers, a service: the OAuth 2.0 provider
//! `extidp` (§5.3) spoken as OpenID Connect (`oidc.rs`), and enterprise SSO
//! (§5.4) as OpenID Connect or SAML 2.0 (`saml.rs`), with the flow between
//! redirect and callback kept as a one-use ticket (`flows.rs`) and the
//! organization's checks in `policy.rs`. What a provider vouches for goes
//! to the accounts service (`auth::providers`), which finds, links or
//! provisions the account and opens an ordinary session.

mod error;
pub mod flows;
mod oidc;
mod policy;
#[cfg(feature = "saml")]
mod saml;
#[cfg(not(feature = "saml"))]
#[path = "saml_off.rs"]
mod saml;
#[cfg(feature = "saml")]
mod saml_shape;

use std::sync::Arc;

use agon_aggregates::account::{Device, RevokeReason};
use serde_json::Value;
use url::Url;

pub use error::SsoError;
pub use flows::Purpose;
use flows::{Pending, Proof};

use crate::auth::login::LoginOutcome;
use crate::auth::providers::Asserted;
use crate::auth::{Auth, AuthError, Caller};
use crate::clock::Clock;
use crate::config::{OAuthSettings, SsoProtocol, SsoSettings};
use crate::crypto::secrets::random_token;
use crate::store::EventLog;

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
    /// `oauth2` (OpenID Connect underneath), `oidc` or `saml`.
    pub protocol: &'static str,
    /// `SERVICE_SSO_PROVIDER_TYPE` for SSO.
    pub provider_type: String,
    /// The OIDC issuer, or the SAML identity provider's entity id.
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

/// What a provider vouched for, its checks passed.
#[derive(Debug, Clone)]
pub struct Vouched {
    pub subject: String,
    pub email: Option<String>,
    pub email_verified: bool,
    pub name: Option<String>,
    /// Every claim of the ID token, or every SAML attribute as an array of
    /// its values, for settings that name one (groups).
    pub claims: Value,
}

/// What a verified SAML assertion says.
#[derive(Debug)]
pub struct SamlIdentity {
    /// The NameID.
    pub subject: String,
    pub email: Option<String>,
    pub name: Option<String>,
    /// The attributes, each as an array of its values (groups among them).
    pub claims: Value,
    /// Accepted once: kept until `usable_until`, after which the assertion
    /// is too old to be accepted anyway.
    pub assertion_id: String,
    pub usable_until: chrono::DateTime<chrono::Utc>,
}

/// A logout the provider asked for (IdP-initiated single logout).
#[derive(Debug)]
pub struct SamlLogout {
    pub name_id: String,
    pub request_id: String,
    /// Handed back unread with our answer.
    pub relay_state: Option<String>,
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

/// A provider, in the protocol it speaks.
#[derive(Debug)]
enum Provider {
    Oidc(Box<oidc::Provider>),
    Saml(Box<saml::Provider>),
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
    extidp: Option<Provider>,
    sso: Option<Provider>,
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
        let oidc = |client| {
            Provider::Oidc(Box::new(oidc::Provider::new(
                client,
                http.clone(),
                settings.discovery_ttl,
            )))
        };
        let sso = match settings.sso.as_ref() {
            None => None,
            Some(sso) => Some(match &sso.protocol {
                SsoProtocol::Oidc(client) => oidc(client.clone()),
                SsoProtocol::Saml(saml) => {
                    Provider::Saml(Box::new(saml::Provider::new(saml, &sso.entity_id)?))
                }
            }),
        };
        Ok(Self(Arc::new(Inner {
            extidp: settings.extidp.clone().map(oidc),
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

    fn provider(&self, which: Which) -> Result<&Provider, SsoError> {
        match which {
            Which::ExtIdp => self.0.extidp.as_ref(),
            Which::Sso => self.0.sso.as_ref(),
        }
        .ok_or(SsoError::NotConfigured(which.name()))
    }

    /// The providers configured, for a sign-in page.
    pub fn providers(&self) -> Vec<ProviderInfo> {
        let mut providers = Vec::new();
        if let Some(Provider::Oidc(extidp)) = &self.0.extidp {
            providers.push(ProviderInfo {
                id: "extidp",
                protocol: "oauth2",
                provider_type: "extidp".to_owned(),
                issuer_url: extidp.settings().issuer_url.clone(),
                login_url: "/api/auth/oauth/extidp",
            });
        }
        if let (Some(sso), Some(settings)) = (&self.0.sso, self.sso_settings()) {
            let (protocol, issuer_url) = match sso {
                Provider::Oidc(oidc) => ("oidc", oidc.settings().issuer_url.clone()),
                Provider::Saml(saml) => ("saml", saml.settings().idp_entity_id.clone()),
            };
            providers.push(ProviderInfo {
                id: "sso",
                protocol,
                provider_type: settings.provider_type.clone(),
                issuer_url,
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
        let (url, proof) = match provider {
            Provider::Oidc(oidc) => {
                let authorization = oidc.authorize(state.clone()).await?;
                let proof = Proof::Oidc {
                    pkce_verifier: authorization.pkce_verifier,
                    nonce: authorization.nonce,
                };
                (authorization.url, proof)
            }
            Provider::Saml(saml) => {
                // An XML ID must not start with a digit.
                let saml_request_id = format!("_{}", random_token(24));
                let url = saml.authorize(&state, &saml_request_id)?;
                (url, Proof::Saml { saml_request_id })
            }
        };
        let pending = Pending {
            provider: which.name().to_owned(),
            purpose,
            redirect,
            proof,
        };
        flows::keep(&inner.log, &inner.clock, &state, &pending).await?;
        Ok(url)
    }

    /// Finishes the OpenID Connect flow of `state` with the provider's answer.
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
        let pending = self.pending(which, state).await?;
        let (
            Provider::Oidc(provider),
            Proof::Oidc {
                pkce_verifier,
                nonce,
            },
        ) = (self.provider(which)?, &pending.proof)
        else {
            return Err(SsoError::InvalidState);
        };
        if let Some(error) = provider_error {
            return Err(SsoError::Refused(error));
        }
        let code = code.ok_or_else(|| SsoError::Refused("no authorization code".to_owned()))?;
        // RFC 9207: a response naming another issuer is a mix-up.
        if issuer.is_some_and(|issuer| issuer != provider.settings().issuer_url) {
            return Err(SsoError::Refused(
                "the answer names another issuer".to_owned(),
            ));
        }
        let vouched = provider.finish(code, pkce_verifier.clone(), nonce).await?;
        self.conclude(which, pending, vouched, device).await
    }

    /// Finishes the SAML flow of `relay_state` with the posted response.
    pub async fn finish_saml(
        &self,
        relay_state: &str,
        saml_response: &str,
        device: Device,
    ) -> Result<Finished, SsoError> {
        let inner = &self.0;
        let pending = self.pending(Which::Sso, relay_state).await?;
        let (Provider::Saml(provider), Proof::Saml { saml_request_id }) =
            (self.provider(Which::Sso)?, &pending.proof)
        else {
            return Err(SsoError::InvalidState);
        };
        let identity = provider.consume(saml_response, saml_request_id)?;
        let claimed = flows::claim_assertion(
            &inner.log,
            &inner.clock,
            &provider.settings().idp_entity_id,
            &identity.assertion_id,
            identity.usable_until.timestamp(),
        )
        .await?;
        if !claimed {
            return Err(SsoError::Replayed);
        }
        // An address is the provider's to vouch for only in the domains the
        // operator restricted SSO to (SAML has no `email_verified`).
        let email_verified = self
            .sso_settings()
            .is_some_and(|settings| !settings.allowed_domains.is_empty());
        let vouched = Vouched {
            subject: identity.subject,
            email: identity.email,
            email_verified,
            name: identity.name,
            claims: identity.claims,
        };
        self.conclude(Which::Sso, pending, vouched, device).await
    }

    /// The flow `state` stands for, once, if it was started at `which`.
    async fn pending(&self, which: Which, state: &str) -> Result<Pending, SsoError> {
        let pending = flows::take(&self.0.log, &self.0.clock, state).await?;
        if pending.provider != which.name() {
            return Err(SsoError::InvalidState);
        }
        Ok(pending)
    }

    /// Signs in or links whoever the provider vouched for.
    async fn conclude(
        &self,
        which: Which,
        pending: Pending,
        vouched: Vouched,
        device: Device,
    ) -> Result<Finished, SsoError> {
        let inner = &self.0;
        let placement = match which {
            Which::Sso => {
                let settings = self.sso_settings().ok_or(SsoError::NotConfigured("sso"))?;
                policy::authorize(&inner.auth, settings, &vouched).await?
            }
            Which::ExtIdp => None,
        };
        let redirect = pending
            .redirect
            .unwrap_or_else(|| inner.settings.success_url.clone());
        let asserted = Asserted {
            provider: which.name(),
            subject: vouched.subject,
            email: vouched.email,
            email_verified: vouched.email_verified,
            name: vouched.name,
        };
        match pending.purpose {
            Purpose::Link { user_id } => {
                let linked = inner.auth.identity_of(which.name(), &asserted.subject);
                inner.auth.link(&user_id, linked).await?;
                Ok(Finished::Linked { redirect })
            }
            Purpose::SignIn => {
                let outcome = inner
                    .auth
                    .sign_in_with_provider(&asserted, placement.as_ref(), device)
                    .await?;
                Ok(Finished::SignedIn { outcome, redirect })
            }
        }
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

    /// Our SAML service provider metadata, when SSO speaks SAML.
    pub fn saml_metadata(&self) -> Result<String, SsoError> {
        match &self.0.sso {
            Some(Provider::Saml(saml)) => Ok(saml.metadata()),
            _ => Err(SsoError::NotConfigured("saml")),
        }
    }

    /// The provider's single logout (a signed logout request in
    /// `raw_query`): every session of the account linked to its NameID
    /// ends; where the browser goes next (the provider, with our answer).
    pub async fn provider_logout(&self, raw_query: &str) -> Result<String, SsoError> {
        let inner = &self.0;
        let Some(Provider::Saml(saml)) = &inner.sso else {
            return Err(SsoError::NotConfigured("saml"));
        };
        let asked = saml.logout_request(raw_query)?;
        let identity = inner.auth.identity_of(Which::Sso.name(), &asked.name_id);
        let ended = inner.auth.end_provider_sessions(&identity).await?;
        tracing::info!(ended, "the identity provider signed a user out");
        let response_id = format!("_{}", random_token(24));
        let answer = saml.logout_response_url(
            &asked.request_id,
            asked.relay_state.as_deref(),
            &response_id,
        )?;
        Ok(answer.unwrap_or_else(|| inner.settings.success_url.clone()))
    }

    /// Ends the caller's session; the provider's end-session address (an
    /// RP-initiated logout, or a SAML logout request) when it has one.
    pub async fn logout(&self, caller: &Caller) -> Result<Option<String>, SsoError> {
        let session_id = caller.session_id().ok_or_else(|| {
            AuthError::Forbidden(
                "Logout needs an access token; revoke API keys with DELETE /api/auth/api-key"
                    .to_owned(),
            )
        })?;
        let inner = &self.0;
        inner
            .auth
            .end_session(caller, session_id, RevokeReason::Logout)
            .await?;
        match &inner.sso {
            Some(Provider::Oidc(oidc)) => oidc.end_session(&inner.settings.success_url).await,
            // The NameID is the account's address (format emailAddress).
            Some(Provider::Saml(saml)) => match &caller.email {
                Some(email) => saml.logout_url(email, &format!("_{}", random_token(24))),
                None => Ok(None),
            },
            None => Ok(None),
        }
    }
}
