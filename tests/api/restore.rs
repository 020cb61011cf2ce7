//! The event order survives a restore: a log dumped with `pg_dump` and
//! restored into a fresh cluster, whose transaction ids start low again,
//! keeps serving through the real binary. New debates are readable at once,
//! listings hold old and new, the runner finishes them, and the new events
//! are sealed after the old seals, which still verify. A move simulated in
//! place checks many connections settling the order at once. The same
//! holds for a backup made by `agon backup` and restored by `agon restore`.
//!
//! PostgreSQL only; the test starts its own throwaway cluster with the
//! `initdb` and `pg_ctl` of the test server's major version and fails (never
//! skips) when they are missing: `ops/test.sh` installs them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use agon::store::{Db, EventLog};
use agon_projections::Cursor;
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::{Connection, PgConnection};

use crate::support::accounts::{call, login, register};
use crate::support::{
    TEST_TOKEN, admin_url, fill_stream, free_port, fresh_postgres_database, listening,
    write_concurrently,
};

/// Transaction ids the source cluster has used at least before the log is
/// written: far beyond what the fresh cluster uses during the test (initdb,
/// the restore and the service take a few thousand).
const SOURCE_XID_FLOOR: i64 = 60_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_log_restored_into_a_new_cluster_keeps_its_order() {
    let bin = pg_bin_dir(&admin_url()).await;
    let data = tempfile::tempdir().unwrap();
    let source = fresh_postgres_database().await;
    burn_transaction_ids(&source, SOURCE_XID_FLOOR).await;

    let (old, before) = first_life(&source, data.path()).await;

    // Dump, and restore into a cluster of its own.
    let dump = data.path().join("agon.dump");
    let dumped = Command::new(bin.join("pg_dump"))
        .args(["-Fc", "-f"])
        .arg(&dump)
        .arg(format!("--dbname={source}"))
        .output()
        .unwrap();
    assert_success(&dumped);
    let cluster = Cluster::start(&bin);
    let target = cluster.create_database("agon").await;
    let restored = Command::new(bin.join("pg_restore"))
        .args(["--no-owner", "--exit-on-error"])
        .arg(format!("--dbname={target}"))
        .arg(&dump)
        .output()
        .unwrap();
    assert_success(&restored);
    let (highest, next) = order_and_next_xid(&target).await;
    assert!(
        next < highest,
        "the scenario needs the new cluster's ids ({next}) below the restored order ({highest})"
    );
    assert_eq!(verify(&target, data.path())["problem"], Value::Null);

    second_life(&target, data.path(), &old, &before, highest).await;
}

/// `agon backup` on the source, `agon restore` into a database of a new
/// cluster (its transaction ids start low again): the same second life.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_restored_into_a_new_cluster_keeps_its_order() {
    let bin = pg_bin_dir(&admin_url()).await;
    let data = tempfile::tempdir().unwrap();
    let source = fresh_postgres_database().await;
    burn_transaction_ids(&source, SOURCE_XID_FLOOR).await;
    let (old, before) = first_life(&source, data.path()).await;
    let backed = agon(
        &source,
        data.path(),
        &["backup", "--description", "the move"],
    );
    assert_success(&backed);
    let backup: Value = serde_json::from_slice(&backed.stdout).unwrap();
    assert_eq!(backup["events"], before["events_checked"], "{backup}");
    let cluster = Cluster::start(&bin);
    let target = cluster.create_database("agon").await;
    let id = backup["backup_id"].as_str().unwrap();
    let restored = agon(&target, data.path(), &["restore", "--from", id]);
    assert_success(&restored);
    let (highest, next) = order_and_next_xid(&target).await;
    assert!(
        next < highest,
        "the scenario needs the new cluster's ids ({next}) below the restored order ({highest})"
    );
    let report = verify(&target, data.path());
    assert_eq!(report["seals_checked"], before["seals_checked"], "{report}");
    second_life(&target, data.path(), &old, &before, highest).await;
}

