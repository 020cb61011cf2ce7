//! The methods of the outgoing webhooks' `{id}` routes on the receiver's
//! path, declared so that every method the path serves is documented.

use utoipa_axum::routes;

use crate::auth::Caller;
use crate::http::error::ApiError;
use crate::http::routes::{RouteSpec, Routes};

pub fn routes() -> Routes {
    Routes::new()
        .add(routes!(scm_is_not_a_subscription), RouteSpec::new())
        .add(
            routes!(scm_is_not_a_subscription_to_update),
            RouteSpec::new(),
        )
        .add(
            routes!(scm_is_not_a_subscription_to_delete),
            RouteSpec::new(),
        )
}

/// `GET`, `PATCH` and `DELETE` on the receiver's path would be the
/// outgoing webhooks' `{id}` routes with the id `scm`: they answer as those
/// routes answer an id that no subscription has (subscription ids are
/// UUIDs), documented here so that the path's methods are all declared.
async fn no_such_subscription(_caller: Caller) -> ApiError {
    ApiError::NotFound {
        resource_type: "webhook",
        resource_id: None,
    }
}

/// Not a subscription: `scm` is the source-host receiver's name, and no
/// outgoing webhook subscription has it as its id.
#[utoipa::path(get, path = "/api/v1/webhooks/scm", tag = "webhooks",
    responses((status = 404, description = "No subscription has this id"),
        (status = 401, description = "No valid credential")))]
async fn scm_is_not_a_subscription(caller: Caller) -> ApiError {
    no_such_subscription(caller).await
}

/// Not a subscription (see `GET`).
#[utoipa::path(patch, path = "/api/v1/webhooks/scm", tag = "webhooks",
    responses((status = 404, description = "No subscription has this id"),
        (status = 401, description = "No valid credential")))]
async fn scm_is_not_a_subscription_to_update(caller: Caller) -> ApiError {
    no_such_subscription(caller).await
}

/// Not a subscription (see `GET`).
#[utoipa::path(delete, path = "/api/v1/webhooks/scm", tag = "webhooks",
    responses((status = 404, description = "No subscription has this id"),
        (status = 401, description = "No valid credential")))]
async fn scm_is_not_a_subscription_to_delete(caller: Caller) -> ApiError {
    no_such_subscription(caller).await
}
