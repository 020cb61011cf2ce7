//! The GitHub REST API as the reviews use it: a pull request, its diff
//! (`application/vnd.github.v3.diff`) and review submission. The base URL
//! is `SCM_API_URL` (GitHub Enterprise: `https://HOST/api/v3`); the token is
//! sent only there, and redirects are not followed so it never leaves.

use agon_aggregates::review::ReviewComment;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderValue, USER_AGENT};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::Repository;
use crate::config::{ScmSettings, Secret};

const API_VERSION: &str = "2022-11-28";

#[derive(Debug, Error)]
pub enum GitHubError {
    #[error("the pull request was not found on the host")]
    NotFound,
    #[error("the host refused the token (status {0})")]
    Refused(u16),
    #[error("the host answered status {status}: {message}")]
    Status { status: u16, message: String },
    #[error("the diff is larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("cannot reach the host")]
    Transport(#[source] reqwest::Error),
}

/// A pull request as the host describes it (the fields the reviews read).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PullRequest {
    pub number: u64,
    pub title: String,
    pub body: Option<String>,
    pub state: String,
    pub html_url: Option<String>,
    pub user: Option<Login>,
    pub head: Branch,
    pub base: Branch,
    pub draft: Option<bool>,
    pub additions: Option<u64>,
    pub deletions: Option<u64>,
    pub changed_files: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Login {
    pub login: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Branch {
    #[serde(rename = "ref")]
    pub reference: String,
    pub sha: String,
}

/// What the host answers a submitted review with.
#[derive(Debug, Clone, Deserialize)]
pub struct SubmittedReview {
    pub id: u64,
    pub state: Option<String>,
    pub html_url: Option<String>,
}

/// A review as the host lists it (the fields the service reads).
#[derive(Debug, Clone, Deserialize)]
pub struct ListedReview {
    pub id: u64,
    pub body: Option<String>,
}

/// The most reviews the host lists per page (GitHub's own limit).
const PER_PAGE: usize = 100;

#[derive(Debug, Serialize)]
struct ReviewBody<'a> {
    event: &'a str,
    body: &'a str,
    comments: &'a [ReviewComment],
}

/// A client of one host's API with the service's token.
#[derive(Debug, Clone)]
pub struct GitHub {
    http: reqwest::Client,
    base: String,
    token: Secret,
    max_diff_bytes: usize,
    max_listed_reviews: usize,
}

impl GitHub {
    pub fn new(settings: &ScmSettings, token: Secret) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(settings.timeout)
            .build()?;
        Ok(Self {
            http,
            base: settings.api_url.clone(),
            token,
            max_diff_bytes: settings.max_input_bytes,
            max_listed_reviews: settings.max_listed_reviews,
        })
    }

    fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        accept: &'static str,
    ) -> reqwest::RequestBuilder {
        let mut bearer = HeaderValue::from_str(&format!("Bearer {}", self.token.expose()))
            .unwrap_or_else(|_| HeaderValue::from_static(""));
        bearer.set_sensitive(true);
        self.http
            .request(method, format!("{}{path}", self.base))
            .header(AUTHORIZATION, bearer)
            .header(ACCEPT, accept)
            .header(USER_AGENT, "agon")
            .header("X-GitHub-Api-Version", API_VERSION)
    }

    async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, GitHubError> {
        let response = request.send().await.map_err(GitHubError::Transport)?;
        let status = response.status().as_u16();
        match status {
            200..=299 => Ok(response),
            404 => Err(GitHubError::NotFound),
            401 | 403 => Err(GitHubError::Refused(status)),
            _ => {
                #[derive(Deserialize)]
                struct Problem {
                    message: Option<String>,
                }
                let message = response
                    .json::<Problem>()
                    .await
                    .ok()
                    .and_then(|p| p.message)
                    .unwrap_or_default();
                Err(GitHubError::Status { status, message })
            }
        }
    }

    /// `GET /repos/{owner}/{repo}/pulls/{number}`.
    pub async fn pull(&self, repo: &Repository, number: u64) -> Result<PullRequest, GitHubError> {
        let path = format!("/repos/{repo}/pulls/{number}");
        let request = self.request(reqwest::Method::GET, &path, "application/vnd.github+json");
        self.send(request)
            .await?
            .json()
            .await
            .map_err(GitHubError::Transport)
    }

    /// The pull request's unified diff, refused past `SERVICE_REVIEW_MAX_INPUT_BYTES`.
    pub async fn diff(&self, repo: &Repository, number: u64) -> Result<String, GitHubError> {
        let path = format!("/repos/{repo}/pulls/{number}");
        let request = self.request(
            reqwest::Method::GET,
            &path,
            "application/vnd.github.v3.diff",
        );
        let mut response = self.send(request).await?;
        let limit = self.max_diff_bytes;
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(GitHubError::Transport)? {
            if bytes.len() + chunk.len() > limit {
                return Err(GitHubError::TooLarge { limit });
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// `POST /repos/{owner}/{repo}/pulls/{number}/reviews`.
    pub async fn submit(
        &self,
        repo: &Repository,
        number: u64,
        event: &str,
        body: &str,
        comments: &[ReviewComment],
    ) -> Result<SubmittedReview, GitHubError> {
        let path = format!("/repos/{repo}/pulls/{number}/reviews");
        let request = self
            .request(reqwest::Method::POST, &path, "application/vnd.github+json")
            .json(&ReviewBody {
                event,
                body,
                comments,
            });
        self.send(request)
            .await?
            .json()
            .await
            .map_err(GitHubError::Transport)
    }

    /// `GET /repos/{owner}/{repo}/pulls/{number}/reviews`, oldest first,
    /// page by page, at most `SERVICE_SCM_MAX_LISTED_REVIEWS`.
    pub async fn reviews(
        &self,
        repo: &Repository,
        number: u64,
    ) -> Result<Vec<ListedReview>, GitHubError> {
        let mut listed = Vec::new();
        for page in 1.. {
            let path =
                format!("/repos/{repo}/pulls/{number}/reviews?per_page={PER_PAGE}&page={page}");
            let request = self.request(reqwest::Method::GET, &path, "application/vnd.github+json");
            let reviews: Vec<ListedReview> = self
                .send(request)
                .await?
                .json()
                .await
                .map_err(GitHubError::Transport)?;
            let full = reviews.len() == PER_PAGE;
            listed.extend(reviews);
            if !full || listed.len() >= self.max_listed_reviews {
                break;
            }
        }
        listed.truncate(self.max_listed_reviews);
        Ok(listed)
    }
}
