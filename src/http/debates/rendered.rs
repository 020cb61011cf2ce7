//! Debate details as rendered JSON, kept per debate with the digest of the
//! stored document they were made from: while a debate does not change,
//! its detail is served from these bytes without parsing the document or
//! building the body again. A changed document has another digest, so a
//! stale body is never served. Bounded by `SERVICE_DETAIL_CACHE_BYTES`:
//! when a body would not fit, the cache starts afresh.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use axum::body::Bytes;

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

    /// The body of debate `id` rendered from the document of `digest`,
    /// rendering it with `render` unless it is kept.
    pub fn body<E>(
        &self,
        id: &str,
        digest: u64,
        render: impl FnOnce() -> Result<Bytes, E>,
    ) -> Result<Bytes, E> {
        let kept = {
            let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            inner
                .bodies
                .get(id)
                .filter(|(d, _)| *d == digest)
                .map(|(_, b)| b.clone())
        };
        if let Some(body) = kept {
            return Ok(body);
        }
        let body = render()?;
        if body.len() <= self.max_bytes {
            let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((_, old)) = inner.bodies.remove(id) {
                inner.bytes -= old.len();
            }
            if inner.bytes + body.len() > self.max_bytes {
                *inner = Inner::default();
            }
            inner.bytes += body.len();
            inner.bodies.insert(id.to_owned(), (digest, body.clone()));
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(text: &'static str) -> impl FnOnce() -> Result<Bytes, ()> {
        move || Ok(Bytes::from_static(text.as_bytes()))
    }

    #[test]
    fn a_body_is_kept_for_its_digest_only_and_within_the_bound() {
        let cache = RenderedDetails::new(8);
        assert_eq!(cache.body("a", 1, render("one")), Ok(Bytes::from("one")));
        assert_eq!(cache.body("a", 1, render("other")), Ok(Bytes::from("one")));
        assert_eq!(cache.body("a", 2, render("two")), Ok(Bytes::from("two")));
        // "b" and "c" do not fit beside "two": the cache starts afresh.
        cache.body("b", 1, render("bbb")).ok();
        cache.body("c", 1, render("ccc")).ok();
        assert_eq!(cache.body("a", 2, render("new")), Ok(Bytes::from("new")));
        let none = RenderedDetails::new(0);
        none.body("a", 1, render("x")).ok();
        assert_eq!(none.body("a", 1, render("y")), Ok(Bytes::from("y")));
    }
}
