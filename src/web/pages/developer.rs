//! `/developer`: the developer portal of §4.3: a quick start against this
//! server (its own address in every snippet), the user's API keys (the
//! account page's list; made and revoked on `/account/keys`, so the
//! portal's first page has no form to lay out) and the API's documents; beside it
//! (pages of their own, [`Part`]) the caller's webhooks (their forms are
//! in [`super::webhooks`]) and the WebSocket frames with their golden
//! samples from `event-schemas/ws/`.

use agon_aggregates::webhook::WEBHOOK_EVENTS;
use askama::Template;
use axum::extract::{MatchedPath, State};
use axum::http::{HeaderValue, header};
use axum::response::Response;

use super::{Chrome, SubNav, render};
use crate::auth::api_keys::ApiKeyInfo;
use crate::auth::{Auth, Caller};
use crate::web::error::PageError;
use crate::web::session::SignedIn;
use crate::webhooks::Webhooks;

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

/// A webhook subscription as the portal lists it.
#[derive(Debug)]
pub struct Hook {
    pub id: String,
    pub url: String,
    pub events: String,
    pub description: String,
    /// Why deliveries stopped, when they did.
    pub disabled: Option<String>,
}

/// What a webhook form adds to the page: a secret to show once, or why
/// the form was refused (with the address as sent).
#[derive(Debug, Default)]
pub struct Extras {
    /// The subscription's address and its new secret.
    pub secret: Option<(String, String)>,
    pub error: Option<String>,
    /// What a refused webhook form held, to show it again.
    pub form: Option<HookForm>,
}

/// The webhook form's fields as sent.
#[derive(Debug, Default)]
pub struct HookForm {
    pub url: String,
    pub description: String,
    pub events: Vec<String>,
}

impl Extras {
    fn url(&self) -> &str {
        self.form.as_ref().map_or("", |f| f.url.as_str())
    }

    fn description(&self) -> &str {
        self.form.as_ref().map_or("", |f| f.description.as_str())
    }

    /// Whether `event` is ticked: every event on a new form, those sent on
    /// a refused one.
    fn checked(&self, event: &str) -> bool {
        self.form
            .as_ref()
            .is_none_or(|f| f.events.iter().any(|e| e == event))
    }
}

/// The portal's pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Start,
    Webhooks,
    Events,
    /// The form adding a webhook (a page of its own, as autofill reads every
    /// form on a page before its first paint), under "Webhooks".
    NewWebhook,
}

impl Part {
    const LINKS: &'static [(&'static str, &'static str)] = &[
        ("/developer", "Quick start and keys"),
        ("/developer/webhooks", "Webhooks"),
        ("/developer/events", "WebSocket messages"),
    ];

    fn path(self) -> &'static str {
        match self {
            Self::NewWebhook => "/developer/webhooks/new",
            linked => Self::LINKS[linked as usize].0,
        }
    }

    /// The part whose page `path` is.
    fn at(path: &str) -> Option<Self> {
        [Self::Start, Self::Webhooks, Self::Events, Self::NewWebhook]
            .into_iter()
            .find(|p| p.path() == path)
    }

    fn heading(self) -> &'static str {
        match self {
            Self::NewWebhook => "Add a webhook",
            linked => Self::LINKS[linked as usize].1,
        }
    }

    /// The sub-navigation's link this page is under.
    fn under(self) -> Self {
        match self {
            Self::NewWebhook => Self::Webhooks,
            other => other,
        }
    }

    /// The name the template tests.
    fn name(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Webhooks => "webhooks",
            Self::Events => "events",
            Self::NewWebhook => "new-webhook",
        }
    }
}

#[derive(Template)]
#[template(path = "developer.html")]
struct DeveloperPage {
    chrome: Chrome,
    subnav: SubNav,
    /// [`Part::name`] of this page.
    part: &'static str,
    heading: &'static str,
    server: String,
    keys: Vec<ApiKeyInfo>,
    new_key: Option<String>,
    frames: &'static [(&'static str, &'static str)],
    hooks: Vec<Hook>,
    events: [&'static str; 3],
    extras: Extras,
}

/// `GET /developer` (the quick start, API keys and documents) and its
/// other parts' pages (`/developer/webhooks`, `/developer/webhooks/new`,
/// `/developer/events`), told apart by the route.
pub async fn show(
    State(auth): State<Auth>,
    State(webhooks): State<Webhooks>,
    SignedIn(caller): SignedIn,
    route: MatchedPath,
) -> Result<Response, PageError> {
    let part = Part::at(route.as_str()).ok_or(PageError::NotFound)?;
    page(&auth, &webhooks, caller, part, Extras::default()).await
}

/// One of the portal's pages for `caller` (each reads only what it
/// shows), with what a webhook form adds.
pub async fn page(
    auth: &Auth,
    webhooks: &Webhooks,
    caller: Caller,
    part: Part,
    extras: Extras,
) -> Result<Response, PageError> {
    let keys = if part == Part::Start {
        auth.api_keys(&caller.user_id)
            .await
            .map_err(PageError::internal)?
    } else {
        Vec::new()
    };
    let rows = if part == Part::Webhooks {
        webhooks
            .list(
                caller.user_id.as_str(),
                false,
                i64::try_from(webhooks.max_per_user()).unwrap_or(i64::MAX),
                0,
            )
            .await
            .map_err(PageError::internal)?
            .0
    } else {
        Vec::new()
    };
    let hooks = rows
        .into_iter()
        .map(|row| Hook {
            events: row.event_names().join(", "),
            id: row.subscription_id,
            url: row.url,
            description: row.description.unwrap_or_default(),
            disabled: (row.active == 0)
                .then(|| row.disabled_reason.unwrap_or_else(|| "disabled".to_owned())),
        })
        .collect();
    let shows_secret = extras.secret.is_some();
    let mut response = render(&DeveloperPage {
        chrome: Chrome::for_caller(Some(&caller), "developer"),
        subnav: SubNav {
            label: "Developer portal",
            links: Part::LINKS,
            current: part.under().path(),
        },
        part: part.name(),
        heading: part.heading(),
        server: auth.settings().public_url.trim_end_matches('/').to_owned(),
        keys,
        new_key: None,
        frames: FRAMES,
        hooks,
        events: WEBHOOK_EVENTS,
        extras,
    })?;
    if shows_secret {
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    Ok(response)
}
