//! Backups end to end on both back ends: a backup of a store with accounts,
//! finished debates and seals is listed, verifies, verifies comprehensively
//! (its read models rebuilt in a scratch store equal the live ones), and
//! restores with `agon restore` into a fresh store whose read models are
//! identical, whose seals verify and which goes on serving with new events
//! after the restored ones. Tampered files are found; deletion and retention
//! are recorded; normal users are refused.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use agon::store::{Db, EventLog};
use reqwest::Method;
use serde_json::{Value, json};

use crate::serve::{Spawned, build_app_on, serve_app, spawn_with};
use crate::support::accounts::{call, login, register, signed_in};
use crate::support::{Kind, TEST_TOKEN, fresh_postgres_database, on_both_backends};

on_both_backends! {
    a_backup_restores_into_a_fresh_store_with_identical_read_models => restores_identically;
    tampered_deleted_and_expired_backups => tampered_deleted_and_expired;
}

/// A fixed seal key, so that `agon restore` verifies against the live one.
pub const SEAL_KEY: &str = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed";

/// Fixed field keys: the restored service must open the personal fields
/// that the live one sealed (each user's data key is backed up wrapped).
pub const FIELD_KEY: &str = "f1e1df1e1df1e1df1e1df1e1df1e1df1e1df1e1df1e1df1e1df1e1df1e1df1e1";
pub const INDEX_KEY: &str = "1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d";

pub const VARS: [(&str, &str); 5] = [
    ("SERVICE_SIGNING_KEY", SEAL_KEY),
    ("SERVICE_ENCRYPTION_KEY", FIELD_KEY),
    ("SERVICE_BLIND_INDEX_KEY", INDEX_KEY),
    ("SERVICE_SEAL_INTERVAL_SECONDS", "3600"),
    ("SERVICE_RATE_LIMIT_ADMIN", "1000000"),
];

/// `method path` with the static (admin) token; status and JSON body.
pub async fn admin(base: &str, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    call(method, &format!("{base}{path}"), Some(TEST_TOKEN), body).await
}

