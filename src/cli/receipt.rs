//! `agon receipt verify FILE --public-key HEX`: checks a downloaded receipt
//! offline with the seal public key alone (no store, no service) and prints
//! each check; exit 0 when every check passes, 1 when one fails, 2 when the
//! file or key cannot be read.

use std::path::Path;

use thiserror::Error;

use crate::receipts::check::{self, Report};

#[derive(Debug, Error)]
pub enum ReceiptCliError {
    #[error("--public-key must be 64 hexadecimal characters (an ed25519 public key)")]
    BadPublicKey,
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Verifies the receipt in `file`, printing the report (JSON with `json`);
/// `Ok(true)` when every check passed.
pub fn verify(file: &Path, public_key: &str, json: bool) -> Result<bool, ReceiptCliError> {
    let key: [u8; 32] = hex::decode(public_key.trim())
        .ok()
        .and_then(|k| k.try_into().ok())
        .ok_or(ReceiptCliError::BadPublicKey)?;
    let bytes = std::fs::read(file).map_err(|source| ReceiptCliError::Read {
        path: file.display().to_string(),
        source,
    })?;
    let report = check::verify(&bytes, &key);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print!("{}", render(&report));
    }
    Ok(report.valid)
}

/// The report as lines a person reads.
pub fn render(report: &Report) -> String {
    let mut out = format!(
        "receipt {}: {}\n",
        report.receipt_id.as_deref().unwrap_or("<unreadable>"),
        if report.valid { "VALID" } else { "INVALID" }
    );
    for c in &report.checks {
        out.push_str(&format!("  [{}] {}: {}\n", c.status, c.name, c.detail));
    }
    if let Some(first) = &report.first_failure {
        out.push_str(&format!("first failing check: {first}\n"));
    }
    out
}
