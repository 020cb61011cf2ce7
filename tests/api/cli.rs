//! The `agon` binary: verify, seal, replay, keys, and clear start-up errors.

use std::process::{Command, Output};

use crate::support::{Kind, TestStore, on_both_backends};
use crate::tamper::{FLIP_PAYLOAD_BYTE, exec, sealed_store};

on_both_backends! {
    verify_exits_zero_when_intact_and_names_the_break => verify_exits_zero_when_intact_and_names_the_break;
    seal_and_replay_commands_work => seal_and_replay_commands_work;
}

pub fn agon(store: &TestStore, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agon"));
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    command.env("SERVICE_DATA_DIR", store.dir.path());
    if let Some(url) = &store.database_url {
        command.env("DATABASE_URL", url);
    }
    command.output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

async fn verify_exits_zero_when_intact_and_names_the_break(kind: Kind) {
    let (store, key) = sealed_store(kind).await;
    let public = agon(&store, &["keys", "public"]);
    assert!(public.status.success());
    assert_eq!(stdout(&public).trim(), key.public_hex());

    let intact = agon(&store, &["verify"]);
    assert_eq!(intact.status.code(), Some(0), "{}", stdout(&intact));
    assert!(stdout(&intact).starts_with("intact: 17 events in 4 streams, 1 seals"));

    exec(&store.log, FLIP_PAYLOAD_BYTE).await;
    let broken = agon(&store, &["verify"]);
    assert_eq!(broken.status.code(), Some(1));
    let text = stdout(&broken);
    assert!(
        text.contains("event tally/s2 sequence 3 (position"),
        "{text}"
    );
    assert!(text.contains("hash does not match"), "{text}");

    let json = agon(&store, &["verify", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["problem"]["kind"], "event");
    assert_eq!(report["problem"]["aggregate_id"], "s2");
    assert_eq!(report["problem"]["sequence"], 3);
}

async fn seal_and_replay_commands_work(kind: Kind) {
    let (store, _key) = sealed_store(kind).await;
    let sealed = agon(&store, &["seal"]);
    assert!(sealed.status.success());
    assert_eq!(stdout(&sealed).trim(), "seal 2 covers 2 events");
    assert_eq!(stdout(&agon(&store, &["seal"])).trim(), "nothing to seal");

    let replay = agon(&store, &["replay", "--projection", "admin_stats"]);
    assert!(replay.status.success());
    assert_eq!(
        stdout(&replay).trim(),
        "admin_stats: rebuilt from 17 events"
    );
    let all = agon(&store, &["replay"]);
    assert!(all.status.success() && stdout(&all).contains("admin_stats"));
    let unknown = agon(&store, &["replay", "--projection", "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("unknown projection \"nope\""));
}

fn one_line_error(output: &Output) -> String {
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("agon: ")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    lines[0].to_owned()
}

fn run_with(env: &[(&str, &str)], args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_agon"));
    command
        .args(args)
        .env_clear()
        .env("SERVICE_DATA_DIR", dir.path());
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().unwrap()
}

#[test]
fn bad_configuration_is_one_clear_line() {
    let key = one_line_error(&run_with(
        &[("SERVICE_SIGNING_KEY", "not-hex")],
        &["keys", "public"],
    ));
    assert!(
        key.contains("SERVICE_SIGNING_KEY must be 64 hexadecimal characters"),
        "{key}"
    );

    let port = crate::support::free_port();
    let url = format!("postgres://nobody@127.0.0.1:{port}/none");
    let db = one_line_error(&run_with(&[("DATABASE_URL", &url)], &["verify"]));
    assert!(db.starts_with("agon: cannot open the event store:"), "{db}");

    let level = one_line_error(&run_with(&[("SERVICE_LOG_LEVEL", "LOUD")], &["verify"]));
    assert!(level.contains("SERVICE_LOG_LEVEL"), "{level}");

    let bad_url = one_line_error(&run_with(&[("DATABASE_URL", "mysql://x")], &["verify"]));
    assert!(
        bad_url.starts_with("agon: cannot open the event store:"),
        "{bad_url}"
    );
}

/// `keys public` prints the key the service generated, or the configured
/// one; it never makes one up (the service does, at its first start).
#[test]
fn signing_key_is_shown_not_generated_and_configurable() {
    let dir = tempfile::tempdir().unwrap();
    let output = |env: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_agon"));
        command
            .args(["keys", "public"])
            .env_clear()
            .env("SERVICE_DATA_DIR", dir.path());
        for (k, v) in env {
            command.env(k, v);
        }
        command.output().unwrap()
    };
    let run = |env: &[(&str, &str)]| {
        let output = output(env);
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    let none = one_line_error(&output(&[]));
    assert!(none.contains("no seal key"), "{none}");
    assert!(!dir.path().join(agon::crypto::signing::KEY_FILE).exists());
    let key = agon::crypto::signing::SealKey::load_or_create(None, dir.path()).unwrap();
    let generated = run(&[]);
    assert_eq!(generated, key.public_hex());
    assert_eq!(run(&[]), generated);
    let seed = "01".repeat(32);
    let configured = run(&[("SERVICE_SIGNING_KEY", &seed)]);
    assert_ne!(configured, generated);
    assert_eq!(configured.len(), 64);
}

/// CHAIN.md is precise enough for an outside verifier: its Python companion
/// accepts an intact log and names a tampered event.
#[tokio::test]
async fn the_documented_python_verifier_agrees() {
    let (store, key) = sealed_store(Kind::Sqlite).await;
    store.log.seal_now(&key).await.unwrap().unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/event-schemas/verify_export.py"
    );
    let db = store.dir.path().join("agon.db");
    let run = || {
        Command::new("python3")
            .arg(script)
            .arg(&db)
            .arg(key.public_hex())
            .output()
            .unwrap()
    };
    let intact = run();
    assert!(intact.status.success(), "{intact:?}");
    assert_eq!(stdout(&intact).trim(), "intact: 4 streams");

    exec(&store.log, FLIP_PAYLOAD_BYTE).await;
    let broken = run();
    assert_eq!(broken.status.code(), Some(1));
    assert_eq!(
        stdout(&broken).trim(),
        "BROKEN: event tally/s2 sequence 3: hash mismatch"
    );
}

/// `agon debate` runs a demo debate on a local store, printing the §2.1
/// consensus as JSON and its progress on stderr, with the agents' text as
/// it streams (locally and from a service's `/ws`); a service that refuses the
/// credential makes it fail. (Its success against a service:
/// `debates::cli_runs_a_debate_on_a_server`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn debate_command_runs_a_demo_debate() {
    async fn debate(args: &[&str]) -> Output {
        let dir = tempfile::tempdir().unwrap();
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agon"));
        command
            .args(["debate", "Local topic", "--agents", "demo-a,demo-b,demo-c"])
            .args(["--rounds", "1", "--json"])
            .args(args)
            .env_clear()
            .env("SERVICE_DATA_DIR", dir.path())
            .kill_on_drop(true);
        let run = tokio::time::timeout(std::time::Duration::from_secs(60), command.output());
        run.await.expect("agon debate never ended").unwrap()
    }

    let local = debate(&[]).await;
    assert!(local.status.success(), "{local:?}");
    let consensus: serde_json::Value = serde_json::from_slice(&local.stdout).unwrap();
    crate::debates::assert_consensus_body(&consensus, 3);
    let stderr = String::from_utf8_lossy(&local.stderr);
    let progress: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("round 1 · "))
        .collect();
    assert_eq!(progress.len(), 9, "three phases by three agents: {stderr}");
    for word in [
        "opening", "critique", "revision", "demo-a", "demo-b", "demo-c",
    ] {
        assert!(
            progress.iter().any(|l| l.contains(word)),
            "{word}: {stderr}"
        );
    }
    assert!(stderr.contains("[completed]"), "{stderr}");
    // The text as the agents write it, before each contribution's line.
    for agent in ["demo-a", "demo-b", "demo-c"] {
        let streamed = format!("  {agent} (round 1, opening) › ");
        assert!(stderr.contains(&streamed), "{streamed}: {stderr}");
    }

    let app = crate::serve::spawn_with(Kind::Sqlite, &[]).await;
    let followed = debate(&["--server", &app.base, "--token", crate::support::TEST_TOKEN]).await;
    assert!(followed.status.success(), "{followed:?}");
    let stderr = String::from_utf8_lossy(&followed.stderr);
    assert!(
        stderr.contains("  demo-b (round 1, critique) › "),
        "the text streamed from the server's /ws: {stderr}"
    );
    let refused = debate(&["--server", &app.base, "--token", "not-a-token"]).await;
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("refused") && stderr.contains("401"),
        "{stderr}"
    );
    app.stop.cancel();
}