/// Runs a finished one-round demo debate on `topic`; its id.
pub async fn finished_debate(base: &str, topic: &str) -> String {
    let body = json!({"topic": topic, "agents": ["demo-a", "demo-b", "demo-c"], "rounds": 1});
    let (status, created) = admin(base, Method::POST, "/api/debates", Some(body)).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    for _ in 0..400 {
        let (_, detail) = admin(base, Method::GET, &format!("/api/debates/{id}"), None).await;
        if detail["status"] == "completed" {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("debate {id} did not complete");
}

/// A service with an account, two finished debates and everything sealed.
pub async fn populated(kind: Kind, extra: &[(&str, &str)]) -> Spawned {
    let mut vars = VARS.to_vec();
    vars.extend_from_slice(&crate::auth::ROOMY);
    vars.extend_from_slice(extra);
    // Boxed: the whole service's start is a large future to keep inline.
    let spawned = Box::pin(spawn_with(kind, &vars)).await;
    register(&spawned.base, "kept@example.com", "correct horse battery").await;
    for topic in ["Backed up one", "Backed up two"] {
        finished_debate(&spawned.base, topic).await;
    }
    let app = &spawned.app;
    app.log.seal_now(&app.seal_key).await.unwrap();
    spawned
}

/// `POST /api/backups`; the new backup's view.
pub async fn create_backup(base: &str, description: &str) -> Value {
    let body = json!({"backup_type": "full", "description": description});
    let (status, created) = admin(base, Method::POST, "/api/backups", Some(body)).await;
    assert_eq!(status, 201, "{created}");
    created
}

/// `agon restore --from <dir>` into the store `url` or `data` names.
fn agon_restore(url: Option<&str>, data: &Path, from: &Path) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agon"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("SERVICE_DATA_DIR", data)
        .env("SERVICE_SIGNING_KEY", SEAL_KEY)
        .env("SERVICE_LOG_LEVEL", "WARN")
        .args(["restore", "--from"])
        .arg(from);
    if let Some(url) = url {
        command.env("DATABASE_URL", url);
    }
    command.output().unwrap()
}

async fn restores_identically(kind: Kind) {
    let live = populated(kind, &[]).await;
    let base = &live.base;
    let backup = create_backup(base, "before the restore").await;
    let id = backup["backup_id"].as_str().unwrap().to_owned();
    assert_eq!(backup["status"], "completed", "{backup}");
    assert!(backup["events"].as_u64().unwrap() > 10, "{backup}");
    assert!(backup["seals"].as_u64().unwrap() >= 1, "{backup}");
    assert_eq!(backup["backend"], live.app.log.backend().name());

    let (status, list) = admin(base, Method::GET, "/api/v2/backups?limit=10", None).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["data"]["total"], 1, "{list}");
    assert_eq!(list["data"]["backups"][0]["backup_id"], id.as_str());
    let (status, one) = admin(base, Method::GET, &format!("/api/backups/{id}"), None).await;
    assert_eq!((status, &one["events"]), (200, &backup["events"]), "{one}");

    let (status, verified) = admin(
        base,
        Method::POST,
        &format!("/api/backups/{id}/verify"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{verified}");
    assert_eq!(verified["valid"], true, "{verified}");
    assert_eq!(verified["events_checked"], backup["events"], "{verified}");
    assert_eq!(verified["seals_checked"], backup["seals"], "{verified}");

    let path = format!("/api/backups/{id}/verify-comprehensive");
    let (status, report) = admin(base, Method::POST, &path, None).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["valid"], true, "{report}");
    assert_eq!(report["identical"], true, "{report}");
    let projections = report["projections"].as_array().unwrap();
    assert_eq!(
        projections.len(),
        agon::projection::REGISTRY.len(),
        "{report}"
    );
    let compared = |p: &Value| p["compared_with"].as_str().unwrap().to_owned();
    // The debates were read from the service's own read models; the
    // backup's own event came after it, so its list was replayed.
    let debates = projections
        .iter()
        .find(|p| p["projection"] == "debates")
        .unwrap();
    assert_eq!(compared(debates), "live", "{report}");
    let listed = projections
        .iter()
        .find(|p| p["projection"] == "backups")
        .unwrap();
    assert_eq!(compared(listed), "live_log", "{report}");

    let path = format!("/api/backups/{id}/restore-test");
    let (status, test) = admin(base, Method::POST, &path, None).await;
    assert_eq!(status, 200, "{test}");
    assert_eq!(test["success"], true, "{test}");
    assert_eq!(test["events_restored"], backup["events"], "{test}");

    // `agon restore` into a fresh store of the same back end.
    let data = tempfile::tempdir().unwrap();
    let url = match kind {
        Kind::Sqlite => None,
        Kind::Postgres => Some(fresh_postgres_database().await),
    };
    let from = live.app.settings.backup.dir.join(&id);
    let output = agon_restore(url.as_deref(), data.path(), &from);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let restored: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(restored["events_restored"], backup["events"], "{restored}");
    assert_eq!(restored["problem"], Value::Null, "{restored}");

    // Its read models are those the backup's position had.
    let db = match &url {
        Some(url) => Db::connect_postgres(url, 4).await.unwrap(),
        None => Db::open_sqlite(data.path()).await.unwrap(),
    };
    let digests = agon::backup::digest::digests(&EventLog::new(db.clone()))
        .await
        .unwrap();
    for projection in projections {
        let name = projection["projection"].as_str().unwrap();
        assert_eq!(
            projection["live_digest"].as_str(),
            digests.get(name).map(String::as_str),
            "{name} differs after agon restore"
        );
    }
    db.close().await;

    // The restored store serves: old debates read back, new events come
    // after the restored ones, and the whole log seals and verifies.
    let data_dir = data.path().to_str().unwrap().to_owned();
    let mut vars = VARS.to_vec();
    if url.is_none() {
        vars.push(("SERVICE_DATA_DIR", &data_dir));
    }
    let (app, dir) = build_app_on(url.clone(), &vars).await;
    let second = serve_app(app, dir).await;
    // The account signs in and reads as it was: its data key came back.
    let signed = login(&second.base, "kept@example.com", "correct horse battery").await;
    let token = signed["access_token"]
        .as_str()
        .expect("signs in")
        .to_owned();
    let (status, me) = call(
        Method::GET,
        &format!("{}/api/auth/me", second.base),
        Some(&token),
        None,
    )
    .await;
    assert_eq!(status, 200, "{me}");
    assert!(me.to_string().contains("kept@example.com"), "{me}");
    let (status, list) = admin(&second.base, Method::GET, "/api/debates", None).await;
    assert_eq!((status, &list["total"]), (200, &json!(2)), "{list}");
    let new = finished_debate(&second.base, "After the restore").await;
    let head = second.app.log.feed_head().await.unwrap();
    let old_head = backup["head_position"].as_i64().unwrap();
    assert!(
        head.position > old_head,
        "new events sort after the restored ones"
    );
    let (status, detail) = admin(
        &second.base,
        Method::GET,
        &format!("/api/debates/{new}"),
        None,
    )
    .await;
    assert_eq!((status, &detail["status"]), (200, &json!("completed")));
    second.app.log.seal_now(&second.app.seal_key).await.unwrap();
    let report = second
        .app
        .log
        .verify(&second.app.seal_key.public_hex())
        .await
        .unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.unsealed_events, 0);
    assert!(report.seals_checked > backup["seals"].as_u64().unwrap());
    second.stop.cancel();
    live.stop.cancel();
}

