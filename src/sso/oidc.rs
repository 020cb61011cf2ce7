//! One OpenID Connect provider, as a relying party: discovery (kept for a
//! while), the authorization request with PKCE, state and nonce, the code
//! exchange, and the ID token's checks (signature against the provider's
//! keys, fetched again when a token names a key they lack; issuer,
//! audience, expiry, nonce). Used by the OAuth provider `extidp` and by
//! enterprise SSO alike.

use std::time::Instant;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use openidconnect::ProviderMetadataWithLogout;
use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreErrorResponseType, CoreIdToken, CoreIdTokenVerifier,
};
use openidconnect::{
    AuthorizationCode, ClaimsVerificationError, ClientId, ClientSecret, CsrfToken,
    EndpointMaybeSet, EndpointNotSet, EndpointSet, IssuerUrl, JsonWebKeySet, Nonce,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RequestTokenError, Scope,
    SignatureVerificationError, TokenResponse,
};
use serde_json::Value;
use tokio::sync::Mutex;

use super::{SsoError, Vouched};
use crate::config::OidcClient;

/// An authorization request to send the browser to.
pub struct Authorization {
    pub url: String,
    pub pkce_verifier: String,
    pub nonce: String,
}

/// A client built from discovered metadata: authorization endpoint set,
/// token and user-info endpoints as the provider lists them.
type RelyingParty = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

pub struct Provider {
    client: OidcClient,
    http: reqwest::Client,
    ttl: std::time::Duration,
    discovered: Mutex<Option<(ProviderMetadataWithLogout, Instant)>>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("issuer", &self.client.issuer_url)
            .finish_non_exhaustive()
    }
}

impl Provider {
    pub fn new(client: OidcClient, http: reqwest::Client, ttl: std::time::Duration) -> Self {
        Self {
            client,
            http,
            ttl,
            discovered: Mutex::new(None),
        }
    }

    pub fn settings(&self) -> &OidcClient {
        &self.client
    }

    /// The provider's metadata and keys, discovered now or lately.
    async fn metadata(&self, fresh: bool) -> Result<ProviderMetadataWithLogout, SsoError> {
        let mut held = self.discovered.lock().await;
        if let Some((metadata, at)) = held.as_ref()
            && !fresh
            && at.elapsed() < self.ttl
        {
            return Ok(metadata.clone());
        }
        let issuer = IssuerUrl::new(self.client.issuer_url.clone())
            .map_err(|e| SsoError::Provider(format!("issuer URL: {e}")))?;
        let metadata = ProviderMetadataWithLogout::discover_async(issuer, &self.http)
            .await
            .map_err(|e| SsoError::Unreachable(format!("discovery: {e}")))?;
        *held = Some((metadata.clone(), Instant::now()));
        Ok(metadata)
    }

    /// The keys again, after a token named one the cached set lacks.
    async fn refresh_keys(&self) -> Result<ProviderMetadataWithLogout, SsoError> {
        let metadata = self.metadata(false).await?;
        let keys = JsonWebKeySet::fetch_async(metadata.jwks_uri(), &self.http)
            .await
            .map_err(|e| SsoError::Unreachable(format!("keys: {e}")))?;
        let metadata = metadata.set_jwks(keys);
        *self.discovered.lock().await = Some((metadata.clone(), Instant::now()));
        Ok(metadata)
    }

    fn relying_party(
        &self,
        metadata: ProviderMetadataWithLogout,
    ) -> Result<RelyingParty, SsoError> {
        let redirect = RedirectUrl::new(self.client.redirect_uri.clone())
            .map_err(|e| SsoError::Provider(format!("redirect URI: {e}")))?;
        let secret = self
            .client
            .client_secret
            .as_ref()
            .map(|secret| ClientSecret::new(secret.expose().to_owned()));
        Ok(CoreClient::from_provider_metadata(
            metadata,
            ClientId::new(self.client.client_id.clone()),
            secret,
        )
        .set_redirect_uri(redirect))
    }

