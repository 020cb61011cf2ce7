//! `/debates`: the caller's debates (an admin's: everyone's), newest first:
//! the page of `GET /api/debates` read through the same service call, with
//! its status filter, topic search (`q`) and paging, and export links.

use askama::Template;
use axum::extract::{Query, State};
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;

use super::{Chrome, encode, render};
use crate::config::WebSettings;
use crate::debates::Debates;
use crate::web::error::PageError;
use crate::web::session::SignedIn;

/// The statuses the filter offers, as the list stores them.
const STATUSES: [&str; 5] = ["pending", "running", "paused", "completed", "failed"];

#[derive(Debug, Deserialize)]
pub struct HistoryQuery {
    status: Option<String>,
    q: Option<String>,
    offset: Option<u64>,
}

/// One debate of the page, from its stored list item.
#[derive(Debug)]
struct Row {
    id: String,
    topic: String,
    status: String,
    agents: String,
    /// Confidence in percent, once there is a consensus.
    confidence: Option<String>,
    created: String,
    finished: bool,
}

impl Row {
    fn of(item: &Value) -> Self {
        let text = |key: &str| item[key].as_str().unwrap_or_default().to_owned();
        let status = text("status");
        let agents = item["agents"]
            .as_array()
            .map_or_else(String::new, |agents| {
                agents
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            });
        Self {
            id: text("id"),
            topic: text("topic"),
            finished: status == "completed" || status == "failed",
            status,
            agents,
            confidence: item["confidence"]
                .as_f64()
                .map(|c| format!("{:.0}%", c * 100.0)),
            created: text("created_at")
                .chars()
                .take(16)
                .collect::<String>()
                .replace('T', " "),
        }
    }
}

#[derive(Template)]
#[template(path = "history.html")]
struct HistoryPage {
    chrome: Chrome,
    rows: Vec<Row>,
    total: u64,
    /// The status filter's links: each status's name and value, "any" first.
    filters: Vec<(&'static str, &'static str)>,
    status: String,
    search: String,
    /// `search` encoded for the filter links.
    search_query: String,
    /// `status` and `q` as a query string, for the paging links.
    query: String,
    previous: Option<u64>,
    next: Option<u64>,
    everyone: bool,
}

/// `GET /debates`.
pub async fn show(
    State(debates): State<Debates>,
    State(settings): State<WebSettings>,
    SignedIn(caller): SignedIn,
    Query(query): Query<HistoryQuery>,
) -> Result<Response, PageError> {
    let status = query
        .status
        .filter(|s| !s.is_empty())
        .map(|s| {
            STATUSES
                .into_iter()
                .find(|known| *known == s)
                .ok_or_else(|| PageError::BadRequest(format!("unknown status: {s}")))
        })
        .transpose()?;
    let search_text = query.q.unwrap_or_default();
    let search = debates
        .search(&search_text)
        .map_err(|e| PageError::BadRequest(e.to_string()))?;
    let (limit, offset) = (settings.page_size, query.offset.unwrap_or(0));
    let page = debates
        .list_page(&caller, status, search.as_ref(), limit, offset)
        .await
        .map_err(PageError::internal)?;
    let rows = page
        .items
        .iter()
        .filter_map(|item| serde_json::from_str::<Value>(item).ok())
        .map(|item| Row::of(&item))
        .collect();
    let shown = offset + u64::try_from(page.items.len()).unwrap_or(u64::MAX);
    let search = search.map(|s| s.as_str().to_owned()).unwrap_or_default();
    let search_query = encode(&search);
    render(&HistoryPage {
        chrome: Chrome::for_caller(Some(&caller), "history"),
        rows,
        total: page.total,
        filters: std::iter::once(("any", ""))
            .chain(STATUSES.into_iter().map(|s| (s, s)))
            .collect(),
        status: status.unwrap_or_default().to_owned(),
        query: format!("status={}&q={search_query}", status.unwrap_or_default()),
        search_query,
        search,
        previous: (offset > 0).then(|| offset.saturating_sub(u64::from(limit))),
        next: (shown < page.total).then_some(shown),
        everyone: caller.is_admin(),
    })
}
