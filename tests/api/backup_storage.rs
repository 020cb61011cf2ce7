//! Backups kept in an S3-compatible bucket, on both back ends, against a
//! real S3 server on loopback (moto's, `AGON_TEST_S3_SERVER`): a backup's
//! files land in the bucket as objects and no staging copy stays behind;
//! they verify, verify comprehensively, restore-test and restore with
//! `agon restore` from the bucket; a byte changed in the bucket is found;
//! deletion removes the objects; and with the server gone, `dr/validate`
//! says the storage is unreachable while making a backup answers 503 and
//! records nothing. A file larger than a part goes up in parts. The bucket is read and written here with a client of
//! the test's own, never through the service's storage code.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as Key;
use object_store::{ClientOptions, ObjectStore};
use reqwest::Method;
use serde_json::{Value, json};

use crate::backups::{SEAL_KEY, VARS, admin, create_backup, populated};
use crate::serve::spawn_with;
use crate::support::{Kind, LoopbackServer, event, fresh_postgres_database, on_both_backends};

on_both_backends! {
    backups_are_kept_in_the_bucket_and_read_back_from_it => kept_in_the_bucket;
    an_unreachable_bucket_is_reported_and_records_nothing => unreachable_bucket;
    a_large_backup_goes_up_in_parts => uploaded_in_parts;
}

const PREFIX: &str = "team/backups";
const FILES: [&str; 4] = [
    "events.jsonl",
    "manifest.json",
    "seals.jsonl",
    "subject_keys.jsonl",
];

/// moto's S3 server on a free loopback port (`AGON_TEST_S3_SERVER` names
/// its `moto_server`); `None`, said loudly, where it is not set outside CI.
async fn s3_server() -> Option<LoopbackServer> {
    if std::env::var_os("AGON_TEST_S3_SERVER").is_none() {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "AGON_TEST_S3_SERVER is not set: ops/test.sh installs moto and sets it"
        );
        eprintln!("SKIPPED: AGON_TEST_S3_SERVER is not set; run the tests through ops/test.sh");
        return None;
    }
    let server = LoopbackServer::start("http", "AGON_TEST_S3_SERVER", "moto_server", |port, _| {
        vec![
            "-H".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
        ]
    })
    .await;
    Some(server)
}

