//! Conditional reads for polling clients: a weak `ETag` computed from the
//! stored bytes a response is made of (and the API version, whose forms
//! differ), and `304 Not Modified` when `If-None-Match` names it. Weak,
//! because the v2 envelope's `meta` (time, request id) differs per response
//! while the representation stays the same.

use std::convert::Infallible;
use std::hash::{Hash, Hasher};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::version::{ApiVersion, Negotiated};

/// What a request says about the copy its client holds.
#[derive(Debug, Clone)]
pub struct Conditional {
    if_none_match: Option<String>,
    version: ApiVersion,
}

impl<S: Send + Sync> FromRequestParts<S> for Conditional {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Infallible> {
        Ok(Self {
            if_none_match: parts
                .headers
                .get(header::IF_NONE_MATCH)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            version: parts
                .extensions
                .get::<Negotiated>()
                .map_or(ApiVersion::V1, |n| n.version),
        })
    }
}

/// A digest of `parts`. SipHash with fixed keys: the same bytes give the
/// same digest in every replica of one build; another build only costs one
/// full answer.
pub fn digest<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    for part in parts {
        part.hash(&mut hasher);
    }
    hasher.finish()
}

impl Conditional {
    /// The tag of a response made from `parts` under this request's version.
    pub fn tag<'a>(&self, parts: impl IntoIterator<Item = &'a [u8]>) -> String {
        self.tag_of(digest(parts))
    }

    /// The tag of a response made from bytes of this [`digest`].
    pub fn tag_of(&self, digest: u64) -> String {
        format!("W/\"v{}-{digest:016x}\"", self.version.number())
    }

    /// Whether the client's copy is the one tagged `tag` (weak comparison, RFC 9110 §13.1.2).
    pub fn matches(&self, tag: &str) -> bool {
        let Some(header) = &self.if_none_match else {
            return false;
        };
        let opaque = |t: &str| t.trim().trim_start_matches("W/").to_owned();
        header
            .split(',')
            .any(|t| t.trim() == "*" || opaque(t) == opaque(tag))
    }

    /// 304 with the tag when the client holds `tag`.
    pub fn not_modified(&self, tag: &str) -> Option<Response> {
        self.matches(tag).then(|| {
            let mut response = StatusCode::NOT_MODIFIED.into_response();
            tag_headers(response.headers_mut(), tag);
            response
        })
    }

    /// 304 when the client holds `tag`, else `full()`; both carry the tag.
    pub fn respond(&self, tag: &str, full: impl FnOnce() -> Response) -> Response {
        if let Some(response) = self.not_modified(tag) {
            return response;
        }
        let mut response = full();
        if response.status().is_success() {
            tag_headers(response.headers_mut(), tag);
        }
        response
    }
}

fn tag_headers(headers: &mut HeaderMap, tag: &str) {
    if let Ok(value) = HeaderValue::from_str(tag) {
        headers.insert(header::ETAG, value);
    }
    // Private data: a client may keep it but must ask again before use.
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-cache"),
    );
    headers.insert(
        header::VARY,
        HeaderValue::from_static("Authorization, X-API-Version, Accept"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conditional(header: Option<&str>, version: ApiVersion) -> Conditional {
        Conditional {
            if_none_match: header.map(str::to_owned),
            version,
        }
    }

    #[test]
    fn tags_differ_by_bytes_and_version() {
        let v1 = conditional(None, ApiVersion::V1);
        let v2 = conditional(None, ApiVersion::V2);
        let a: [&[u8]; 1] = [b"a"];
        assert_eq!(v1.tag(a), v1.tag(a));
        assert_ne!(v1.tag(a), v1.tag([b"b".as_slice()]));
        assert_ne!(v1.tag(a), v2.tag(a));
    }

    #[test]
    fn if_none_match_compares_weakly_and_takes_lists_and_a_star() {
        let tag = "W/\"v1-00000000000000ab\"";
        assert!(conditional(Some(tag), ApiVersion::V1).matches(tag));
        assert!(conditional(Some("\"x\", \"v1-00000000000000ab\""), ApiVersion::V1).matches(tag));
        assert!(conditional(Some("*"), ApiVersion::V1).matches(tag));
        assert!(!conditional(Some("\"x\""), ApiVersion::V1).matches(tag));
        assert!(!conditional(None, ApiVersion::V1).matches(tag));
    }
}
