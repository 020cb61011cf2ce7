//! Authentication and authorization of every request, in two layers around
//! the rate limiter: [`identify`] reads the credential before the limiter
//! (so that it counts per user), [`guard`] enforces the route's [`Access`]
//! after it (so that refused requests still count against the address).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::Platform;
use super::error::ApiError;
use super::ratelimit::Principal;
use super::routes::{Access, Mount};
use super::version::{ApiVersion, Negotiated};
use crate::auth::{AuthError, Caller, Credential};

/// The outcome of reading a request's credential, kept for [`guard`].
#[derive(Debug, Clone)]
struct Identity(Result<Option<Caller>, Arc<AuthError>>);

pub async fn identify(
    State(platform): State<Platform>,
    mut request: Request,
    next: Next,
) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let identity = platform
        .auth
        .identify(super::caller::presented(request.headers()), peer)
        .await
        .map_err(Arc::new);
    // Rate-limit tiers arrive with billing; until then only an outer layer
    // (the rate-limit tests) sets a principal with a tier, and it is kept.
    if let Ok(Some(caller)) = &identity
        && request.extensions().get::<Principal>().is_none()
    {
        request.extensions_mut().insert(Principal {
            user_id: caller.user_id.to_string(),
            tier: None,
        });
    }
    request.extensions_mut().insert(Identity(identity));
    next.run(request).await
}

pub async fn guard(mut request: Request, next: Next) -> Response {
    let mount = request.extensions().get::<Arc<Mount>>();
    let access = mount.map_or(Access::Public, |mount| mount.access);
    let oauth_only = mount.is_some_and(|mount| mount.oauth_under_v2)
        && request
            .extensions()
            .get::<Negotiated>()
            .is_some_and(|negotiated| negotiated.version == ApiVersion::V2);
    let identity = request
        .extensions_mut()
        .remove::<Identity>()
        .map_or(Ok(None), |identity| identity.0);
    let caller = match (access, identity) {
        (Access::Public, Ok(caller)) => caller,
        // A public route serves a caller with a bad credential as anonymous.
        (Access::Public, Err(_)) => None,
        (_, Err(error)) => return ApiError::from(error.as_ref()).into_response(),
        (_, Ok(None)) => {
            return ApiError::Unauthorized("Authentication required".to_owned()).into_response();
        }
        (Access::Permission(permission), Ok(Some(caller))) if !caller.can(permission) => {
            return ApiError::Forbidden(format!(
                "Insufficient permission: {} required",
                permission.name()
            ))
            .into_response();
        }
        // §9 rule 5: organization, user and webhook management under v2.
        (_, Ok(Some(caller)))
            if oauth_only && matches!(caller.credential, Credential::ApiKey { .. }) =>
        {
            return ApiError::Forbidden(
                "API v2 takes an OAuth 2.0 access token here (organization, user and webhook management), not an API key"
                    .to_owned(),
            )
            .into_response();
        }
        (_, Ok(Some(caller))) => Some(caller),
    };
    if let Some(caller) = caller {
        request.extensions_mut().insert(caller);
    }
    next.run(request).await
}
