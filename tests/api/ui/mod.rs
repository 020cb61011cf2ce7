//! The web UI from outside, on both back ends: its cookies and what they
//! may open ([`sessions`]), the CSRF check ([`csrf`]), and what every page
//! and asset carries: policy, caching, byte budgets ([`pages`]).

mod account;
mod admin;
mod breakers;
mod csrf;
mod developer;
mod history;
mod landings;
mod leaderboard;
mod live;
mod pages;
mod sessions;
mod webhooks;

use reqwest::header::{HeaderMap, SET_COOKIE};
use reqwest::redirect::Policy;

use crate::serve::{Spawned, spawn_with};
use crate::support::Kind;
use crate::support::accounts::register;

pub const PASSWORD: &str = "correct horse battery";

/// A client that shows redirects instead of following them and keeps no
/// cookies: each test says what it sends.
pub fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap()
}

pub async fn spawn(kind: Kind) -> Spawned {
    spawn_with(kind, &[]).await
}

/// Every `Set-Cookie` of a response, as sent.
pub fn set_cookies(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

/// The value a response sets for cookie `name` (empty when it clears it).
pub fn cookie_value(headers: &HeaderMap, name: &str) -> Option<String> {
    set_cookies(headers).iter().find_map(|c| {
        c.strip_prefix(&format!("{name}="))
            .map(|rest| rest.split(';').next().unwrap_or_default().to_owned())
    })
}

/// A signed-in browser's cookies.
#[derive(Debug, Clone)]
pub struct Jar {
    pub session: String,
    pub refresh: String,
}

impl Jar {
    pub fn header(&self) -> String {
        format!(
            "__Host-agon_session={}; __Host-agon_refresh={}",
            self.session, self.refresh
        )
    }
}

/// Registers `email` and signs in through `POST /login`.
pub async fn ui_sign_in(base: &str, email: &str) -> Jar {
    register(base, email, PASSWORD).await;
    let response = browser()
        .post(format!("{base}/login"))
        .header("sec-fetch-site", "same-origin")
        .form(&[("email", email), ("password", PASSWORD), ("next", "/")])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    Jar {
        session: cookie_value(response.headers(), "__Host-agon_session").unwrap(),
        refresh: cookie_value(response.headers(), "__Host-agon_refresh").unwrap(),
    }
}
