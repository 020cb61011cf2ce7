//! Verification by an outside party, through the real binary: no store is
//! made up for a missing one, a published key catches a re-signed log, a
//! saved seal catches a cut-off tail; and the service seals what it wrote
//! at start and at SIGTERM.

use std::process::Output;
use std::time::Duration;

use agon::crypto::signing::{KEY_FILE, SealKey};
use agon::store::canonical;
use serde_json::Value;

use crate::cli::agon;
use crate::support::binary::Serve;
use crate::support::{
    Kind, TestStore, fill_stream, fresh, fresh_postgres_database, on_both_backends, settled_feed,
};
use crate::tamper::{exec, sealed_store};

on_both_backends! {
    a_missing_store_is_refused_and_nothing_is_created => a_missing_store_is_refused_and_nothing_is_created;
    a_log_resigned_with_another_key_fails_against_the_published_key => a_log_resigned_with_another_key_fails_against_the_published_key;
    a_cut_off_tail_fails_against_a_saved_seal => a_cut_off_tail_fails_against_a_saved_seal;
    the_service_seals_at_start_and_at_sigterm => the_service_seals_at_start_and_at_sigterm;
    keys_outside_the_bmp_sort_by_utf16_code_units => keys_outside_the_bmp_sort_by_utf16_code_units;
    a_name_sorts_before_the_names_it_prefixes => a_name_sorts_before_the_names_it_prefixes;
}

/// The outside verifier.
const VERIFY_EXPORT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/event-schemas/verify_export.py"
);

/// The outside verifier on the store's SQLite file, with `args` after it.
fn python_verifier(store: &TestStore, args: &[&str]) -> Output {
    std::process::Command::new("python3")
        .arg(VERIFY_EXPORT)
        .arg(store.dir.path().join("agon.db"))
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn assert_exit(output: &Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        text(&output.stdout),
        text(&output.stderr)
    );
}

async fn a_missing_store_is_refused_and_nothing_is_created(kind: Kind) {
    let database_url = match kind {
        Kind::Sqlite => None,
        Kind::Postgres => Some(fresh_postgres_database().await),
    };
    let root = tempfile::tempdir().unwrap();
    let public = "ab".repeat(32);
    // A mistyped directory, and an existing one holding neither store nor key.
    for target in [root.path().join("typo"), root.path().to_owned()] {
        let run = |args: &[&str]| {
            let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_agon"));
            command
                .args(args)
                .env_clear()
                .env("SERVICE_DATA_DIR", &target);
            if let Some(url) = &database_url {
                command.env("DATABASE_URL", url);
            }
            command.output().unwrap()
        };
        for args in [
            &["verify"][..],
            &["verify", "--public-key", &public],
            &["seal"],
            &["seal", "--json"],
            &["keys", "public"],
        ] {
            let output = run(args);
            assert_exit(&output, 2);
            let stderr = text(&output.stderr);
            let expected = match (kind, args[0]) {
                (_, "keys") => "no seal key",
                (Kind::Sqlite, _) => "no event store at",
                (Kind::Postgres, _) => "holds no event log",
            };
            assert!(stderr.contains(expected), "{args:?}: {stderr}");
            assert!(!target.join("agon.db").exists(), "{args:?} made a store");
            assert!(!target.join(KEY_FILE).exists(), "{args:?} made a key");
        }
        assert!(
            target == root.path() || !target.exists(),
            "the data directory was created"
        );
    }
    if let Some(url) = &database_url {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        let tables: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema()",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(tables, 0, "tables were made");
    }
}

async fn a_log_resigned_with_another_key_fails_against_the_published_key(kind: Kind) {
    let (store, key) = sealed_store(kind).await;
    let published = key.public_hex();
    let intact = agon(
        &store,
        &["verify", "--public-key", &published.to_uppercase()],
    );
    assert_exit(&intact, 0);

    // Someone who can write the data directory and the database cuts a
    // stream's last event, drops the seals and re-signs with a key of their own.
    exec(
        &store.log,
        "DELETE FROM events WHERE aggregate_id = 's3' AND sequence = 5",
    )
    .await;
    exec(&store.log, "DELETE FROM seals").await;
    std::fs::remove_file(store.dir.path().join(KEY_FILE)).unwrap();
    let forged = SealKey::load_or_create(None, store.dir.path()).unwrap();
    store.log.seal_now(&forged).await.unwrap().unwrap();

    let fooled = agon(&store, &["verify"]);
    assert_exit(&fooled, 0);
    let caught = agon(&store, &["verify", "--public-key", &published]);
    assert_exit(&caught, 1);
    let report = text(&caught.stdout);
    assert!(
        report.contains(&format!(
            "seal 1: signed by key {} which is not the trusted key {published}",
            forged.public_hex()
        )),
        "{report}"
    );

    // Without a key file, the published key still works and its absence
    // is named rather than reported as a broken seal.
    std::fs::remove_file(store.dir.path().join(KEY_FILE)).unwrap();
    assert_exit(&agon(&store, &["verify", "--public-key", &published]), 1);
    let keyless = agon(&store, &["verify"]);
    assert_exit(&keyless, 2);
    assert!(text(&keyless.stderr).contains("no seal key"), "{keyless:?}");
    assert!(!store.dir.path().join(KEY_FILE).exists());
}