/// `agon debate` on the local store seals what it wrote: `agon verify`
/// right after it finds every event sealed, on either back end.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_debate_seals_what_it_wrote() {
    for kind in [Kind::Sqlite, Kind::Postgres] {
        let dir = tempfile::tempdir().unwrap();
        let database = match kind {
            Kind::Sqlite => None,
            Kind::Postgres => Some(crate::support::fresh_postgres_database().await),
        };
        let run = |args: &[&str]| {
            let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agon"));
            command
                .args(args)
                .env_clear()
                .env("SERVICE_DATA_DIR", dir.path())
                .kill_on_drop(true);
            if let Some(url) = &database {
                command.env("DATABASE_URL", url);
            }
            let output = command.output();
            async move {
                tokio::time::timeout(std::time::Duration::from_secs(60), output)
                    .await
                    .expect("agon never ended")
                    .unwrap()
            }
        };
        let debate = run(&["debate", "Sealed topic", "--rounds", "1", "--json"]).await;
        assert!(debate.status.success(), "{kind:?}: {debate:?}");
        let stderr = String::from_utf8_lossy(&debate.stderr);
        assert!(stderr.contains("seal 1 covers "), "{kind:?}: {stderr}");

        let verify = run(&["verify", "--json"]).await;
        assert!(verify.status.success(), "{kind:?}: {verify:?}");
        let report: serde_json::Value = serde_json::from_slice(&verify.stdout).unwrap();
        assert_eq!(report["unsealed_events"], 0, "{kind:?}: {report}");
        assert_eq!(report["seals_checked"], 1, "{kind:?}: {report}");
        assert!(report["events_checked"].as_u64().unwrap() > 0, "{report}");
    }
}

