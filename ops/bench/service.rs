//! The service a benchmark measures: built from settings in this process
//! (a fresh data directory, the benchmark's variables, a static token) and
//! served on a loopback port until stopped.

use agon::app::App;
use agon::config::Settings;
use agon::store::EventLog;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The static API token every benchmark client sends.
pub const TOKEN: &str = "bench-token-0123456789abcdef";

pub struct Service {
    pub base: String,
    pub log: EventLog,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Service {
    /// Starts the service with `vars` on the store `database_url` names
    /// (SQLite when `None`) and the bus `nats_url` names (in-process when
    /// `None`).
    pub async fn start(
        vars: &[(&str, &str)],
        database_url: Option<String>,
        nats_url: Option<String>,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().to_str().unwrap().to_owned();
        let settings = Settings::from_lookup(|name| match name {
            "SERVICE_DATA_DIR" => Some(data_dir.clone()),
            "DATABASE_URL" => database_url.clone(),
            "SERVICE_NATS_URL" => nats_url.clone(),
            "SERVICE_API_TOKEN" => Some(TOKEN.to_owned()),
            // Demo agents answer at once: the figures measure the service,
            // not the pauses that make a demo's text appear as it is written.
            "SERVICE_DEMO_DELTA_DELAY_MS" => Some("0".to_owned()),
            _ => vars
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned()),
        })
        .unwrap();
        let app = App::build(settings).await.unwrap();
        let log = app.log.clone();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let stop = stop.clone();
            async move { app.run(listener, stop).await.unwrap() }
        });
        Self {
            base,
            log,
            stop,
            task,
            _dir: dir,
        }
    }

    /// Stops the service and waits until it has finished.
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}