async fn a_cut_off_tail_fails_against_a_saved_seal(kind: Kind) {
    let (store, key) = sealed_store(kind).await;
    let saved_output = agon(&store, &["seal", "--json"]);
    assert_exit(&saved_output, 0);
    let saved: serde_json::Value = serde_json::from_slice(&saved_output.stdout).unwrap();
    assert_eq!(saved["body"]["seal_number"], 2);
    assert_eq!(saved["body"]["event_count"], 2);
    let file = store.dir.path().join("saved-seal.json");
    std::fs::write(&file, &saved_output.stdout).unwrap();
    let file = file.to_str().unwrap();
    let public = key.public_hex();
    let expect = |store: &TestStore| {
        agon(
            store,
            &["verify", "--public-key", &public, "--expect-seal", file],
        )
    };

    let found = expect(&store);
    assert_exit(&found, 0);
    assert!(
        text(&found.stdout).contains("saved seal 2 is in the log as saved, followed by 0 later"),
        "{found:?}"
    );
    // Later seals extend it.
    fill_stream(&store.log, "tally", "s5", 1).await;
    settled_feed(&store.log, 18).await;
    store.log.seal_now(&key).await.unwrap().unwrap();
    assert!(text(&expect(&store).stdout).contains("followed by 1 later seals"));
    exec(&store.log, "DELETE FROM seals WHERE seal_number = 3").await;
    exec(&store.log, "DELETE FROM events WHERE aggregate_id = 's5'").await;

    // The newest events go, together with the seal over them: the log is
    // consistent and shorter, and only the saved seal shows it.
    exec(&store.log, "DELETE FROM seals WHERE seal_number = 2").await;
    exec(
        &store.log,
        "DELETE FROM events WHERE aggregate_id = 's4' AND sequence = 2",
    )
    .await;
    assert_exit(&agon(&store, &["verify", "--public-key", &public]), 0);
    let missing = expect(&store);
    assert_exit(&missing, 1);
    let report = text(&missing.stdout);
    assert!(
        report.starts_with("BROKEN: seal 2: the saved seal is missing: the log ends at seal 1"),
        "{report}"
    );

    // Re-sealed by someone holding the key: seal 2 is back, over less.
    store.log.seal_now(&key).await.unwrap().unwrap();
    let differs = expect(&store);
    assert_exit(&differs, 1);
    assert!(
        text(&differs.stdout).contains("seal 2: differs from the saved seal in event_count"),
        "{differs:?}"
    );

    if kind == Kind::Sqlite {
        let python = python_verifier(&store, &[&public, "--expect-seal", file]);
        assert_exit(&python, 1);
        assert_eq!(
            text(&python.stdout).trim(),
            "BROKEN: seal 2: differs from the saved seal"
        );
    }

    std::fs::write(store.dir.path().join("bad.json"), b"{\"body\": 1}").unwrap();
    let bad = agon(
        &store,
        &[
            "verify",
            "--expect-seal",
            store.dir.path().join("bad.json").to_str().unwrap(),
        ],
    );
    assert_exit(&bad, 2);
    assert!(text(&bad.stderr).contains("is not a saved seal"), "{bad:?}");
}

