//! The request a piece of work runs for. The HTTP face opens a scope with
//! the request's id around each request; every command committed inside it
//! records that id in its events' metadata (`store/commands.rs`), so an
//! event can be traced back to the request that caused it without the id
//! being passed through every service call. Work spawned for a request
//! carries the scope along with [`spawn_in_scope`].

use std::future::Future;
use std::sync::Arc;

tokio::task_local! {
    static SCOPE: RequestScope;
}

/// What the edge knows about the request being served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestScope {
    /// `X-Request-ID`, as kept or made by the HTTP face.
    pub request_id: Arc<str>,
}

/// Runs `work` inside `scope`.
pub async fn within<F: Future>(scope: RequestScope, work: F) -> F::Output {
    SCOPE.scope(scope, work).await
}

/// The scope the current task runs in, if any.
pub fn current() -> Option<RequestScope> {
    SCOPE.try_with(Clone::clone).ok()
}

/// The id of the request the current task serves, if any.
pub fn current_request_id() -> Option<String> {
    SCOPE.try_with(|scope| scope.request_id.to_string()).ok()
}

/// `tokio::spawn`, keeping the spawning task's request scope.
pub fn spawn_in_scope<F>(work: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match current() {
        Some(scope) => tokio::spawn(within(scope, work)),
        None => tokio::spawn(work),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_scope_reaches_awaited_and_spawned_work_only() {
        assert_eq!(current_request_id(), None);
        let scope = RequestScope {
            request_id: "req-1".into(),
        };
        let (inside, spawned) = within(scope, async {
            let spawned = spawn_in_scope(async { current_request_id() });
            (current_request_id(), spawned.await.unwrap())
        })
        .await;
        assert_eq!(inside.as_deref(), Some("req-1"));
        assert_eq!(spawned.as_deref(), Some("req-1"));
        assert_eq!(
            tokio::spawn(async { current_request_id() }).await.unwrap(),
            None
        );
    }
}
