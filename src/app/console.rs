//! The web console's view of the HTTP face ([`crate::web::console::Platform`]):
//! the bodies the API's operations endpoints serve, handed over as JSON, so
//! the pages show what the endpoints show and `web` never names `http`.

use std::sync::Arc;

use serde_json::Value;

use crate::auth::Caller;
use crate::http::routes::RouteTable;
use crate::http::state::HttpState;
use crate::http::{health, metrics, system};
use crate::ops::Ops;
use crate::web::console::{Boxed, Platform};

#[derive(Debug)]
pub struct HttpReport {
    pub ops: Ops,
    pub http: HttpState,
    /// The API's route table (the per-route limits the config lists).
    pub table: Arc<RouteTable>,
    /// `SERVICE_UI_RECENT_ERRORS`: how many recent errors the console lists.
    pub recent_errors: usize,
}

impl Platform for HttpReport {
    fn health(&self) -> Boxed<'_, Value> {
        Box::pin(health::detailed_json(&self.ops, &self.http))
    }

    fn rate_limits(&self) -> Boxed<'_, (Value, Value)> {
        Box::pin(system::limiter_json(&self.http, self.table.clone()))
    }

    fn errors(&self) -> Value {
        system::errors_json(&self.http, self.recent_errors)
    }

    fn metrics(&self) -> String {
        metrics::handle().render()
    }

    fn rate_status<'a>(&'a self, caller: &'a Caller) -> Boxed<'a, Value> {
        Box::pin(system::status_json(&self.http, caller.user_id.as_str()))
    }
}
