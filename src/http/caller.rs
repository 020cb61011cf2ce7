//! The caller as handlers receive it: the credential read out of the
//! request's headers for the accounts service to judge, and extractors for
//! the [`Caller`] that [`super::access`] left on the request.

use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use super::error::ApiError;
use crate::auth::{Caller, Credential, Presented, ServiceClaims};

/// The credential `headers` present: the `Authorization` header when there
/// is one, else a trusted service's `X-User-*` headers.
pub fn presented(headers: &HeaderMap) -> Presented {
    if let Some(value) = headers.get(AUTHORIZATION) {
        let bearer = value
            .to_str()
            .ok()
            .and_then(|text| text.trim().split_once(' '))
            .filter(|(scheme, token)| {
                scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty()
            });
        return match bearer {
            Some((_, token)) => Presented::Bearer(token.trim().to_owned()),
            None => Presented::Malformed,
        };
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let claims = ServiceClaims {
        user_id: header("x-user-id"),
        org_id: header("x-org-id"),
        roles: header("x-user-roles"),
    };
    if claims.user_id.is_some() {
        Presented::Service(claims)
    } else {
        Presented::Nothing
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| ApiError::Unauthorized("Authentication required".to_owned()))
    }
}

impl<S: Send + Sync> OptionalFromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        _state: &S,
    ) -> Result<Option<Self>, Self::Rejection> {
        Ok(parts.extensions.get::<Caller>().cloned())
    }
}

/// A caller that is an account holder (not the static token or a service).
#[derive(Debug, Clone)]
pub struct AccountHolder(pub Caller);

impl<S: Send + Sync> FromRequestParts<S> for AccountHolder {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let caller = <Caller as FromRequestParts<S>>::from_request_parts(parts, state).await?;
        match caller.credential {
            Credential::Session { .. } | Credential::ApiKey { .. } => Ok(AccountHolder(caller)),
            Credential::StaticToken | Credential::ServiceHeaders => Err(ApiError::Forbidden(
                "This endpoint needs a user account's credential".to_owned(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        map
    }

    #[test]
    fn the_authorization_header_wins_and_must_be_a_bearer() {
        let both = headers(&[("authorization", "Bearer  abc "), ("x-user-id", "u")]);
        assert_eq!(presented(&both), Presented::Bearer("abc".to_owned()));
        for bad in ["Basic abc", "Bearer", "Bearer   ", "abc"] {
            let map = headers(&[("authorization", bad)]);
            assert_eq!(presented(&map), Presented::Malformed, "{bad}");
        }
    }

    #[test]
    fn service_headers_need_a_user_id() {
        assert_eq!(
            presented(&headers(&[("x-org-id", "o")])),
            Presented::Nothing
        );
        let map = headers(&[("x-user-id", " u "), ("x-user-roles", "admin")]);
        assert_eq!(
            presented(&map),
            Presented::Service(ServiceClaims {
                user_id: Some("u".to_owned()),
                org_id: None,
                roles: Some("admin".to_owned()),
            })
        );
    }
}
