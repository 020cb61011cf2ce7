//! Every tamper case is named alike by the three faces of the one verifier:
//! the store's check, `POST /api/audit/verify` of a service running on the
//! tampered store, and `agon verify --json` on it; each names the failing
//! check's code, the event or seal, and the same sentence.

use agon::crypto::signing::SealKey;
use reqwest::Method;
use serde_json::{Value, json};

use crate::cli::agon;
use crate::serve::{build_app_on, serve_app};
use crate::support::accounts::call;
use crate::support::{Kind, TEST_TOKEN, TestStore, on_both_backends};
use crate::tamper::{FLIP_PAYLOAD_BYTE, blob_literal, exec, sealed_store};

on_both_backends! {
    the_api_the_cli_and_the_store_agree_on_every_tamper_case => the_api_the_cli_and_the_store_agree_on_every_tamper_case;
}

/// A tamper case: its name, the SQL, and the check it must fail.
struct Case {
    name: &'static str,
    sql: fn(Kind) -> String,
    check: &'static str,
    /// `event <stream>/<sequence>` or `seal <n>`.
    at: &'static str,
}

const CASES: [Case; 7] = [
    Case {
        name: "a payload byte",
        sql: |_| FLIP_PAYLOAD_BYTE.to_owned(),
        check: "event_hash",
        at: "event s2/3",
    },
    Case {
        name: "a deleted event",
        sql: |_| "DELETE FROM events WHERE aggregate_id = 's1' AND sequence = 2".to_owned(),
        check: "sequence_gap",
        at: "event s1/3",
    },
    Case {
        name: "a broken link",
        sql: |kind| {
            format!(
                "UPDATE events SET prev_hash = {} WHERE aggregate_id = 's2' AND sequence = 4",
                blob_literal(kind, &[7; 32])
            )
        },
        check: "prev_hash",
        at: "event s2/4",
    },
    Case {
        name: "an altered seal body",
        sql: |_| {
            "UPDATE seals SET body = replace(body, '\"event_count\":15', '\"event_count\":14')"
                .to_owned()
        },
        check: "seal_hash",
        at: "seal 1",
    },
    Case {
        name: "a forged signature",
        sql: |kind| {
            format!(
                "UPDATE seals SET signature = {} WHERE seal_number = 2",
                blob_literal(kind, &[9; 64])
            )
        },
        check: "seal_signature",
        at: "seal 2",
    },
    Case {
        name: "a cut stream tail",
        sql: |_| "DELETE FROM events WHERE aggregate_id = 's3' AND sequence = 5".to_owned(),
        check: "seal_event_count",
        at: "seal 1",
    },
    Case {
        name: "a cut tail in the newest seal",
        sql: |_| "DELETE FROM events WHERE aggregate_id = 's4' AND sequence = 2".to_owned(),
        check: "seal_event_count",
        at: "seal 2",
    },
];

/// `(check, where, fault)` of a problem in the store's, the CLI's or the API's form.
fn located(problem: &Value) -> (String, String, String) {
    let at = match problem["kind"].as_str() {
        Some("event") => format!(
            "event {}/{}",
            problem["aggregate_id"].as_str().unwrap(),
            problem["sequence"]
        ),
        Some("seal") => format!("seal {}", problem["seal_number"]),
        other => panic!("no problem kind: {other:?} in {problem}"),
    };
    (
        problem["check"].as_str().unwrap().to_owned(),
        at,
        problem["fault"].as_str().unwrap().to_owned(),
    )
}

async fn the_api_the_cli_and_the_store_agree_on_every_tamper_case(kind: Kind) {
    for case in &CASES {
        let (store, key) = sealed_store(kind).await;
        // The service seals the two unsealed events (seal 2) when it starts.
        let data_dir = store.dir.path().to_str().unwrap().to_owned();
        let (app, dir) = build_app_on(
            store.database_url.clone(),
            &[("SERVICE_DATA_DIR", data_dir.as_str())],
        )
        .await;
        let served = serve_app(app, dir).await;
        let base = served.base.clone();
        wait_for_seal(&base, 2).await;

        let intact = api_verify(&base).await;
        assert_eq!(
            intact["valid"], true,
            "{}: before tampering: {intact}",
            case.name
        );
        exec(&store.log, &(case.sql)(kind)).await;

        let from_store = store_problem(&store, &key).await;
        let from_api = api_verify(&base).await;
        assert_eq!(from_api["valid"], false, "{}: {from_api}", case.name);
        let from_cli = cli_problem(&store);
        let expected = (case.check.to_owned(), case.at.to_owned());
        for (face, problem) in [
            ("store", &from_store),
            ("api", &from_api["problem"]),
            ("cli", &from_cli),
        ] {
            let (check, at, fault) = located(problem);
            assert_eq!((check, at), expected, "{}: {face}: {problem}", case.name);
            assert_eq!(fault, located(&from_store).2, "{}: {face}", case.name);
        }
        served.stop.cancel();
    }
}

async fn store_problem(store: &TestStore, key: &SealKey) -> Value {
    let report = store.log.verify(&key.public_hex()).await.unwrap();
    serde_json::to_value(report.problem.expect("the store's check should fail")).unwrap()
}

fn cli_problem(store: &TestStore) -> Value {
    let output = agon(store, &["verify", "--json"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    report["problem"].clone()
}

async fn api_verify(base: &str) -> Value {
    let url = format!("{base}/api/audit/verify");
    let (status, body) = call(Method::POST, &url, Some(TEST_TOKEN), Some(json!({}))).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// Waits until the published head is seal `number`.
pub async fn wait_for_seal(base: &str, number: i64) {
    super::eventually("the seal", async || {
        let url = format!("{base}/api/audit/head");
        let (_, head) = call(Method::GET, &url, None, None).await;
        head["seal"]["body"]["seal_number"] == number
    })
    .await;
}