/// A new bucket on `server` and a client of the test's own for it.
async fn bucket(server: &LoopbackServer) -> (String, Arc<dyn ObjectStore>) {
    let name = format!("agon-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let created = reqwest::Client::new()
        .put(format!("{}/{name}", server.url()))
        .send()
        .await
        .unwrap();
    assert!(created.status().is_success(), "{created:?}");
    let store = AmazonS3Builder::new()
        .with_bucket_name(&name)
        .with_endpoint(server.url())
        .with_region("us-east-1")
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .with_allow_http(true)
        .with_client_options(ClientOptions::new().with_allow_http(true))
        .build()
        .unwrap();
    (name, Arc::new(store))
}

/// The service's variables for `bucket` on `server`.
fn s3_vars(server: &LoopbackServer, bucket: &str) -> Vec<(&'static str, String)> {
    vec![
        ("SERVICE_BACKUP_S3_BUCKET", bucket.to_owned()),
        ("SERVICE_BACKUP_S3_ENDPOINT", server.url()),
        ("SERVICE_BACKUP_S3_ALLOW_HTTP", "true".to_owned()),
        ("SERVICE_BACKUP_S3_PREFIX", PREFIX.to_owned()),
        ("SERVICE_BACKUP_S3_ACCESS_KEY_ID", "test".to_owned()),
        ("SERVICE_BACKUP_S3_SECRET_ACCESS_KEY", "test".to_owned()),
        ("SERVICE_BACKUP_S3_MAX_RETRIES", "0".to_owned()),
    ]
}

fn borrowed<'a>(vars: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    vars.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The keys and sizes of backup `id`'s objects, sorted.
async fn objects(store: &Arc<dyn ObjectStore>, id: &str) -> Vec<(String, u64)> {
    let folder = Key::from(format!("{PREFIX}/{id}"));
    let mut listed: Vec<(String, u64)> = store
        .list(Some(&folder))
        .map_ok(|m| (m.location.to_string(), m.size))
        .try_collect()
        .await
        .unwrap();
    listed.sort();
    listed
}

/// What is left in the backup directory beside `.scratch`'s empty folder.
fn staged(dir: &Path) -> Vec<String> {
    let mut left: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let scratch = dir.join(".scratch");
    if let Ok(entries) = std::fs::read_dir(&scratch) {
        left.extend(entries.map(|e| format!(".scratch/{:?}", e.unwrap().file_name())));
    }
    left.retain(|name| name != ".scratch");
    left.sort();
    left
}

async fn kept_in_the_bucket(kind: Kind) {
    let Some(server) = s3_server().await else {
        return;
    };
    let (name, store) = bucket(&server).await;
    let vars = s3_vars(&server, &name);
    let live = populated(kind, &borrowed(&vars)).await;
    let base = &live.base;
    let backup = create_backup(base, "to the bucket").await;
    let id = backup["backup_id"].as_str().unwrap().to_owned();
    assert_eq!(backup["storage"], "s3", "{backup}");

    // Its files are objects under the prefix; nothing stays staged.
    let listed = objects(&store, &id).await;
    let keys: Vec<String> = listed.iter().map(|(k, _)| k.clone()).collect();
    let expected: Vec<String> = FILES.iter().map(|f| format!("{PREFIX}/{id}/{f}")).collect();
    assert_eq!(keys, expected);
    let manifest: Value = serde_json::from_slice(
        &store
            .get(&Key::from(format!("{PREFIX}/{id}/manifest.json")))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["backup_id"], id.as_str());
    for file in manifest["files"].as_array().unwrap() {
        let key = format!("{PREFIX}/{id}/{}", file["name"].as_str().unwrap());
        let size = listed.iter().find(|(k, _)| *k == key).unwrap().1;
        assert_eq!(json!(size), file["bytes"], "{key}");
    }
    let dir = live.app.settings.backup.dir.clone();
    assert_eq!(staged(&dir), Vec::<String>::new());

    // It verifies, verifies comprehensively and restores, read back from
    // the bucket (and the downloads are removed again).
    let path = format!("/api/backups/{id}/verify");
    let (status, verified) = admin(base, Method::POST, &path, None).await;
    assert_eq!(
        (status, &verified["valid"]),
        (200, &json!(true)),
        "{verified}"
    );
    assert_eq!(verified["events_checked"], backup["events"], "{verified}");
    let path = format!("/api/backups/{id}/verify-comprehensive");
    let (status, report) = admin(base, Method::POST, &path, None).await;
    assert_eq!((status, &report["valid"]), (200, &json!(true)), "{report}");
    assert_eq!(report["identical"], true, "{report}");
    let path = format!("/api/backups/{id}/restore-test");
    let (status, test) = admin(base, Method::POST, &path, None).await;
    assert_eq!((status, &test["success"]), (200, &json!(true)), "{test}");
    assert_eq!(test["events_restored"], backup["events"], "{test}");
    let (status, drill) = admin(base, Method::POST, "/api/dr/drill", None).await;
    assert_eq!(status, 200, "{drill}");
    assert_eq!(drill["success"], true, "{drill}");
    assert_eq!(drill["backup_id"], id.as_str(), "{drill}");
    let (status, valid) = admin(base, Method::POST, "/api/dr/validate", None).await;
    assert_eq!(status, 200, "{valid}");
    let check = |name: &str| {
        valid["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(check("storage_reachable")["ok"], true, "{valid}");
    assert_eq!(check("staging_writable")["ok"], true, "{valid}");
    assert_eq!(staged(&dir), Vec::<String>::new());

    // `agon restore` by name, from the bucket, into a fresh store.
    let data = tempfile::tempdir().unwrap();
    let url = match kind {
        Kind::Sqlite => None,
        Kind::Postgres => Some(fresh_postgres_database().await),
    };
    let mut command = Command::new(env!("CARGO_BIN_EXE_agon"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("SERVICE_DATA_DIR", data.path())
        .env("SERVICE_SIGNING_KEY", SEAL_KEY)
        .env("SERVICE_LOG_LEVEL", "WARN")
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .args(["restore", "--from", &id]);
    if let Some(url) = &url {
        command.env("DATABASE_URL", url);
    }
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let restored: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(restored["events_restored"], backup["events"], "{restored}");
    assert_eq!(restored["problem"], Value::Null, "{restored}");

    // One byte changed in the bucket: verification names the file.
    let events = Key::from(format!("{PREFIX}/{id}/events.jsonl"));
    let mut bytes = store
        .get(&events)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec();
    let at = bytes.iter().position(|b| *b == b'"').unwrap();
    bytes[at + 1] ^= 0x01;
    store.put(&events, bytes.into()).await.unwrap();
    let path = format!("/api/backups/{id}/verify");
    let (status, verified) = admin(base, Method::POST, &path, None).await;
    assert_eq!(status, 200, "{verified}");
    assert_eq!(
        (&verified["valid"], &verified["checksums_ok"]),
        (&json!(false), &json!(false)),
        "{verified}"
    );
    assert!(
        verified["problems"][0]
            .as_str()
            .unwrap()
            .contains("events.jsonl"),
        "{verified}"
    );

    // Deleting it removes its objects.
    let path = format!("/api/backups/{id}");
    let (status, deleted) = admin(base, Method::DELETE, &path, None).await;
    assert_eq!((status, &deleted["status"]), (200, &json!("deleted")));
    assert_eq!(objects(&store, &id).await, Vec::new());
    live.stop.cancel();
}

async fn unreachable_bucket(kind: Kind) {
    let Some(mut server) = s3_server().await else {
        return;
    };
    let (name, _) = bucket(&server).await;
    let vars = s3_vars(&server, &name);
    let live = populated(kind, &borrowed(&vars)).await;
    let base = &live.base;
    let kept = create_backup(base, "while the bucket answers").await;
    let id = kept["backup_id"].as_str().unwrap();
    server.stop();

    let (status, valid) = admin(base, Method::POST, "/api/dr/validate", None).await;
    assert_eq!(status, 200, "{valid}");
    assert_eq!(valid["valid"], false, "{valid}");
    let storage = valid["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "storage_reachable")
        .cloned()
        .unwrap();
    assert_eq!(storage["ok"], false, "{valid}");
    assert!(
        storage["detail"].as_str().unwrap().contains("unreachable"),
        "{valid}"
    );

    // Making a backup answers the error form and records nothing.
    let body = json!({"backup_type": "full", "description": "while the bucket is down"});
    let (status, refused) = admin(base, Method::POST, "/api/backups", Some(body)).await;
    assert_eq!(status, 503, "{refused}");
    assert_eq!(refused["code"], "SERVICE_UNAVAILABLE", "{refused}");
    assert!(
        refused.to_string().contains(&name),
        "names the bucket: {refused}"
    );
    let (_, list) = admin(base, Method::GET, "/api/backups", None).await;
    assert_eq!(list["total"], 1, "{list}");
    assert_eq!(staged(&live.app.settings.backup.dir), Vec::<String>::new());

    // Reading a kept backup back answers the same way; a drill is recorded
    // as failed.
    for path in [
        format!("/api/backups/{id}/verify"),
        format!("/api/backups/{id}/restore-test"),
    ] {
        let (status, refused) = admin(base, Method::POST, &path, None).await;
        assert_eq!(status, 503, "{path}: {refused}");
    }
    let path = format!("/api/backups/{id}");
    let (status, refused) = admin(base, Method::DELETE, &path, None).await;
    assert_eq!(status, 503, "{refused}");
    let (status, one) = admin(base, Method::GET, &path, None).await;
    assert_eq!(
        (status, &one["status"]),
        (200, &json!("completed")),
        "{one}"
    );
    let (status, drill) = admin(base, Method::POST, "/api/dr/drill", None).await;
    assert_eq!(status, 200, "{drill}");
    assert_eq!(drill["success"], false, "{drill}");
    assert!(
        drill["error"].as_str().unwrap_or_default().contains(&name),
        "{drill}"
    );
    live.stop.cancel();
}

async fn uploaded_in_parts(kind: Kind) {
    let Some(server) = s3_server().await else {
        return;
    };
    let (name, store) = bucket(&server).await;
    let mut vars = s3_vars(&server, &name);
    vars.push(("SERVICE_BACKUP_S3_PART_SIZE_MB", "5".to_owned()));
    // The read models take a while over that many events; the backup's
    // own is waited for as long as they need.
    vars.push(("SERVICE_BACKUP_CATCHUP_TIMEOUT_MS", "600000".to_owned()));
    let mut all = VARS.to_vec();
    all.extend(borrowed(&vars));
    let live = spawn_with(kind, &all).await;
    // About 7 MB of event lines: more than one 5 MB part.
    let events: Vec<_> = (1..=12_000).map(|n| event("tally", "bulk", n)).collect();
    live.app.log.append(&events).await.unwrap();
    let backup = create_backup(&live.base, "in parts").await;
    let id = backup["backup_id"].as_str().unwrap();
    assert!(backup["events"].as_u64().unwrap() >= 12_000, "{backup}");

    let key = Key::from(format!("{PREFIX}/{id}/events.jsonl"));
    let meta = store.head(&key).await.unwrap();
    assert!(meta.size > 5 * 1024 * 1024, "{meta:?}");
    // S3 gives an object put together from parts an ETag `"<md5>-<parts>"`.
    let etag = meta.e_tag.clone().unwrap_or_default();
    assert!(etag.trim_matches('"').ends_with("-2"), "{meta:?}");
    let path = format!("/api/backups/{id}/verify");
    let (status, verified) = admin(&live.base, Method::POST, &path, None).await;
    assert_eq!(
        (status, &verified["valid"]),
        (200, &json!(true)),
        "{verified}"
    );
    assert_eq!(verified["events_checked"], backup["events"], "{verified}");
    assert_eq!(staged(&live.app.settings.backup.dir), Vec::<String>::new());
    live.stop.cancel();
}

/// A bucket without credentials, or an endpoint that is not a URL or is
/// plain http without leave, stops the start naming the variable.
#[test]
fn bad_bucket_settings_stop_the_start_naming_the_variable() {
    let data = tempfile::tempdir().unwrap();
    let bucket = ("SERVICE_BACKUP_S3_BUCKET", "agon-backups");
    let keys = [
        bucket,
        ("SERVICE_BACKUP_S3_ACCESS_KEY_ID", "id"),
        ("SERVICE_BACKUP_S3_SECRET_ACCESS_KEY", "secret"),
    ];
    let cases: [(Vec<(&str, &str)>, &str); 3] = [
        (vec![bucket], "SERVICE_BACKUP_S3_ACCESS_KEY_ID"),
        (
            [
                &keys[..],
                &[("SERVICE_BACKUP_S3_ENDPOINT", "127.0.0.1:9000")],
            ]
            .concat(),
            "SERVICE_BACKUP_S3_ENDPOINT",
        ),
        (
            [
                &keys[..],
                &[("SERVICE_BACKUP_S3_ENDPOINT", "http://127.0.0.1:9")],
            ]
            .concat(),
            "SERVICE_BACKUP_S3_ALLOW_HTTP",
        ),
    ];
    for (vars, named) in cases {
        let output = Command::new(env!("CARGO_BIN_EXE_agon"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("SERVICE_DATA_DIR", data.path())
            .envs(vars.iter().copied())
            .arg("backup")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{vars:?}: {stderr}");
        assert!(
            stderr.contains(named),
            "{vars:?} should name {named}: {stderr}"
        );
    }
}
