//! §4.2 debates: create ([`create`]), read ([`read`]) and export
//! ([`export`], one debate: [`export_one`]); every read comes from the `debates` read model and every
//! write is a command on the Debate aggregate.

mod create;
mod export;
mod export_one;
mod page;
mod read;
pub mod rendered;
mod schema;
pub use crate::views::debates as views;

use utoipa_axum::routes;

use super::ratelimit::{Action, Endpoint, PathLimit};
use super::routes::{RouteSpec, Routes};

pub use page::respond as respond_page;

pub use schema::fit as fit_create_schema;

pub fn routes() -> Routes {
    Routes::new()
        .add(
            routes!(create::create_debate),
            RouteSpec::new()
                .action(Action::DebateCreate)
                .deprecated_alias("/api/debate")
                .deprecated_alias_to("/api/debate/new", "/api/debates/start")
                .deprecated_alias("/api/debates/start"),
        )
        .add(
            routes!(read::list_debates),
            RouteSpec::new()
                .limit(PathLimit::Endpoint(Endpoint::DebateList))
                .deprecated_alias("/api/debates/list"),
        )
        .add(routes!(read::get_debate), RouteSpec::new())
        .add(routes!(read::list_messages), RouteSpec::new())
        .add(routes!(read::get_consensus), RouteSpec::new())
        .add(routes!(read::batch_debates), RouteSpec::new())
        .add(
            routes!(export::export_debates),
            RouteSpec::new().action(Action::Export).raw(),
        )
        .add(
            routes!(export_one::export_debate),
            RouteSpec::new().action(Action::Export).raw(),
        )
}