async fn tampered_deleted_and_expired(kind: Kind) {
    let live = populated(
        kind,
        &[
            ("SERVICE_BACKUP_RETENTION_COUNT", "1"),
            ("SERVICE_BACKUP_RETENTION_DAYS", "1"),
        ],
    )
    .await;
    let base = &live.base;
    let older = create_backup(base, "older").await;
    let newer = create_backup(base, "newer").await;
    let older_id = older["backup_id"].as_str().unwrap();
    let newer_id = newer["backup_id"].as_str().unwrap();

    // A changed event line is found by its checksum.
    let file = live
        .app
        .settings
        .backup
        .dir
        .join(newer_id)
        .join("events.jsonl");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replacen("Backed up one", "Backed up 0ne", 1)).unwrap();
    let path = format!("/api/backups/{newer_id}/verify");
    let (status, verified) = admin(base, Method::POST, &path, None).await;
    assert_eq!(status, 200, "{verified}");
    assert_eq!(
        (&verified["valid"], &verified["checksums_ok"]),
        (&json!(false), &json!(false))
    );
    let path = format!("/api/backups/{newer_id}/restore-test");
    let (_, test) = admin(base, Method::POST, &path, None).await;
    assert_eq!(test["success"], false, "{test}");

    // Retention: one kept, older ones go after a day; a dry run only names them.
    live.app.clock.advance(Duration::from_secs(2 * 86_400));
    let cleanup = |dry: bool| {
        admin(
            base,
            Method::POST,
            "/api/backups/cleanup",
            Some(json!({"dry_run": dry})),
        )
    };
    let (status, dry) = cleanup(true).await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(dry["deleted"], json!([older_id]), "{dry}");
    assert!(live.app.settings.backup.dir.join(older_id).is_dir());
    let (_, done) = cleanup(false).await;
    assert_eq!(done["deleted"], json!([older_id]), "{done}");
    assert!(!live.app.settings.backup.dir.join(older_id).exists());
    let path = format!("/api/backups/{older_id}");
    assert_eq!(admin(base, Method::GET, &path, None).await.0, 404);
    let (_, gone) = admin(base, Method::GET, "/api/backups?status=deleted", None).await;
    assert_eq!(gone["total"], 1, "{gone}");
    assert_eq!(gone["backups"][0]["backup_id"], older_id, "{gone}");
    assert_eq!(gone["backups"][0]["deleted_reason"], "retention", "{gone}");
    let path = format!("/api/backups/{older_id}/verify");
    assert_eq!(admin(base, Method::POST, &path, None).await.0, 404);

    // An operator deletes the other; the list of kept backups is empty.
    let path = format!("/api/backups/{newer_id}");
    let (status, deleted) = admin(base, Method::DELETE, &path, None).await;
    assert_eq!(
        (status, &deleted["status"]),
        (200, &json!("deleted")),
        "{deleted}"
    );
    assert_eq!(admin(base, Method::DELETE, &path, None).await.0, 404);
    let (_, kept) = admin(base, Method::GET, "/api/backups?status=completed", None).await;
    assert_eq!(kept["total"], 0, "{kept}");
    let (_, stats) = admin(base, Method::GET, "/api/backups/stats", None).await;
    assert_eq!(stats["total_backups"], 0, "{stats}");

    // Bad input and other callers.
    for bad in [json!([null, null]), json!({"include_data": ["debates"]})] {
        assert_eq!(
            admin(base, Method::POST, "/api/backups", Some(bad)).await.0,
            422
        );
    }
    let bad = json!({"backup_type": "incremental"});
    assert_eq!(
        admin(base, Method::POST, "/api/backups", Some(bad)).await.0,
        422
    );
    assert_eq!(
        admin(base, Method::GET, "/api/backups/..%2Fetc", None)
            .await
            .0,
        404
    );
    let (_, token, _) = signed_in(base, "plain@example.com").await;
    let url = format!("{base}/api/v2/backups");
    assert_eq!(call(Method::GET, &url, Some(&token), None).await.0, 403);
    let url = format!("{base}/api/v2/dr/drill");
    assert_eq!(call(Method::POST, &url, Some(&token), None).await.0, 403);
    live.stop.cancel();
}
