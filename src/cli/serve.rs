//! `agon serve`: binds the API and WebSocket ports, says where it listens,
//! and runs the service until SIGTERM or Ctrl-C.

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::app::App;

/// Runs the service on `host:api_port` until a signal; the error says why
/// it could not start or stopped.
pub async fn serve(app: App, host: &str, api_port: u16, ws_port: u16) -> Result<(), String> {
    let listener = TcpListener::bind((host, api_port))
        .await
        .map_err(|e| format!("cannot listen on {host}:{api_port}: {e}"))?;
    let url = match listener.local_addr() {
        Ok(std::net::SocketAddr::V6(addr)) => format!("http://[{}]:{}", addr.ip(), addr.port()),
        Ok(addr) => format!("http://{addr}"),
        Err(_) => format!("http://{host}:{api_port}"),
    };
    tracing::info!(
        %url,
        ws_port,
        store = app.log.backend().name(),
        bus = app.bus.name(),
        "agon listening on {url}"
    );
    let ws = TcpListener::bind((host, ws_port))
        .await
        .map_err(|e| format!("cannot listen on {host}:{ws_port} (--ws-port): {e}"))?;
    let stop = CancellationToken::new();
    tokio::spawn(stop_on_signal(stop.clone()));
    app.run_with_ws(listener, Some(ws), stop)
        .await
        .map_err(|e| e.to_string())
}

async fn stop_on_signal(stop: CancellationToken) {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
    tracing::info!("shutting down");
    stop.cancel();
}