/// Configuration warnings (here a deprecated variable name) are the
/// service's: `agon serve` logs them, the other commands do not.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_serve_prints_configuration_warnings() {
    use tokio::io::AsyncBufReadExt;

    let deprecated = ("SERVICE_REQUIRE_DISTRIBUTED_STATE", "false");
    let warning = "SERVICE_REQUIRE_DISTRIBUTED_STATE is deprecated";
    let replay = run_with(&[deprecated], &["replay", "--projection", "admin_stats"]);
    assert!(replay.status.success(), "{replay:?}");
    let stderr = String::from_utf8_lossy(&replay.stderr);
    assert!(!stderr.contains(warning), "{stderr}");

    let dir = tempfile::tempdir().unwrap();
    let port = crate::support::free_port().to_string();
    let ws_port = crate::support::free_port().to_string();
    let mut serve = tokio::process::Command::new(env!("CARGO_BIN_EXE_agon"))
        .args(["serve", "--host", "127.0.0.1", "--api-port", &port])
        .args(["--ws-port", &ws_port])
        .env_clear()
        .env("SERVICE_DATA_DIR", dir.path())
        .env(deprecated.0, deprecated.1)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(serve.stderr.take().unwrap()).lines();
    let found = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains(warning) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "agon serve did not log the warning");
    serve.kill().await.unwrap();
}
