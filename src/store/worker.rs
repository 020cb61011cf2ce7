//! A thread of its own for the work that holds the database writer: the
//! group commit, the relay and the consumers that keep the read models.
//!
//! On SQLite one connection writes, and a transaction keeps it from the
//! moment it begins until it commits; every statement in between is a hop
//! from the task to the connection's thread and back. On the shared runtime
//! the way back waits behind whatever HTTP work is queued, so under load a
//! five-statement transaction held the writer for milliseconds while the
//! database itself worked for a fraction of that. On this thread the task
//! is picked up as soon as its answer arrives.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle};
use tokio::task::JoinHandle;

/// Runs `task` on the store thread (on the caller's runtime if that thread
/// could not be started).
pub fn spawn<F>(task: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match store_thread() {
        Some(handle) => handle.spawn(task),
        None => tokio::spawn(task),
    }
}

/// The store thread's runtime, started on first use; it lives as long as
/// the process (each task on it stops with its own cancellation token).
fn store_thread() -> Option<&'static Handle> {
    static HANDLE: OnceLock<Option<Handle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let runtime = Builder::new_current_thread().enable_all().build();
            let runtime = match runtime {
                Ok(runtime) => runtime,
                Err(e) => {
                    tracing::warn!(error = %e, "no store thread; store work shares the runtime");
                    return None;
                }
            };
            let handle = runtime.handle().clone();
            let started = std::thread::Builder::new()
                .name("agon-store".to_owned())
                .spawn(move || runtime.block_on(std::future::pending::<()>()));
            match started {
                Ok(_) => Some(handle),
                Err(e) => {
                    tracing::warn!(error = %e, "no store thread; store work shares the runtime");
                    None
                }
            }
        })
        .as_ref()
}