/// The first life on `url`: an account, two finished debates, everything
/// sealed. The debates' ids and the log's verification report.
async fn first_life(source: &str, data: &Path) -> (Vec<String>, Value) {
    let service = Service::start(source, data).await;
    let api = Api::new(&service.base);
    register(&service.base, "before@example.com", "correct horse battery").await;
    let mut old = Vec::new();
    for topic in ["First life one", "First life two"] {
        old.push(api.demo(topic).await);
    }
    for id in &old {
        api.finished(id).await;
    }
    assert_success(&agon(source, data, &["seal"]));
    service.stop().await;
    let before = verify(source, data);
    assert_eq!(before["unsealed_events"], 0, "{before}");
    (old, before)
}

/// The second life, on the restored database `target`: old and new
/// debates read back and list, accounts sign in, and everything new is
/// sealed after the old seals (the stored order was `highest`).
async fn second_life(target: &str, data: &Path, old: &[String], before: &Value, highest: i64) {
    let service = Service::start(target, data).await;
    let api = Api::new(&service.base);
    let started = Instant::now();
    let id = api.demo("After the restore").await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the create waited {:?} for its read model",
        started.elapsed()
    );
    let (status, detail) = api.get(&format!("/api/debates/{id}")).await;
    assert_eq!(status, 200, "read back at once: {detail}");
    for old in old {
        let (status, detail) = api.get(&format!("/api/debates/{old}")).await;
        assert_eq!((status, &detail["status"]), (200, &json!("completed")));
    }
    api.finished(&id).await;
    let list = api.until("/api/debates", |l| l["total"] == 3).await;
    let listed: Vec<&str> = list["debates"]
        .as_array()
        .map(|items| items.iter().filter_map(|d| d["id"].as_str()).collect())
        .unwrap_or_default();
    for expected in old.iter().chain([&id]) {
        assert!(listed.contains(&expected.as_str()), "{expected}: {list}");
    }
    // The old account signs in; a new one registers and signs in.
    let old_login = login(&service.base, "before@example.com", "correct horse battery").await;
    assert!(old_login["access_token"].is_string(), "{old_login}");
    register(&service.base, "after@example.com", "correct horse battery").await;
    let new_login = login(&service.base, "after@example.com", "correct horse battery").await;
    let token = new_login["access_token"].as_str().unwrap();
    let me = call(
        Method::GET,
        &format!("{}/api/auth/me", service.base),
        Some(token),
        None,
    )
    .await;
    assert_eq!(me.0, 200, "{}", me.1);

    // Everything new is sealed after the old seals; the whole log verifies.
    assert_success(&agon(target, data, &["seal"]));
    let report = verify(target, data);
    assert_eq!(report["unsealed_events"], 0, "{report}");
    let seals = report["seals_checked"].as_u64().unwrap();
    let old_seals = before["seals_checked"].as_u64().unwrap();
    assert!(seals > old_seals, "nothing new was sealed: {report}");
    assert!(
        report["events_checked"].as_u64() > before["events_checked"].as_u64(),
        "{report}"
    );
    let (after_highest, _) = order_and_next_xid(target).await;
    assert!(
        after_highest > highest,
        "new events sort after the old ones"
    );
    service.stop().await;
    assert_eq!(verify(target, data)["unsealed_events"], 0);
}

/// A move simulated in place, for the many connections of a new process that
/// settle the order at once: another cluster (or, without an identifier to
/// go by, one whose ids ran far ahead) wrote the log. Every new event sorts
/// after every old one, all with one shift, and the feed passes none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_writers_after_a_move_share_one_shift() {
    for identifier in ["1", "NULL"] {
        let url = fresh_postgres_database().await;
        let log = EventLog::new(Db::connect_postgres(&url, 4).await.unwrap());
        fill_stream(&log, "tally", "old", 5).await;
        log.db().close().await;
        let mut conn = PgConnection::connect(&url).await.unwrap();
        let moved = format!(
            "UPDATE events SET txid = txid + 1000000000000; \
             UPDATE event_order SET system_identifier = {identifier}"
        );
        sqlx::raw_sql(&moved).execute(&mut conn).await.unwrap();
        let (old_highest, _) = order_and_next_xid(&url).await;
        let checkpoint = Cursor {
            txid: old_highest,
            position: 5,
        };

        let log = EventLog::new(Db::connect_postgres(&url, 24).await.unwrap());
        write_concurrently(&log, "new", 24, 2).await;
        let mut feed = Vec::new();
        for _ in 0..500 {
            feed = log.read_feed(checkpoint, 1_000).await.unwrap();
            if feed.len() >= 48 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(feed.len(), 48, "identifier {identifier}");
        let shift: i64 = sqlx::query_scalar("SELECT shift FROM event_order")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        let next: i64 = sqlx::query_scalar("SELECT pg_current_xact_id()::text::bigint")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        for event in &feed {
            assert!(event.txid > old_highest, "{event:?}");
            // Written with this shift: the rest is one of this cluster's ids.
            assert!((1..next).contains(&(event.txid - shift)), "{event:?}");
        }
        assert!(log.verify("unused").await.unwrap().intact());
        log.db().close().await;
        conn.close().await.unwrap();
    }
}

