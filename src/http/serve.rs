//! Serving connections. `axum::serve` accepts every connection and lets it
//! sit forever, so a client holding thousands of stalled sockets made the
//! service unreachable for everyone. This accept loop caps open connections
//! (overall and per client address), refuses the excess at once, and closes
//! a connection whose request head takes longer than the header timeout or
//! that stays without a request longer than the idle timeout.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use ipnet::IpNet;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::config::ConnectionSettings;

/// What a refused connection reads before it is closed: one write, no
/// parsing, no task. Rendered once.
static REFUSAL: LazyLock<Vec<u8>> = LazyLock::new(|| {
    let body = r#"{"error":"Too many open connections","code":"SERVICE_UNAVAILABLE","status":503,"retry_after":1}"#;
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\nconnection: close\r\nx-content-type-options: nosniff\r\n\
         cache-control: no-store\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
});

/// How the listener is run.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub limits: ConnectionSettings,
    /// Addresses exempt from the per-address cap (trusted proxies carry
    /// many clients on one address).
    pub exempt: Vec<IpNet>,
    /// How long open requests may run on after `stop` before their
    /// connections are dropped.
    pub drain: Duration,
}

/// Serves `router` on `listener` until `stop`, then lets open requests
/// finish (up to `drain`).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    options: ServeOptions,
    stop: CancellationToken,
) -> io::Result<()> {
    let options = Arc::new(options);
    let total = options.limits.max_connections as usize;
    let open = Arc::new(Semaphore::new(total));
    let per_address = PerAddress::default();
    loop {
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) if is_per_connection(&e) => continue,
                Err(e) => {
                    // Out of descriptors or memory: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(slot) = open.clone().try_acquire_owned() else {
            refuse(&stream);
            continue;
        };
        let exempt = options.exempt.iter().any(|net| net.contains(&peer.ip()));
        let address_slot = if exempt {
            None
        } else {
            match per_address.take(peer.ip(), options.limits.max_per_address) {
                Some(slot) => Some(slot),
                None => {
                    refuse(&stream);
                    continue;
                }
            }
        };
        let task = Connection {
            router: router.clone(),
            options: options.clone(),
            stop: stop.clone(),
            _slots: (slot, address_slot),
        };
        tokio::spawn(task.run(stream, peer));
    }
    drop(listener);
    // Every connection task holds a permit until it ends.
    let all = u32::try_from(total).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(
        options.drain + Duration::from_secs(1),
        open.acquire_many(all),
    )
    .await;
    Ok(())
}

/// Errors that concern one connection only, after which accepting goes on.
fn is_per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

fn refuse(stream: &TcpStream) {
    // Best effort: a full send buffer or a gone client is not our problem.
    let _ = stream.try_write(&REFUSAL);
}

/// Open connections per client address; an address's entry goes when its
/// last connection does, so the map is never larger than the open set.
#[derive(Debug, Clone, Default)]
struct PerAddress(Arc<Mutex<HashMap<IpAddr, u32>>>);

impl PerAddress {
    fn take(&self, ip: IpAddr, max: u32) -> Option<AddressSlot> {
        let mut counts = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let count = counts.entry(ip).or_insert(0);
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            counts: self.clone(),
            ip,
        })
    }
}

struct AddressSlot {
    counts: PerAddress,
    ip: IpAddr,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.ip) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

struct Connection {
    router: Router,
    options: Arc<ServeOptions>,
    stop: CancellationToken,
    _slots: (OwnedSemaphorePermit, Option<AddressSlot>),
}

