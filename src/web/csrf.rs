//! Cross-site request forgery: SameSite=Strict alone lets a form on another
//! port of the same host through (same site, other origin), so every
//! request that may change something must show that it came from one of
//! this service's own pages: `Sec-Fetch-Site: same-origin`, or, from a
//! browser that does not send it, an `Origin` equal to the service's own.
//! Anything else gets a 403 page before any handler runs.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::WebState;
use super::error::error_page;

pub async fn layer(State(state): State<WebState>, request: Request, next: Next) -> Response {
    let safe = matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if safe || same_origin(request.headers(), state.public_origin.as_deref()) {
        return next.run(request).await;
    }
    error_page(
        StatusCode::FORBIDDEN,
        "Request refused",
        "This form was not sent from one of this service's own pages, so nothing was changed."
            .to_owned(),
    )
}

/// Whether `headers` show a request from this service's own origin.
pub fn same_origin(headers: &HeaderMap, public_origin: Option<&str>) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        return site.as_bytes() == b"same-origin";
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    if public_origin.is_some_and(|own| own.eq_ignore_ascii_case(origin)) {
        return true;
    }
    // The origin the request's own Host names; TLS may end in front of the
    // service, so either scheme.
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    ["http://", "https://"].iter().any(|scheme| {
        origin
            .strip_prefix(scheme)
            .is_some_and(|rest| rest.eq_ignore_ascii_case(host))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn fetch_metadata_decides_when_present() {
        let host = ("host", "127.0.0.1:8080");
        assert!(same_origin(
            &headers(&[("sec-fetch-site", "same-origin")]),
            None
        ));
        for site in ["same-site", "cross-site", "none"] {
            let with_origin = headers(&[
                ("sec-fetch-site", site),
                ("origin", "http://127.0.0.1:8080"),
                host,
            ]);
            assert!(!same_origin(&with_origin, None), "{site}");
        }
    }

    #[test]
    fn without_fetch_metadata_the_origin_must_be_our_own() {
        let host = ("host", "127.0.0.1:8080");
        assert!(same_origin(
            &headers(&[("origin", "http://127.0.0.1:8080"), host]),
            None
        ));
        assert!(!same_origin(
            &headers(&[("origin", "http://127.0.0.1:9090"), host]),
            None
        ));
        assert!(!same_origin(&headers(&[("origin", "null"), host]), None));
        assert!(!same_origin(&headers(&[host]), None));
        let public = Some("https://agon.example");
        assert!(same_origin(
            &headers(&[("origin", "https://agon.example"), host]),
            public
        ));
    }
}
