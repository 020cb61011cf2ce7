//! Decision receipts (§4.5 Audit) end to end on both back ends: a finished
//! debate's receipt is served as canonical bytes that verify offline with
//! the published public key alone (our verifier, `agon receipt verify`, and
//! `aragora-verify` 0.2.0 on its ODR view), fail naming the check when a
//! byte changes, and are refused to another user.

mod odr;
mod retention;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::serve::spawn_with;
use crate::support::accounts::{call, signed_in};
use crate::support::{Kind, TEST_TOKEN, on_both_backends};

on_both_backends! {
    a_receipt_verifies_offline_and_belongs_to_its_owner => a_receipt_verifies_offline_and_belongs_to_its_owner;
}

/// The seed of the seal key the tests run with.
pub const SEED: &str = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed";

/// `agon` with only the signing key in its environment.
pub fn agon(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agon"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("SERVICE_SIGNING_KEY", SEED)
        .env("SERVICE_DATA_DIR", "/nonexistent-agon-data")
        .output()
        .unwrap()
}

/// The published public key, as `agon keys public` prints it.
pub fn public_key() -> String {
    let out = agon(&["keys", "public"]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// GETs `path` with `token`: the status and the body's bytes as served.
pub async fn raw(base: &str, path: &str, token: &str) -> (u16, Vec<u8>) {
    let response = reqwest::Client::new()
        .get(format!("{base}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.bytes().await.unwrap().to_vec())
}

/// A finished one-round demo debate of `token`'s; returns its id.
pub async fn finished_debate(base: &str, token: &str, topic: &str) -> String {
    let body = json!({"topic": topic, "agents": ["demo-a", "demo-b", "demo-c"], "rounds": 1});
    let (status, created) = call(
        Method::POST,
        &format!("{base}/api/v1/debates"),
        Some(token),
        Some(body),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, detail) = call(
            Method::GET,
            &format!("{base}/api/v1/debates/{id}"),
            Some(token),
            None,
        )
        .await;
        if detail["status"] == "completed" {
            return id;
        }
        assert!(Instant::now() < deadline, "{detail}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Checks `receipt` against `event-schemas/receipts/Receipt.v1.json`.
pub fn meets_the_schema(receipt: &Value) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/event-schemas/receipts/");
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{root}Receipt.v1.json")).unwrap())
            .unwrap();
    let seen = &mut crate::schemas::Seen::default();
    if let Err(e) = crate::schemas::conforms(receipt, &schema, "receipt", "#", seen) {
        panic!("{e}");
    }
}

#[test]
fn the_golden_sample_meets_the_schema_and_verifies() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/event-schemas/receipts/");
    let bytes = std::fs::read(format!("{root}Receipt.v1.sample.json")).unwrap();
    meets_the_schema(&serde_json::from_slice(&bytes).unwrap());
    let key = std::fs::read_to_string(format!("{root}public-key.sample.txt")).unwrap();
    let key: [u8; 32] = hex::decode(key.trim()).unwrap().try_into().unwrap();
    let report = agon::receipts::check::verify(&bytes, &key);
    assert!(report.valid, "{report:#?}");
}

fn flipped(bytes: &[u8], at: usize) -> Vec<u8> {
    let mut bad = bytes.to_vec();
    bad[at] ^= 0x01;
    bad
}

async fn a_receipt_verifies_offline_and_belongs_to_its_owner(kind: Kind) {
    let app = spawn_with(kind, &[("SERVICE_SIGNING_KEY", SEED)]).await;
    let base = app.base.as_str();
    let (_, owner, _) = signed_in(base, "receipts-owner@example.com").await;
    let (_, other, _) = signed_in(base, "receipts-other@example.com").await;
    let id = finished_debate(base, &owner, "Should receipts be signed?").await;
    let receipt_id = format!("rcpt_{id}");
    let path = format!("/api/v1/receipts/{receipt_id}");

    let (status, bytes) = raw(base, &path, &owner).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    let key: [u8; 32] = hex::decode(public_key()).unwrap().try_into().unwrap();
    let report = agon::receipts::check::verify(&bytes, &key);
    assert!(report.valid, "{report:#?}");
    let receipt: Value = serde_json::from_slice(&bytes).unwrap();
    meets_the_schema(&receipt);
    assert_eq!(receipt["receipt_id"], json!(receipt_id));
    assert_eq!(receipt["debate"]["debate_id"], json!(id));
    assert_eq!(receipt["odr"]["source"]["receipt_id"], json!(receipt_id));
    let last_hash = receipt["events"].as_array().unwrap().last().unwrap()["hash"].clone();
    assert_eq!(receipt["odr"]["source"]["artifact_hash"], last_hash);
    // Served again, the same bytes.
    assert_eq!(raw(base, &path, &owner).await.1, bytes);

    // Any changed byte fails, naming a check.
    for at in (0..bytes.len()).step_by(97) {
        let report = agon::receipts::check::verify(&flipped(&bytes, at), &key);
        assert!(!report.valid && report.first_failure.is_some(), "byte {at}");
    }

    // The bare ODR view is the receipt's `odr`, in canonical bytes.
    let (status, odr) = raw(base, &format!("{path}?format=odr"), &owner).await;
    assert_eq!(status, 200);
    assert_eq!(odr, agon::store::canonical::to_vec(&receipt["odr"]));

    // The service reports every check.
    let verify = format!("{base}{path}/verify");
    let (status, report) = call(Method::POST, &verify, Some(&owner), None).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["valid"], true, "{report}");
    assert_eq!(report["checks"].as_array().unwrap().len(), 7);
    assert_eq!(report["first_failure"], Value::Null);

    // Offline with the command and the public key alone.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("receipt.json");
    std::fs::write(&file, &bytes).unwrap();
    let key_hex = public_key();
    let file_arg = file.to_str().unwrap();
    let good = agon(&["receipt", "verify", file_arg, "--public-key", &key_hex]);
    assert_eq!(good.status.code(), Some(0), "{good:?}");
    let topic_at = bytes.windows(9).position(|w| w == b"receipts ").unwrap();
    std::fs::write(&file, flipped(&bytes, topic_at)).unwrap();
    let bad = agon(&[
        "receipt",
        "verify",
        file_arg,
        "--public-key",
        &key_hex,
        "--json",
    ]);
    assert_eq!(bad.status.code(), Some(1), "{bad:?}");
    let named: Value = serde_json::from_slice(&bad.stdout).unwrap();
    assert_eq!(named["first_failure"], "content_digest", "{named}");

    // Owned: the list shows it to its owner and admins only; others get 404.
    let list = format!("{base}/api/v1/receipts");
    let (status, mine) = call(Method::GET, &list, Some(&owner), None).await;
    assert_eq!(status, 200, "{mine}");
    assert_eq!(
        mine["receipts"][0]["receipt_id"],
        json!(receipt_id),
        "{mine}"
    );
    assert_eq!(mine["receipts"][0]["expired"], false, "{mine}");
    let (_, theirs) = call(Method::GET, &list, Some(&other), None).await;
    assert_eq!(theirs["total"], 0, "{theirs}");
    assert_eq!(raw(base, &path, &other).await.0, 404);
    let (status, _) = call(Method::POST, &verify, Some(&other), None).await;
    assert_eq!(status, 404);
    assert_eq!(raw(base, &path, TEST_TOKEN).await.1, bytes);
    let (status, _) = call(
        Method::GET,
        &format!("{base}/api/v1/receipts/rcpt_nope"),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!(status, 404);

    // Tampering with the stored log shows in the service's verification,
    // named: a seal body first, then an event (whose check runs earlier).
    let sql = "UPDATE seals SET body = replace(body, '\"event_count\":', '\"event_count\":1')";
    crate::tamper::exec(&app.app.log, sql).await;
    let (_, report) = call(Method::POST, &verify, Some(&owner), None).await;
    assert_eq!(report["first_failure"], "seal_signature", "{report}");
    let sql = format!(
        "UPDATE events SET payload = replace(payload, 'Should receipts', 'Should Receipts') \
         WHERE aggregate_id = '{id}' AND sequence = 1"
    );
    crate::tamper::exec(&app.app.log, &sql).await;
    let (_, report) = call(Method::POST, &verify, Some(&owner), None).await;
    assert_eq!(report["first_failure"], "event_hashes", "{report}");
    assert_eq!(report["valid"], false);
}
