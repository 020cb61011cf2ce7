//! The web UI: server-rendered pages for people with a browser, outside
//! `/api` (unversioned, not in the OpenAPI document). A second face beside
//! `http`: its thin handlers call the same services the JSON API calls,
//! sign-in lives in HttpOnly cookies ([`session`]), every request that may
//! change something must come from our own origin ([`csrf`]), and every
//! page carries the one Content-Security-Policy (no inline code).

pub mod assets;
pub mod console;
pub mod csrf;
pub mod error;
pub mod pages;
pub mod report;
pub mod session;

use axum::Router;
use axum::extract::FromRef;
use axum::middleware::from_fn_with_state;
use axum::response::Response;
use axum::routing::{get, post};
use tower_http::compression::CompressionLayer;

use crate::agents::Agents;
use crate::auth::Auth;
use crate::config::WebSettings;
use crate::debates::Debates;
use crate::webhooks::Webhooks;

/// What the pages are served from; the composition root fills it.
#[derive(Debug, Clone)]
pub struct WebState {
    pub auth: Auth,
    pub debates: Debates,
    pub agents: Agents,
    pub webhooks: Webhooks,
    /// The origin of `SERVICE_PUBLIC_URL`, also accepted as our own.
    pub public_origin: Option<String>,
    /// `SERVICE_UI_*`: how much the pages show at once.
    pub settings: WebSettings,
    /// What the admin console and the account's rate limits read; set by
    /// the composition root ([`WebState::with_console`]).
    pub console: Option<console::Console>,
}

impl WebState {
    pub fn new(
        auth: Auth,
        debates: Debates,
        agents: Agents,
        webhooks: Webhooks,
        settings: WebSettings,
    ) -> Self {
        let public_origin = url::Url::parse(&auth.settings().public_url)
            .ok()
            .map(|url| url.origin().ascii_serialization())
            .filter(|origin| origin != "null");
        Self {
            auth,
            debates,
            agents,
            webhooks,
            public_origin,
            settings,
            console: None,
        }
    }

    /// These pages with the admin console's services.
    pub fn with_console(mut self, console: console::Console) -> Self {
        self.console = Some(console);
        self
    }

    /// The console's services; a service built without them has no console.
    pub fn console(&self) -> Result<&console::Console, error::PageError> {
        self.console.as_ref().ok_or_else(|| {
            error::PageError::Unavailable("The admin console is not set up here.".to_owned())
        })
    }
}

impl FromRef<WebState> for Auth {
    fn from_ref(state: &WebState) -> Self {
        state.auth.clone()
    }
}

impl FromRef<WebState> for WebSettings {
    fn from_ref(state: &WebState) -> Self {
        state.settings
    }
}

impl FromRef<WebState> for Webhooks {
    fn from_ref(state: &WebState) -> Self {
        state.webhooks.clone()
    }
}

impl FromRef<WebState> for Debates {
    fn from_ref(state: &WebState) -> Self {
        state.debates.clone()
    }
}

/// Every page, inside the UI's layers (outermost first): gzip, the CSRF
/// check, the session cookies. The composition root mounts it inside the
/// API's platform layers (`http::router_with_pages`), whose security
/// headers give every HTML response [`crate::views::PAGE_POLICY`], and every
/// response `no-store` unless it says otherwise (the assets).
pub fn router(state: WebState) -> Router {
    Router::new()
        .route("/", get(pages::home))
        .route(
            "/login",
            get(pages::sign_in::form).post(pages::sign_in::submit),
        )
        .route("/login/code", post(pages::sign_in::second_factor))
        .route("/logout", post(pages::sign_in::logout))
        .route(
            "/register",
            get(pages::sign_up::form).post(pages::sign_up::submit),
        )
        .route("/verify-email", get(pages::sign_up::verify_email))
        .route(
            "/invite",
            get(pages::sign_up::invitation).post(pages::sign_up::accept),
        )
        .route("/debates", get(pages::history::show))
        .route(
            "/debates/new",
            get(pages::debates::form).post(pages::debates::create),
        )
        .route("/debates/{id}", get(pages::live::show))
        .route("/debates/{id}/export/{format}", get(pages::live::export))
        .route("/debates/{id}/publish", post(pages::gallery::publish))
        .route("/debates/{id}/unpublish", post(pages::gallery::unpublish))
        .route("/gallery", get(pages::gallery::list))
        .route("/gallery/{id}", get(pages::gallery::show))
        .route("/gallery/{id}/embed", get(pages::gallery::embed))
        .route("/assets/{file}", get(assets::serve))
        .route("/account", get(pages::account::show))
        .route(
            "/account/password",
            get(pages::account::show).post(pages::account::password),
        )
        .route("/account/sessions", get(pages::account::show))
        .route(
            "/account/keys",
            get(pages::account::show).post(pages::account::create_key),
        )
        .route("/account/limits", get(pages::account::show))
        .route(
            "/account/keys/{id}/revoke",
            get(pages::account::confirm_key).post(pages::account::revoke_key),
        )
        .route(
            "/account/sessions/{id}/revoke",
            get(pages::account::confirm_session).post(pages::account::revoke_session),
        )
        .route("/account/mfa/setup", post(pages::account_mfa::mfa_setup))
        .route("/account/mfa/enable", post(pages::account_mfa::mfa_enable))
        .route(
            "/account/mfa/disable",
            post(pages::account_mfa::mfa_disable),
        )
        .route(
            "/account/organization",
            get(pages::account::show).post(pages::account::organization),
        )
        .route("/account/invite", post(pages::account::invite))
        .route("/leaderboard", get(pages::leaderboard::show))
        .route("/developer", get(pages::developer::show))
        .route(
            "/developer/webhooks",
            get(pages::developer::show).post(pages::webhooks::create),
        )
        .route("/developer/events", get(pages::developer::show))
        .route("/developer/webhooks/new", get(pages::developer::show))
        .route("/developer/webhooks/{id}", get(pages::webhooks::deliveries))
        .route("/developer/webhooks/{id}/ping", post(pages::webhooks::ping))
        .route(
            "/developer/webhooks/{id}/rotate",
            post(pages::webhooks::rotate),
        )
        .route(
            "/developer/webhooks/{id}/deliveries/{delivery}/redeliver",
            post(pages::webhooks::redeliver),
        )
        .route("/admin", get(pages::admin::overview))
        .route("/admin/users", get(pages::admin::users))
        .route("/admin/{part}", get(pages::admin::part))
        .route(
            "/admin/accounts/{id}/{action}",
            get(pages::admin::confirm).post(pages::admin::act),
        )
        .layer(from_fn_with_state(state.clone(), session::layer))
        .layer(from_fn_with_state(state.clone(), csrf::layer))
        .layer(CompressionLayer::new())
        .with_state(state)
}

/// The UI's 404 page, for unknown paths a browser asks for outside `/api`.
pub fn not_found_page() -> Response {
    axum::response::IntoResponse::into_response(error::PageError::NotFound)
}
