//! `agon serve`: health, admin statistics fed by the projection, JSON errors,
//! and a clean stop on SIGTERM.

use std::time::Duration;

use agon::app::App;
use agon::config::Settings;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::support::binary::Serve;
use crate::support::{Kind, fill_stream, on_both_backends};

on_both_backends! {
    health_and_stats => health_and_stats;
}

/// A running service on a random port.
pub struct Spawned {
    pub base: String,
    pub app: App,
    pub stop: CancellationToken,
    _dir: tempfile::TempDir,
}

/// A test that fails before its last line still stops its service, so the
/// process does not keep the service's connections and files.
impl Drop for Spawned {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Spawned {
    /// GETs `path` and parses the JSON body.
    pub async fn get_json(&self, client: &reqwest::Client, path: &str) -> Value {
        let response = client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        response.json().await.unwrap()
    }
}

pub async fn spawn_app(kind: Kind) -> Spawned {
    spawn_with(kind, &[]).await
}

/// Builds the app with `vars` as its environment (beside its data directory
/// and database), without starting it.
pub async fn build_app(kind: Kind, vars: &[(&str, &str)]) -> (App, tempfile::TempDir) {
    let database_url = match kind {
        Kind::Sqlite => None,
        Kind::Postgres => Some(crate::support::fresh_postgres_database().await),
    };
    build_app_on(database_url, vars).await
}

/// Builds the app on `database_url` (SQLite in a new data directory when
/// `None`), so that several replicas can share one PostgreSQL database.
pub async fn build_app_on(
    database_url: Option<String>,
    vars: &[(&str, &str)],
) -> (App, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    // A given SERVICE_DATA_DIR restarts on an earlier app's embedded store.
    let data_dir = vars
        .iter()
        .find(|(k, _)| *k == "SERVICE_DATA_DIR")
        .map_or_else(
            || dir.path().to_str().unwrap().to_owned(),
            |(_, v)| (*v).to_owned(),
        );
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let settings = Settings::from_lookup(|name| match name {
        "SERVICE_DATA_DIR" => Some(data_dir.clone()),
        "DATABASE_URL" => database_url.clone(),
        "SERVICE_API_TOKEN" if !vars.iter().any(|(k, _)| k == name) => {
            Some(crate::support::TEST_TOKEN.to_owned())
        }
        // Answers wait for their effect to be readable as long as a loaded
        // CI machine needs, so that reads right after them never race.
        "SERVICE_READ_MODEL_WAIT_MS" if !vars.iter().any(|(k, _)| k == name) => {
            Some("30000".to_owned())
        }
        // Demo agents answer at once unless a test watches them write.
        "SERVICE_DEMO_DELTA_DELAY_MS" if !vars.iter().any(|(k, _)| k == name) => {
            Some("0".to_owned())
        }
        _ => vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()),
    })
    .unwrap();
    (App::build(settings).await.unwrap(), dir)
}

/// The whole service on a random port, with `vars` as its environment.
pub async fn spawn_with(kind: Kind, vars: &[(&str, &str)]) -> Spawned {
    // Boxed: the app is large, and callers' futures would hold it inline.
    let (app, dir) = Box::pin(build_app(kind, vars)).await;
    Box::pin(serve_app(app, dir)).await
}

/// Runs a built app on a random port.
pub async fn serve_app(app: App, dir: tempfile::TempDir) -> Spawned {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    tokio::spawn(app.clone().run(listener, stop.clone()));
    Spawned {
        base,
        app,
        stop,
        _dir: dir,
    }
}

/// Serves `router` (the platform around extra test routes) on a random port.
pub async fn serve_router(router: axum::Router) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let service = router.into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, service).await });
    base
}

async fn health_and_stats(kind: Kind) {
    let spawned = spawn_app(kind).await;
    let client = crate::support::client();
    let health = client
        .get(format!("{}/api/health", spawned.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let body: Value = health.json().await.unwrap();
    assert_eq!(body["status"], "healthy");
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    assert!(body["uptime"].as_f64().unwrap() >= 0.0);
    assert_eq!(body["components"]["database"], "healthy");
    assert_eq!(body["components"]["redis"], "not_configured");

    let stats = spawned.get_json(&client, "/api/admin/stats").await;
    assert_eq!(stats["active_debates"], 0);
    assert_eq!(stats["total_events"], 0);

    fill_stream(&spawned.app.log, "tally", "t", 4).await;
    fill_stream(&spawned.app.log, "debate", "d", 1).await;
    let mut stats = Value::Null;
    for _ in 0..200 {
        stats = spawned.get_json(&client, "/api/admin/stats").await;
        if stats["total_events"] == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(stats["total_events"], 5, "{stats}");
    assert_eq!(stats["events_by_aggregate_type"]["tally"], 4);
    assert_eq!(stats["active_debates"], 1);

    let missing = client
        .get(format!("{}/api/nowhere", spawned.base))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let error: Value = missing.json().await.unwrap();
    assert_eq!(error["code"], "NOT_FOUND");
    spawned.stop.cancel();
}

/// Starts `agon serve` with `log_level`, checks health, sends SIGTERM, and
/// returns what it logged.
async fn serve_binary_once(log_level: &str, log_format: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    // No --host: the default bind is loopback, and the log says so.
    let served = Serve::on_free_ports()
        .data_dir(dir.path())
        .env("SERVICE_API_TOKEN", crate::support::TEST_TOKEN)
        .env("SERVICE_LOG_LEVEL", log_level)
        .env("SERVICE_LOG_FORMAT", log_format)
        .stderr(std::process::Stdio::piped())
        .start()
        .await;
    let health = format!("{}/api/health", served.base);
    let response = crate::support::client()
        .get(health)
        .header("x-request-id", "trace-me-42")
        .send()
        .await
        .unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "healthy");
    assert!(
        dir.path().join("agon.db").exists(),
        "the embedded store lives in SERVICE_DATA_DIR"
    );

    let output = served.stop(Duration::from_secs(20)).await;
    assert!(output.status.success(), "exit after SIGTERM: {output:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn the_binary_serves_health_and_stops_on_sigterm() {
    let info = serve_binary_once("INFO", "text").await;
    assert!(
        info.contains("agon listening on http://127.0.0.1:") && info.contains("shutting down"),
        "{info}"
    );
    assert!(
        !info.contains('\u{1b}'),
        "no colour codes when stderr is not a terminal"
    );
    let quiet = serve_binary_once("ERROR", "text").await;
    assert!(
        !quiet.contains("INFO"),
        "SERVICE_LOG_LEVEL=ERROR hides info lines: {quiet}"
    );
}

#[tokio::test]
async fn json_logs_carry_the_request_id() {
    let logged = serve_binary_once("INFO", "json").await;
    let lines: Vec<Value> = logged
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect();
    let finished = lines
        .iter()
        .find(|l| l["fields"]["message"] == "request finished")
        .unwrap_or_else(|| panic!("no request line in {logged}"));
    assert_eq!(finished["span"]["request_id"], "trace-me-42", "{finished}");
    assert_eq!(finished["fields"]["status"], 200);
}
