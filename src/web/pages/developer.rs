//! `/developer`: the developer portal of §4.3: a quick start against this
//! server (its own address in every snippet), the user's API keys (the
//! account page's partial and forms), the API's documents, and the
//! WebSocket frames with their golden samples from `event-schemas/ws/`.

use askama::Template;
use axum::extract::State;
use axum::response::Response;

use super::{Chrome, render};
use crate::auth::Auth;
use crate::auth::api_keys::ApiKeyInfo;
use crate::web::error::PageError;
use crate::web::session::SignedIn;

/// Each WebSocket frame type with its golden sample, compiled in.
macro_rules! frames {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!("../../../event-schemas/ws/", $name, ".v1.sample.json")))),*]
    };
}

const FRAMES: &[(&str, &str)] = frames![
    "debate_start",
    "round_start",
    "agent.delta",
    "agent_message",
    "critique",
    "vote",
    "synthesis",
    "consensus",
    "debate_paused",
    "debate_resumed",
    "checkpoint",
    "debate_end",
    "warning",
    "error",
    "pong",
];

#[derive(Template)]
#[template(path = "developer.html")]
struct DeveloperPage {
    chrome: Chrome,
    server: String,
    keys: Vec<ApiKeyInfo>,
    new_key: Option<String>,
    frames: &'static [(&'static str, &'static str)],
}

/// `GET /developer`.
pub async fn show(
    State(auth): State<Auth>,
    SignedIn(caller): SignedIn,
) -> Result<Response, PageError> {
    let keys = auth
        .api_keys(&caller.user_id)
        .await
        .map_err(PageError::internal)?;
    render(&DeveloperPage {
        chrome: Chrome::for_caller(Some(&caller), "developer"),
        server: auth.settings().public_url.trim_end_matches('/').to_owned(),
        keys,
        new_key: None,
        frames: FRAMES,
    })
}
