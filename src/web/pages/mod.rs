//! The pages, one module per group: [`sign_in`] (password, second factor,
//! sign-out), [`sign_up`] (registration, mail-link landings), [`debates`]
//! (start one), [`history`] (the caller's list), [`live`] (a debate's page, live). Each handler parses, calls a service and renders
//! a template of `templates/`; what every page shares is here.

pub mod account;
pub mod account_mfa;
pub mod admin;
pub mod debates;
pub mod developer;
pub mod gallery;
pub mod history;
pub mod leaderboard;
pub mod live;
pub mod live_html;
pub mod rounds;
pub mod sign_in;
pub mod sign_up;
pub mod webhooks;

use askama::Template;
use axum::extract::State;
use axum::response::{Html, IntoResponse, Redirect, Response};

use super::assets::ASSETS;
use super::error::PageError;
use super::session::{SignedIn, Visitor};
use crate::auth::Caller;
use crate::debates::Debates;

/// An area's own pages (the console's, the account's, the portal's), as
/// links under its heading, the current one marked: each part a page of
/// its own, so that none lays out every table and form of the area
/// before its first paint.
#[derive(Debug, Clone, Copy)]
pub struct SubNav {
    pub label: &'static str,
    /// Each page's address and name.
    pub links: &'static [(&'static str, &'static str)],
    pub current: &'static str,
}

impl SubNav {
    pub fn is_current(&self, href: &str) -> bool {
        href == self.current
    }
}

/// What the layout shows around every page: the signed-in user, the
/// navigation and the hashed asset addresses.
#[derive(Debug, Clone)]
pub struct Chrome {
    pub user: Option<String>,
    pub admin: bool,
    /// The nav entry of this page (`aria-current`).
    pub current: &'static str,
    pub css: &'static str,
    pub htmx: &'static str,
}

impl Chrome {
    pub fn anonymous() -> Self {
        Self {
            user: None,
            admin: false,
            current: "",
            css: &ASSETS.css.url,
            htmx: &ASSETS.htmx.url,
        }
    }

    pub fn for_caller(caller: Option<&Caller>, current: &'static str) -> Self {
        Self {
            user: caller.map(|c| c.email.clone().unwrap_or_else(|| c.user_id.to_string())),
            admin: caller.is_some_and(Caller::is_admin),
            current,
            ..Self::anonymous()
        }
    }

    pub fn of(visitor: &Visitor, current: &'static str) -> Self {
        Self::for_caller(visitor.0.as_ref(), current)
    }
}

/// A rendered template as an HTML response.
pub fn render(page: &impl Template) -> Result<Response, PageError> {
    Ok(Html(page.render().map_err(PageError::internal)?).into_response())
}

/// `text` percent-encoded for a query value.
pub fn encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// Where to go after signing in: a path on this site only (never
/// `//host` or a scheme), else the start page.
pub fn safe_next(next: Option<&str>) -> String {
    next.filter(|n| n.starts_with('/') && !n.starts_with("//") && !n.starts_with("/\\"))
        .filter(|n| !n.chars().any(char::is_control))
        .map_or_else(|| "/".to_owned(), str::to_owned)
}

/// The fields of a posted form, repeated names kept (checkbox groups).
#[derive(Debug, Default)]
pub struct Fields(Vec<(String, String)>);

impl Fields {
    pub fn parse(body: &[u8]) -> Self {
        Self(url::form_urlencoded::parse(body).into_owned().collect())
    }

    /// The first value of `name`, trimmed; `None` when absent or blank.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// The first value of `name` as sent (passwords keep their spaces).
    pub fn raw(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map_or("", |(_, v)| v.as_str())
    }

    /// Every non-blank value of `name`.
    pub fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, v)| k == name && !v.trim().is_empty())
            .map(|(_, v)| v.trim().to_owned())
            .collect()
    }
}

/// A page that asks before something is removed or changed for good:
/// its form posts to `action`, `back` leads away without doing it.
#[derive(Template)]
#[template(path = "confirm.html")]
pub struct Confirm {
    pub chrome: Chrome,
    pub title: &'static str,
    pub question: String,
    pub action: String,
    pub button: &'static str,
    pub back: &'static str,
}

impl Confirm {
    pub fn new(
        chrome: Chrome,
        title: &'static str,
        question: String,
        action: String,
        button: &'static str,
        back: &'static str,
    ) -> Self {
        Self {
            chrome,
            title,
            question,
            action,
            button,
            back,
        }
    }
}

/// `/`: the start-a-debate page for a signed-in user, served here (a
/// redirect would cost a round trip before the first paint, and signing in
/// lands here), else the sign-in page.
pub async fn home(debates: State<Debates>, visitor: Visitor) -> Result<Response, PageError> {
    match visitor.0 {
        Some(caller) => debates::form(debates, SignedIn(caller)).await,
        None => Ok(Redirect::to("/login").into_response()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(safe_next(Some("/debates/new?x=1")), "/debates/new?x=1");
        for bad in [
            "//evil.example/",
            "https://evil.example/",
            "/\\evil",
            "evil",
            "",
        ] {
            assert_eq!(safe_next(Some(bad)), "/", "{bad}");
        }
        assert_eq!(safe_next(None), "/");
    }

    #[test]
    fn repeated_fields_are_all_kept() {
        let fields = Fields::parse(b"agents=demo-a&agents=demo-b&topic=+Hi+&agents=");
        assert_eq!(fields.all("agents"), ["demo-a", "demo-b"]);
        assert_eq!(fields.get("topic"), Some("Hi"));
        assert_eq!(fields.get("none"), None);
    }
}