    /// Where to send the browser, carrying `state`.
    pub async fn authorize(&self, state: String) -> Result<Authorization, SsoError> {
        let client = self.relying_party(self.metadata(false).await?)?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client.authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            move || CsrfToken::new(state),
            Nonce::new_random,
        );
        for scope in self.client.scopes.iter().filter(|s| *s != "openid") {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, _, nonce) = request.set_pkce_challenge(challenge).url();
        Ok(Authorization {
            url: url.to_string(),
            pkce_verifier: verifier.secret().clone(),
            nonce: nonce.secret().clone(),
        })
    }

    /// Exchanges `code` and checks the ID token it brings.
    pub async fn finish(
        &self,
        code: String,
        pkce_verifier: String,
        nonce: &str,
    ) -> Result<Vouched, SsoError> {
        let client = self.relying_party(self.metadata(false).await?)?;
        let response = client
            .exchange_code(AuthorizationCode::new(code))
            .map_err(|e| SsoError::Provider(format!("token endpoint: {e}")))?
            .set_pkce_verifier(PkceCodeVerifier::new(pkce_verifier))
            .request_async(&self.http)
            .await
            .map_err(|e| match e {
                RequestTokenError::ServerResponse(response)
                    if matches!(
                        response.error(),
                        CoreErrorResponseType::InvalidClient
                            | CoreErrorResponseType::UnauthorizedClient
                    ) =>
                {
                    SsoError::InvalidClient
                }
                RequestTokenError::ServerResponse(response) => {
                    SsoError::Refused(response.error().to_string())
                }
                other => SsoError::Unreachable(format!("token endpoint: {other}")),
            })?;
        let id_token = response
            .id_token()
            .ok_or_else(|| SsoError::Token("the provider returned no ID token".to_owned()))?
            .clone();
        let nonce = Nonce::new(nonce.to_owned());
        let checked = match verified(&client.id_token_verifier(), &id_token, &nonce) {
            Err(SsoError::UnknownKey) => {
                let client = self.relying_party(self.refresh_keys().await?)?;
                verified(&client.id_token_verifier(), &id_token, &nonce)
            }
            other => other,
        }?;
        Ok(checked)
    }

    /// The provider's end-session address, for an RP-initiated logout
    /// (identified by our client id: ID tokens are not kept).
    pub async fn end_session(&self, after: &str) -> Result<Option<String>, SsoError> {
        let metadata = self.metadata(false).await?;
        let Some(endpoint) = metadata.additional_metadata().end_session_endpoint.clone() else {
            return Ok(None);
        };
        let mut url = endpoint.url().clone();
        {
            let mut query = url.query_pairs_mut();
            query.append_pair("client_id", &self.client.client_id);
            query.append_pair("post_logout_redirect_uri", after);
        }
        Ok(Some(url.to_string()))
    }
}

fn verified(
    verifier: &CoreIdTokenVerifier<'_>,
    id_token: &CoreIdToken,
    nonce: &Nonce,
) -> Result<Vouched, SsoError> {
    let claims = id_token.claims(verifier, nonce).map_err(|e| match e {
        ClaimsVerificationError::SignatureVerification(
            SignatureVerificationError::NoMatchingKey,
        ) => SsoError::UnknownKey,
        other => SsoError::Token(other.to_string()),
    })?;
    let raw = id_token.to_string();
    // The signature was checked above; the payload is read again only for
    // claims the typed set leaves out (groups).
    let all = raw
        .split('.')
        .nth(1)
        .and_then(|payload| URL_SAFE_NO_PAD.decode(payload).ok())
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .unwrap_or(Value::Null);
    Ok(Vouched {
        subject: claims.subject().as_str().to_owned(),
        email: claims.email().map(|email| email.as_str().to_owned()),
        email_verified: claims.email_verified().unwrap_or(false),
        name: claims
            .name()
            .and_then(|name| name.get(None))
            .map(|name| name.as_str().to_owned()),
        claims: all,
    })
}
