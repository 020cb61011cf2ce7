//! A fake GitHub on 127.0.0.1 speaking the REST wire format: a pull
//! request's JSON, its diff under `application/vnd.github.v3.diff`, review
//! submission and the listing of a pull request's reviews.

use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{DIFF, TOKEN};

/// What the fake host received on its review endpoint (pull request,
/// body, the id it gave), and whether it should lose its next answer.
#[derive(Clone, Default)]
pub struct Host {
    pub reviews: Arc<Mutex<Vec<(String, Value, u64)>>>,
    /// Store the next review, then answer 502 as if the answer was lost.
    pub lose_next_answer: Arc<Mutex<bool>>,
}

impl Host {
    /// The bodies the host received for `pull` (`owner/repo#n`).
    pub fn bodies(&self, pull: &str) -> Vec<Value> {
        self.reviews
            .lock()
            .unwrap()
            .iter()
            .filter(|(at, _, _)| at == pull)
            .map(|(_, body, _)| body.clone())
            .collect()
    }
}

fn authorized(headers: &HeaderMap) -> bool {
    headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(&format!("Bearer {TOKEN}"))
}

async fn pull(
    Path((owner, repo, number)): Path<(String, String, u64)>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&headers) {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"message": "Bad credentials"})),
        )
            .into_response();
    }
    if number != 7 {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"message": "Not Found"})),
        )
            .into_response();
    }
    let accept = headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if accept == "application/vnd.github.v3.diff" {
        return ([("content-type", "text/plain; charset=utf-8")], DIFF).into_response();
    }
    axum::Json(json!({
        "url": format!("https://api.github.com/repos/{owner}/{repo}/pulls/7"),
        "id": 1_296_269,
        "number": 7,
        "state": "open",
        "locked": false,
        "title": "Reuse idle connections",
        "body": "Pools connections.",
        "html_url": format!("https://github.com/{owner}/{repo}/pull/7"),
        "user": {"login": "octocat", "id": 1},
        "draft": false,
        "head": {"label": "octocat:pool", "ref": "pool", "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e"},
        "base": {"label": "octo:main", "ref": "main", "sha": "4a3f1b2c"},
        "additions": 3,
        "deletions": 0,
        "changed_files": 2
    }))
    .into_response()
}

async fn submit(
    State(host): State<Host>,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let id = {
        let mut reviews = host.reviews.lock().unwrap();
        let id = 80 + reviews.len() as u64;
        reviews.push((format!("{owner}/{repo}#{number}"), body.clone(), id));
        id
    };
    if std::mem::take(&mut *host.lose_next_answer.lock().unwrap()) {
        return StatusCode::BAD_GATEWAY.into_response();
    }
    axum::Json(json!({
        "id": id,
        "user": {"login": "agon-bot"},
        "body": body["body"],
        "state": "CHANGES_REQUESTED",
        "html_url": format!("https://github.com/{owner}/{repo}/pull/{number}#pullrequestreview-80"),
        "commit_id": "6dcb09b5b57875f334f61aebed695e2e4193db5e"
    }))
    .into_response()
}

/// `GET .../pulls/{number}/reviews`, paged as GitHub pages it.
async fn list(
    State(host): State<Host>,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    axum::extract::Query(page): axum::extract::Query<std::collections::HashMap<String, usize>>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let per_page = page.get("per_page").copied().unwrap_or(30).clamp(1, 100);
    let page = page.get("page").copied().unwrap_or(1).max(1);
    let pull = format!("{owner}/{repo}#{number}");
    let listed: Vec<Value> = host
        .reviews
        .lock()
        .unwrap()
        .iter()
        .filter(|(at, _, _)| *at == pull)
        .skip((page - 1) * per_page)
        .take(per_page)
        .map(|(_, body, id)| {
            json!({"id": id, "user": {"login": "agon-bot"}, "body": body["body"],
                "state": "COMMENTED", "commit_id": "6dcb09b5b57875f334f61aebed695e2e4193db5e"})
        })
        .collect();
    axum::Json(listed).into_response()
}

/// Starts the fake host; returns what it records and its API base URL.
pub async fn fake_github() -> (Host, String) {
    let host = Host::default();
    let router = axum::Router::new()
        .route(
            "/api/v3/repos/{owner}/{repo}/pulls/{number}",
            axum::routing::get(pull),
        )
        .route(
            "/api/v3/repos/{owner}/{repo}/pulls/{number}/reviews",
            axum::routing::post(submit).get(list),
        )
        .with_state(host.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/api/v3", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (host, url)
}
