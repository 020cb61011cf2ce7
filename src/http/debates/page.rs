//! The debates list answered from the `debate_list` table: each item's JSON
//! as stored, joined into the [`DebateList`](super::read::DebateList) form
//! without being parsed or built again, and tagged for conditional reads.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::debates::DebatePage;
use crate::http::etag::Conditional;

/// The body of [`DebateList`](super::read::DebateList) around stored items.
pub fn list_body(page: &DebatePage, limit: u32, offset: u32) -> String {
    let count = page.items.len();
    let has_more =
        u64::from(offset).saturating_add(u64::try_from(count).unwrap_or(u64::MAX)) < page.total;
    let items = format!("[{}]", page.items.join(","));
    format!(
        "{{\"debates\":{items},\"items\":{items},\"total\":{},\"count\":{count},\
         \"limit\":{limit},\"offset\":{offset},\"has_more\":{has_more}}}",
        page.total
    )
}

/// The page as a JSON response with its tag, or 304 when the client has it.
pub fn respond(conditional: &Conditional, page: &DebatePage, limit: u32, offset: u32) -> Response {
    let body = list_body(page, limit, offset);
    let tag = conditional.tag([body.as_bytes()]);
    conditional.respond(&tag, || {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_body_is_the_list_form_around_the_stored_items() {
        let page = DebatePage {
            items: vec![r#"{"id":"b"}"#.to_owned(), r#"{"id":"a"}"#.to_owned()],
            total: 3,
        };
        let body: serde_json::Value =
            serde_json::from_str(&list_body(&page, 2, 0)).unwrap_or_default();
        assert_eq!(
            body,
            json!({"debates": [{"id": "b"}, {"id": "a"}], "items": [{"id": "b"}, {"id": "a"}],
                "total": 3, "count": 2, "limit": 2, "offset": 0, "has_more": true})
        );
    }
}
