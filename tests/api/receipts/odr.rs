//! The independent verifiers on real receipts: `aragora-verify` 0.2.0 (in a
//! virtual environment, from PyPI) accepts the ODR view of a receipt the
//! service issued, with `--pubkey` from `agon keys public`, and rejects it
//! after one-byte changes; `event-schemas/verify_receipt.py` (written from
//! RECEIPT.md) accepts the whole receipt and names the check a change breaks.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{SEED, finished_debate, flipped, public_key, raw};
use crate::serve::spawn_with;
use crate::support::Kind;
use crate::support::accounts::signed_in;

/// A virtual environment with `aragora-verify==0.2.0`, made once per machine.
fn venv() -> PathBuf {
    let dir = std::env::temp_dir().join("agon-aragora-verify-0.2.0");
    if dir.join("bin/aragora-verify").is_file() {
        return dir;
    }
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&dir)
        .status();
    assert!(made.is_ok_and(|s| s.success()), "python3 -m venv failed");
    let pip = Command::new(dir.join("bin/pip"))
        .args([
            "install",
            "-q",
            "--disable-pip-version-check",
            "aragora-verify==0.2.0",
            "jsonschema",
        ])
        .status()
        .unwrap();
    assert!(pip.success(), "pip install aragora-verify==0.2.0 failed");
    dir
}

fn run(program: &Path, args: &[&Path], extra: &[&str]) -> (i32, String) {
    let out = Command::new(program)
        .args(args)
        .args(extra)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn independent_verifiers_accept_real_receipts_and_refuse_changed_bytes() {
    let venv = venv();
    let app = spawn_with(Kind::Sqlite, &[("SERVICE_SIGNING_KEY", SEED)]).await;
    let base = app.base.as_str();
    let (_, owner, _) = signed_in(base, "odr-owner@example.com").await;
    let id = finished_debate(base, &owner, "Is the ODR view portable?").await;
    let path = format!("/api/v1/receipts/rcpt_{id}");
    let (_, receipt) = raw(base, &path, &owner).await;
    let (status, odr) = raw(base, &format!("{path}?format=odr"), &owner).await;
    assert_eq!(status, 200);

    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("key.hex");
    std::fs::write(&key_file, public_key()).unwrap();
    let odr_file = dir.path().join("receipt.odr.json");
    let verifier = venv.join("bin/aragora-verify");

    std::fs::write(&odr_file, &odr).unwrap();
    let (code, out) = run(
        &verifier,
        &[&odr_file],
        &["--pubkey", key_file.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("VERIFIED"), "{out}");
    for at in (0..odr.len()).step_by(61) {
        std::fs::write(&odr_file, flipped(&odr, at)).unwrap();
        let (code, out) = run(
            &verifier,
            &[&odr_file],
            &["--pubkey", key_file.to_str().unwrap()],
        );
        assert_ne!(code, 0, "byte {at} changed and still accepted: {out}");
    }

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("event-schemas/verify_receipt.py");
    let receipt_file = dir.path().join("receipt.json");
    std::fs::write(&receipt_file, &receipt).unwrap();
    let python = venv.join("bin/python");
    let (code, out) = run(&python, &[&script, &receipt_file], &[&public_key()]);
    assert_eq!(code, 0, "{out}");
    let hash_at = receipt
        .windows(8)
        .position(|w| w == b"\"hash\":\"")
        .unwrap()
        + 8;
    std::fs::write(&receipt_file, flipped(&receipt, hash_at)).unwrap();
    let (code, out) = run(&python, &[&script, &receipt_file], &[&public_key()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("first failing check: event_hashes"), "{out}");
}