/// The `bin` directory of the PostgreSQL installation whose major version
/// is the test server's, so `pg_dump` and `pg_restore` match it.
async fn pg_bin_dir(url: &str) -> PathBuf {
    let mut conn = PgConnection::connect(url).await.unwrap();
    let version: String = sqlx::query_scalar("SELECT current_setting('server_version_num')")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    let major = version.parse::<u32>().unwrap() / 10_000;
    let bin = PathBuf::from(format!("/usr/lib/postgresql/{major}/bin"));
    for tool in ["initdb", "pg_ctl", "pg_dump", "pg_restore"] {
        assert!(
            bin.join(tool).is_file(),
            "{} is missing: install PostgreSQL {major} (ops/test.sh does)",
            bin.join(tool).display()
        );
    }
    bin
}

/// Commits empty transactions that take ids until the cluster of `url` has
/// handed out at least `floor` of them.
async fn burn_transaction_ids(url: &str, floor: i64) {
    let mut conn = PgConnection::connect(url).await.unwrap();
    let burn = format!(
        "DO $$ BEGIN \
           WHILE pg_current_xact_id()::text::bigint < {floor} LOOP COMMIT; END LOOP; \
         END $$"
    );
    sqlx::raw_sql(&burn).execute(&mut conn).await.unwrap();
    conn.close().await.unwrap();
}

/// The highest stored feed order and the cluster's next transaction id.
async fn order_and_next_xid(url: &str) -> (i64, i64) {
    let mut conn = PgConnection::connect(url).await.unwrap();
    let row = sqlx::query_as(
        "SELECT (SELECT max(txid) FROM events), \
                pg_snapshot_xmax(pg_current_snapshot())::text::bigint",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    row
}

/// A throwaway PostgreSQL cluster on a free loopback port, stopped on drop.
struct Cluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
}

impl Cluster {
    fn start(bin: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("chmod")
            .arg("755")
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success());
        if is_root() {
            let status = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(status.success(), "chown to the postgres user failed");
        }
        let cluster = Cluster {
            bin: bin.to_owned(),
            dir,
            port: free_port(),
        };
        let pgdata = cluster.pgdata();
        let initdb = cluster.as_postgres(&[
            cluster.bin.join("initdb").to_str().unwrap(),
            "-D",
            &pgdata,
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
        ]);
        assert_success(&initdb);
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=off",
            cluster.port,
            cluster.dir.path().display()
        );
        let log = cluster.dir.path().join("server.log");
        let started = cluster.as_postgres(&[
            cluster.bin.join("pg_ctl").to_str().unwrap(),
            "-D",
            &pgdata,
            "-l",
            log.to_str().unwrap(),
            "-w",
            "-o",
            &options,
            "start",
        ]);
        assert_success(&started);
        cluster
    }

    fn pgdata(&self) -> String {
        self.dir.path().join("pg").to_str().unwrap().to_owned()
    }

    /// Runs `args` as the `postgres` user when this process is root
    /// (initdb refuses root), else as this user.
    fn as_postgres(&self, args: &[&str]) -> Output {
        if !is_root() {
            return Command::new(args[0]).args(&args[1..]).output().unwrap();
        }
        let quoted: Vec<String> = args
            .iter()
            .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
            .collect();
        Command::new("su")
            .args(["postgres", "-s", "/bin/sh", "-c", &quoted.join(" ")])
            .output()
            .unwrap()
    }

    /// Creates database `name` and returns its URL.
    async fn create_database(&self, name: &str) -> String {
        let base = format!("postgres://postgres@127.0.0.1:{}", self.port);
        let mut conn = PgConnection::connect(&format!("{base}/postgres"))
            .await
            .unwrap();
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
        format!("{base}/{name}")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let pgdata = self.pgdata();
        let pg_ctl = self.bin.join("pg_ctl");
        let _ = self.as_postgres(&[
            pg_ctl.to_str().unwrap(),
            "-D",
            &pgdata,
            "-m",
            "immediate",
            "stop",
        ]);
    }
}