async fn the_service_seals_at_start_and_at_sigterm(kind: Kind) {
    let store = fresh(kind).await;
    fill_stream(&store.log, "tally", "before", 5).await;
    settled_feed(&store.log, 5).await;

    let served = Serve::on_free_ports()
        .loopback()
        .data_dir(store.dir.path())
        .env("SERVICE_API_TOKEN", crate::support::TEST_TOKEN)
        .env("SERVICE_SEAL_INTERVAL_SECONDS", "3600")
        .envs(store.database_url.iter().map(|url| ("DATABASE_URL", url)))
        .stderr(std::process::Stdio::piped())
        .start()
        .await;

    // Well inside the hour-long interval, the events of an earlier run are sealed.
    let mut report = serde_json::Value::Null;
    for _ in 0..100 {
        report = serde_json::from_slice(&agon(&store, &["verify", "--json"]).stdout).unwrap();
        if report["seals_checked"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(report["seals_checked"], 1, "no seal at start: {report}");
    assert_eq!(report["unsealed_events"], 0, "{report}");

    fill_stream(&store.log, "tally", "during", 3).await;
    settled_feed(&store.log, 8).await;
    let output = served.stop(Duration::from_secs(30)).await;
    assert!(output.status.success(), "exit after SIGTERM: {output:?}");

    let after: serde_json::Value =
        serde_json::from_slice(&agon(&store, &["verify", "--json"]).stdout).unwrap();
    assert_eq!(after["problem"], serde_json::Value::Null, "{after}");
    assert_eq!(after["events_checked"], 8, "{after}");
    assert_eq!(
        after["unsealed_events"], 0,
        "SIGTERM left events unsealed: {after}"
    );
    assert_eq!(after["seals_checked"], 2, "{after}");
}

/// RFC 8785 orders `demo-\u{1F600}` (UTF-16 0xD83D 0xDE00) before
/// `demo-\u{FB01}` (0xFB01), though its code point is the larger: the stored
/// `weights` follow UTF-16, and both verifiers find every text canonical.
async fn keys_outside_the_bmp_sort_by_utf16_code_units(kind: Kind) {
    weights_in_order(
        kind,
        "demo-\u{FB01},demo-\u{1F600},demo-a",
        &["demo-a", "demo-\u{1F600}", "demo-\u{FB01}"],
    )
    .await;
}

/// A name comes before every longer name it begins: `demo-gpt` before
/// `demo-gpt 4` and `demo-a` before `demo-a!`, where ordering escaped UTF-8
/// bytes with the closing quote (the former serializer) put them the other
/// way round.
async fn a_name_sorts_before_the_names_it_prefixes(kind: Kind) {
    weights_in_order(
        kind,
        "demo-gpt 4,demo-gpt,demo-a!,demo-a",
        &["demo-a", "demo-a!", "demo-gpt", "demo-gpt 4"],
    )
    .await;
}

/// Runs a weighted debate of `agents` through the binary and checks that the
/// stored `weights` hold `order`, exactly in RFC 8785 form, and that both
/// verifiers find the log intact and every stored text canonical.
async fn weights_in_order(kind: Kind, agents: &str, order: &[&str]) {
    let store = fresh(kind).await;
    let key = SealKey::load_or_create(None, store.dir.path()).unwrap();
    let debate = agon(
        &store,
        &[
            "debate",
            "Names in canonical order",
            "--agents",
            agents,
            "--rounds",
            "1",
            "--consensus",
            "weighted",
            "--json",
        ],
    );
    assert_exit(&debate, 0);
    let sql = "SELECT payload FROM events WHERE event_type = 'ConsensusComputed'";
    let payload: String = match store.log.db() {
        agon::store::Db::Sqlite { reader, .. } => {
            sqlx::query_scalar(sql).fetch_one(reader).await.unwrap()
        }
        agon::store::Db::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await.unwrap(),
    };
    let parsed = canonical::check(payload.as_bytes()).unwrap();
    let weights = find_member(&parsed, "weights").unwrap();
    let expected = order
        .iter()
        .map(|name| format!("{}:{}", Value::from(*name), weights[*name]))
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(canonical::to_string(weights), format!("{{{expected}}}"));
    assert!(
        payload.contains(&format!("\"weights\":{{{expected}}}")),
        "{payload}"
    );

    let verified = agon(&store, &["verify", "--public-key", &key.public_hex()]);
    assert_exit(&verified, 0);
    if kind == Kind::Sqlite {
        let python = python_verifier(&store, &[&key.public_hex()]);
        assert_exit(&python, 0);
        assert_eq!(
            text(&python.stdout).trim(),
            "intact: 1 streams",
            "{python:?}"
        );
    }
}

/// The first member named `name` anywhere in `value`, depth first.
fn find_member<'a>(value: &'a Value, name: &str) -> Option<&'a Value> {
    match value {
        Value::Object(members) => members
            .get(name)
            .or_else(|| members.values().find_map(|v| find_member(v, name))),
        Value::Array(items) => items.iter().find_map(|v| find_member(v, name)),
        _ => None,
    }
}

