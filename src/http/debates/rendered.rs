//! Debate details as rendered JSON, kept per debate with the version of
//! the debate they were made from (the events its document has folded):
//! while a debate does not change, its detail is served from these bytes
//! without reading, parsing or building the document again, and tagged by
//! that version. A changed debate has another version, so a stale body is
//! never served. Bounded by `SERVICE_DETAIL_CACHE_BYTES`: when a body would
//! not fit, the cache starts afresh.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use agon_aggregates::debate::Debate;
use axum::body::Bytes;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::read::{debate_id, find_stored};
use super::views::DebateDetail;
use crate::auth::Caller;
use crate::debates::Debates;
use crate::http::error::ApiError;
use crate::http::etag::{Conditional, digest};
use crate::store::StoreError;

/// `GET /api/debates/{id}`: 304 when the client holds the current version,
/// else the kept body, else the body rendered from the document.
pub async fn detail(
    debates: &Debates,
    details: &RenderedDetails,
    caller: &Caller,
    conditional: &Conditional,
    id: &str,
) -> Result<Response, ApiError> {
    let version = debates.version(&debate_id(id)?).await?;
    // An admin or the debate's owner needs nothing more to see it; anyone
    // else is checked against the document (organizations), as every read is.
    let (digest, mut stored) = match version {
        Some((owner, sequence))
            if caller.is_admin() || owner.as_deref() == Some(caller.user_id.as_str()) =>
        {
            (digest([id.as_bytes(), &sequence.to_le_bytes()]), None)
        }
        Some((_, sequence)) => (
            digest([id.as_bytes(), &sequence.to_le_bytes()]),
            Some(find_stored(debates, caller, id).await?),
        ),
        // Listed between the two reads: tag by the document itself.
        None => {
            let text = find_stored(debates, caller, id).await?;
            (digest([text.as_bytes()]), Some(text))
        }
    };
    let tag = conditional.tag_of(digest);
    if let Some(not_modified) = conditional.not_modified(&tag) {
        return Ok(not_modified);
    }
    let body = match details.get(id, digest) {
        Some(body) => body,
        None => {
            let text = match stored.take() {
                Some(text) => text,
                None => find_stored(debates, caller, id).await?,
            };
            let debate: Debate = serde_json::from_str(&text).map_err(StoreError::from)?;
            let body =
                serde_json::to_vec(&DebateDetail::from(&debate)).map_err(StoreError::from)?;
            let body = Bytes::from(body);
            details.put(id, digest, body.clone());
            body
        }
    };
    Ok(conditional.respond(&tag, || {
        ([(header::CONTENT_TYPE, "application/json")], body).into_response()
    }))
}

/// The rendered details, shared by the handlers of one service.
#[derive(Debug)]
pub struct RenderedDetails {
    max_bytes: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    bodies: HashMap<String, (u64, Bytes)>,
    bytes: usize,
}

impl RenderedDetails {
    /// A cache of at most `max_bytes` of bodies (0: keeps none).
    pub fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            inner: Mutex::default(),
        }
    }

    /// The body of debate `id` kept for `digest`, if any.
    pub fn get(&self, id: &str, digest: u64) -> Option<Bytes> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let (kept, body) = inner.bodies.get(id)?;
        (*kept == digest).then(|| body.clone())
    }

    /// Keeps `body` as debate `id`'s for `digest`, in place of an older one.
    pub fn put(&self, id: &str, digest: u64, body: Bytes) {
        if body.len() > self.max_bytes {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, old)) = inner.bodies.remove(id) {
            inner.bytes -= old.len();
        }
        if inner.bytes + body.len() > self.max_bytes {
            *inner = Inner::default();
        }
        inner.bytes += body.len();
        inner.bodies.insert(id.to_owned(), (digest, body));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_kept_for_its_digest_only_and_within_the_bound() {
        let cache = RenderedDetails::new(8);
        cache.put("a", 1, Bytes::from("one"));
        assert_eq!(cache.get("a", 1), Some(Bytes::from("one")));
        assert_eq!(cache.get("a", 2), None);
        cache.put("a", 2, Bytes::from("two"));
        assert_eq!(cache.get("a", 1), None);
        // "b" and "c" do not fit beside "two": the cache starts afresh.
        cache.put("b", 1, Bytes::from("bbb"));
        cache.put("c", 1, Bytes::from("ccc"));
        assert_eq!(
            (cache.get("a", 2), cache.get("c", 1)),
            (None, Some(Bytes::from("ccc")))
        );
        let none = RenderedDetails::new(0);
        none.put("a", 1, Bytes::from("x"));
        assert_eq!(none.get("a", 1), None);
    }
}
