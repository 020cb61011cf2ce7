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
use tokio::sync::oneshot;
use tokio::task::{AbortHandle, JoinHandle};

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

/// Runs long-lived `task` on the store thread like [`spawn`], but no longer
/// than the runtime it was started from: when that runtime shuts down, the
/// task is aborted. Otherwise a consumer started by a runtime that is gone
/// (a test's, or an embedder's) would keep its pool, files and connections
/// for the life of the process.
pub fn spawn_bound<F>(task: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let Ok(caller) = Handle::try_current() else {
        return spawn(task);
    };
    let (finished, done) = oneshot::channel::<()>();
    let running = spawn(async move {
        let output = task.await;
        let _ = finished.send(());
        output
    });
    // Dropped with the caller's runtime (or once the task is done).
    let abort = running.abort_handle();
    caller.spawn(async move {
        let _abort = AbortOnDrop(abort);
        let _ = done.await;
    });
    running
}

/// Aborts a task when dropped.
struct AbortOnDrop(AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    /// A consumer's task once outlived the test runtime that started it,
    /// keeping its database pool and files open until the process ended.
    #[test]
    fn a_bound_task_ends_with_the_runtime_that_started_it() {
        let held = Arc::new(());
        let runtime = Builder::new_current_thread().enable_all().build().unwrap();
        let task_held = Arc::clone(&held);
        runtime.block_on(async move {
            spawn_bound(async move {
                let _held = task_held;
                std::future::pending::<()>().await;
            });
            tokio::task::yield_now().await;
        });
        assert_eq!(Arc::strong_count(&held), 2, "the task runs");
        drop(runtime);
        for _ in 0..500 {
            if Arc::strong_count(&held) == 1 {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the task outlived its runtime");
    }

    #[test]
    fn a_finished_bound_task_gives_its_output() {
        let runtime = Builder::new_current_thread().enable_all().build().unwrap();
        let output = runtime.block_on(async { spawn_bound(async { 7 }).await.unwrap() });
        assert_eq!(output, 7);
    }
}