fn is_root() -> bool {
    let id = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&id.stdout).trim() == "0"
}

fn assert_success(output: &Output) {
    assert!(
        output.status.success(),
        "{}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The environment every `agon` run of the test shares: the database, the
/// data directory (and so the seal key), the token and roomy limits.
fn agon_command(url: &str, data: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agon"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("DATABASE_URL", url)
        .env("SERVICE_DATA_DIR", data)
        .env("SERVICE_API_TOKEN", TEST_TOKEN)
        .env("SERVICE_SEAL_INTERVAL_SECONDS", "3600")
        .env("SERVICE_LOG_LEVEL", "WARN")
        .env("SERVICE_RATE_LIMIT_DEBATE_CREATE", "1000000")
        .envs(crate::auth::ROOMY);
    command
}

/// `agon <args>` on `url`, to completion.
fn agon(url: &str, data: &Path, args: &[&str]) -> Output {
    agon_command(url, data).args(args).output().unwrap()
}

/// `agon verify --json`, asserting exit 0 and an intact log.
fn verify(url: &str, data: &Path) -> Value {
    let output = agon(url, data, &["verify", "--json"]);
    assert_success(&output);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["problem"], Value::Null, "{report}");
    report
}

/// `agon serve` on `url`, stopped by SIGTERM.
struct Service {
    base: String,
    child: tokio::process::Child,
}

impl Service {
    async fn start(url: &str, data: &Path) -> Self {
        let port = free_port();
        let mut command = tokio::process::Command::from(agon_command(url, data));
        let mut child = command
            .args(["serve", "--host", "127.0.0.1"])
            .args(["--api-port", &port.to_string()])
            .args(["--ws-port", &free_port().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        listening(port, || {
            child.try_wait().unwrap().map(|status| status.to_string())
        })
        .await;
        Service {
            base: format!("http://127.0.0.1:{port}"),
            child,
        }
    }

    /// SIGTERM, then waits for a clean exit (the service seals on the way out).
    async fn stop(mut self) {
        let pid = self.child.id().unwrap().to_string();
        let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(killed.success());
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("agon serve did not stop within 30 s")
            .unwrap();
        assert!(status.success(), "agon serve exited with {status}");
    }
}

/// A caller of the service with the static token.
struct Api {
    base: String,
}

impl Api {
    fn new(base: &str) -> Self {
        Api {
            base: base.to_owned(),
        }
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        call(Method::GET, &url, Some(TEST_TOKEN), None).await
    }

    /// A one-round demo debate on `topic`; asserts 201 and returns its id.
    async fn demo(&self, topic: &str) -> String {
        let body = json!({"topic": topic, "agents": ["demo-a", "demo-b", "demo-c"], "rounds": 1});
        let url = format!("{}/api/debates", self.base);
        let (status, created) = call(Method::POST, &url, Some(TEST_TOKEN), Some(body)).await;
        assert_eq!(status, 201, "{created}");
        created["id"].as_str().unwrap().to_owned()
    }

    /// Polls `path` until `done` holds for its 200 body (20 s at most).
    async fn until(&self, path: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (status, body) = self.get(path).await;
            if status == 200 && done(&body) {
                return body;
            }
            assert!(
                Instant::now() < deadline,
                "{path} never got there: {status} {body}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The detail of debate `id` once finished; asserts it completed.
    async fn finished(&self, id: &str) -> Value {
        let path = format!("/api/debates/{id}");
        let done = |d: &Value| matches!(d["status"].as_str(), Some("completed" | "failed"));
        let detail = self.until(&path, done).await;
        assert_eq!(detail["status"], "completed", "{detail}");
        detail
    }
}