/// The outside verifier's canonical form is RFC 8785's, byte for byte the
/// service's: the RFC's sorting example, sample object and Appendix B
/// numbers, names that prefix others, and strings with every kind of escape;
/// and it refuses, as [`canonical::check`] does, a member name given twice.
#[test]
fn the_python_verifier_canonicalizes_as_rfc_8785_does() {
    let mut inputs: Vec<String> = [
        r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}"#,
        r#"{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}"#,
        r#"{"gpt 4":0.5,"gpt":0.25,"a!":2,"a":1,"a\n":3,"demo-\ufb01":1,"demo-\ud83d\ude00":2}"#,
        r#"["\u0000\u0001\u001f\b\t\n\f\r\u007f\u2028\u00e9/", -0, 1.0, 9007199254740993]"#,
    ]
    .map(str::to_owned)
    .to_vec();
    // RFC 8785 Appendix B, as the IEEE 754 bit patterns printed there.
    for bits in [
        0x0000000000000001_u64,
        0x8000000000000001,
        0x7fefffffffffffff,
        0x4340000000000000,
        0x4430000000000000,
        0x44b52d02c7e14af5,
        0x44b52d02c7e14af6,
        0x44b52d02c7e14af7,
        0x444b1ae4d6e2ef4e,
        0x444b1ae4d6e2ef50,
        0x3eb0c6f7a0b5ed8d,
        0x3eb0c6f7a0b5ed8e,
        0x41b3de4355555553,
        0x41b3de4355555554,
        0x41b3de4355555557,
        0xbecbf647612f3696,
        0x43143ff3c1cb0959,
        0x3e7ad7f29abcaf48,
    ] {
        inputs.push(format!("{:e}", f64::from_bits(bits)));
    }
    let expected: Vec<String> = inputs
        .iter()
        .map(|input| canonical::to_string(&serde_json::from_str(input).unwrap()))
        .collect();
    assert_eq!(
        expected[..4],
        [
            "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\"\u{1F600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}",
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#,
            "{\"a\":1,\"a\\n\":3,\"a!\":2,\"demo-\u{1F600}\":2,\"demo-\u{fb01}\":1,\"gpt\":0.25,\"gpt 4\":0.5}",
            "[\"\\u0000\\u0001\\u001f\\b\\t\\n\\f\\r\u{7f}\u{2028}\u{e9}/\",0,1,9007199254740993]",
        ]
    );
    let script = "import json, sys; sys.path.insert(0, sys.argv[1]); import verify_export as v\n\
        texts = json.load(sys.stdin)\n\
        print(json.dumps([v.canonical(v.strict(t)) for t in texts[:-2]] + [v.is_canonical(c) for c in texts[-2:]]))";
    let duplicate = r#"{"a":1,"a":1}"#.to_owned();
    let mut sent = inputs.clone();
    sent.extend([expected[1].clone(), duplicate.clone()]);
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(std::path::Path::new(VERIFY_EXPORT).parent().unwrap())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    serde_json::to_writer(child.stdin.take().unwrap(), &sent).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_exit(&output, 0);
    let answers: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    let canonical_texts: Vec<&str> = answers[..inputs.len()]
        .iter()
        .map(|answer| answer.as_str().unwrap())
        .collect();
    assert_eq!(canonical_texts, expected);
    assert_eq!(
        answers[answers.len() - 2..],
        [Value::Bool(true), Value::Bool(false)]
    );
    assert!(canonical::check(duplicate.as_bytes()).is_err());
}

/// The outside verifier explains itself instead of opening a database
/// named `--help`, and refuses a file that is not a log.
#[test]
fn the_python_verifier_prints_help() {
    let cwd = tempfile::tempdir().unwrap();
    let script = VERIFY_EXPORT;
    let help = std::process::Command::new("python3")
        .args([script, "--help"])
        .current_dir(cwd.path())
        .output()
        .unwrap();
    assert_exit(&help, 0);
    let usage = text(&help.stdout);
    assert!(usage.starts_with("usage: verify_export.py"), "{usage}");
    assert!(usage.contains("--expect-seal FILE"), "{usage}");
    assert!(!cwd.path().join("--help").exists());
    let missing = std::process::Command::new("python3")
        .args([script, "absent.db"])
        .current_dir(cwd.path())
        .output()
        .unwrap();
    assert_exit(&missing, 2);
    assert!(!cwd.path().join("absent.db").exists());
}