impl Connection {
    async fn run(self, stream: TcpStream, peer: SocketAddr) {
        let _ = stream.set_nodelay(true);
        let limits = &self.options.limits;
        let activity = Arc::new(Activity::new());
        let io = TokioIo::new(Watched {
            inner: stream,
            activity: activity.clone(),
        });
        let router = self.router.clone();
        let requests = activity.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            let busy = requests.begin();
            let router = router.clone();
            async move {
                let response = router.oneshot(request.map(Body::new)).await;
                drop(busy);
                response.map_err(|never: Infallible| match never {})
            }
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        // Room for our own header check (`context`) to answer 431 in the
        // spec's form before hyper's bare one.
        builder.max_buf_size(limits.max_header_bytes.saturating_mul(2).max(16 * 1024));
        let connection = builder.serve_connection(io, service).with_upgrades();
        tokio::pin!(connection);
        let tick = (limits.header_timeout.min(limits.idle_timeout) / 4)
            .clamp(Duration::from_millis(100), Duration::from_secs(1));
        let mut closing: Option<Instant> = None;
        loop {
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(error = %e, "connection ended");
                    }
                    return;
                }
                () = self.stop.cancelled(), if closing.is_none() => {
                    connection.as_mut().graceful_shutdown();
                    closing = Some(Instant::now() + self.options.drain);
                }
                () = tokio::time::sleep(tick) => {
                    let now = Instant::now();
                    match closing {
                        // A client that will not take its response is dropped.
                        Some(deadline) if now >= deadline => return,
                        Some(_) => {}
                        None if activity.stalled(now, limits) => {
                            connection.as_mut().graceful_shutdown();
                            closing = Some(now + limits.header_timeout);
                        }
                        None => {}
                    }
                }
            }
        }
    }
}

/// When a connection last did something, as milliseconds since it opened.
#[derive(Debug)]
struct Activity {
    opened: Instant,
    /// Requests being answered.
    busy: AtomicU32,
    /// When the connection last went without a request.
    idle_since: AtomicU64,
    /// When the first byte of the next request head came, or [`NONE`].
    head_started: AtomicU64,
}

const NONE: u64 = u64::MAX;

impl Activity {
    fn new() -> Self {
        Self {
            opened: Instant::now(),
            busy: AtomicU32::new(0),
            idle_since: AtomicU64::new(0),
            head_started: AtomicU64::new(NONE),
        }
    }

    fn millis(&self, at: Instant) -> u64 {
        u64::try_from(at.duration_since(self.opened).as_millis()).unwrap_or(NONE - 1)
    }

    fn read(&self) {
        if self.busy.load(Ordering::Acquire) == 0 {
            let now = self.millis(Instant::now());
            let _ =
                self.head_started
                    .compare_exchange(NONE, now, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    fn begin(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        self.head_started.store(NONE, Ordering::Release);
        Busy(self.clone())
    }

    /// A head that is taking too long, or no request for too long.
    fn stalled(&self, now: Instant, limits: &ConnectionSettings) -> bool {
        if self.busy.load(Ordering::Acquire) > 0 {
            return false;
        }
        let now = self.millis(now);
        let since = |start: u64| Duration::from_millis(now.saturating_sub(start));
        match self.head_started.load(Ordering::Acquire) {
            NONE => since(self.idle_since.load(Ordering::Acquire)) > limits.idle_timeout,
            started => since(started) > limits.header_timeout,
        }
    }
}

/// One request being answered; its end starts the idle clock.
struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        let activity = &self.0;
        activity
            .idle_since
            .store(activity.millis(Instant::now()), Ordering::Release);
        activity.head_started.store(NONE, Ordering::Release);
        activity.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A socket that reports the bytes it reads to its [`Activity`].
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_complete_response() {
        let text = std::str::from_utf8(&REFUSAL).unwrap_or_default();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or_default();
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let body: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        assert_eq!(body["code"], "SERVICE_UNAVAILABLE");
    }

    #[test]
    fn an_address_slot_is_given_back_and_its_entry_removed() {
        let counts = PerAddress::default();
        let ip: IpAddr = [127, 0, 0, 2].into();
        let first = counts.take(ip, 2);
        let second = counts.take(ip, 2);
        assert!(first.is_some() && second.is_some());
        assert!(counts.take(ip, 2).is_none());
        drop((first, second));
        assert!(counts.0.lock().map(|m| m.is_empty()).unwrap_or(false));
    }
}
