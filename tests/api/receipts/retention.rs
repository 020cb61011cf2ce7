//! The receipt-retention scheduler on both back ends: a receipt past
//! `SERVICE_RECEIPT_RETENTION_DAYS` expires when an admin runs the cleanup
//! (an event on its receipt stream), is then no longer served, the status
//! and metrics count it, and the log with every seal still verifies.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use super::{SEED, finished_debate, raw};
use crate::serve::spawn_with;
use crate::support::accounts::{call, signed_in};
use crate::support::provider::metric;
use crate::support::{Kind, TEST_TOKEN, client, on_both_backends};

on_both_backends! {
    expired_receipts_are_no_longer_served_and_the_log_still_verifies => expired_receipts_are_no_longer_served_and_the_log_still_verifies;
}

async fn cleanup(base: &str, token: &str) -> (u16, Value) {
    let url = format!("{base}/api/admin/schedulers/receipt-retention/cleanup");
    call(Method::POST, &url, Some(token), None).await
}

async fn expired_receipts_are_no_longer_served_and_the_log_still_verifies(kind: Kind) {
    let vars = [
        ("SERVICE_SIGNING_KEY", SEED),
        ("SERVICE_RECEIPT_RETENTION_DAYS", "2"),
    ];
    let app = spawn_with(kind, &vars).await;
    let base = app.base.as_str();
    let (_, owner, _) = signed_in(base, "retention-owner@example.com").await;
    let id = finished_debate(base, &owner, "How long are receipts kept?").await;
    let path = format!("/api/v1/receipts/rcpt_{id}");
    assert_eq!(raw(base, &path, &owner).await.0, 200);

    let status_url = format!("{base}/api/admin/schedulers/receipt-retention/status");
    let (status, before) = call(Method::GET, &status_url, Some(TEST_TOKEN), None).await;
    assert_eq!(status, 200, "{before}");
    assert_eq!(before["retention_days"], 2);
    assert_eq!(before["interval_hours"], 24);
    assert_eq!(before["running"], true);

    // Not due yet: nothing expires.
    let (status, body) = cleanup(base, TEST_TOKEN).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["receipts_deleted"], 0);
    assert_eq!(raw(base, &path, &owner).await.0, 200);
    // Only admins run it.
    assert_eq!(cleanup(base, &owner).await.0, 403);

    // (The owner's access token lapses with the moved clock: ask as the admin.)
    app.app.clock.advance(Duration::from_secs(3 * 86_400));
    let (_, body) = cleanup(base, TEST_TOKEN).await;
    assert_eq!(body["receipts_deleted"], 1, "{body}");
    assert_eq!(raw(base, &path, TEST_TOKEN).await.0, 404);
    let list = format!("{base}/api/v1/receipts");
    let (_, listed) = call(Method::GET, &list, Some(TEST_TOKEN), None).await;
    let item = listed["receipts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["debate_id"] == id.as_str());
    assert_eq!(
        item.map(|r| r["expired"].clone()),
        Some(Value::Bool(true)),
        "{listed}"
    );
    // Once: a second run finds nothing new.
    let (_, again) = cleanup(base, TEST_TOKEN).await;
    assert_eq!(again["receipts_deleted"], 0);
    let stats = &again["status"]["stats"];
    assert_eq!(stats["total_receipts_deleted"], 1, "{again}");
    assert_eq!(stats["failures"], 0);
    assert_eq!(stats["success_rate"], 1.0);
    assert!(stats["total_runs"].as_u64().unwrap() >= 3, "{again}");
    let deleted = metric(&client(), base, "service_receipts_deleted_total").await;
    assert!(deleted.is_some_and(|n| n >= 1.0), "{deleted:?}");

    // The expiry is an event, sealed like any other: the whole log verifies.
    agon::store::sealer::seal_backlog(&app.app.log, &app.app.seal_key).await;
    let report = app
        .app
        .log
        .verify(&app.app.seal_key.public_hex())
        .await
        .unwrap();
    assert!(report.intact(), "{report:?}");
    let expiry = app.app.log.load_stream("receipt", &id, 0).await.unwrap();
    assert_eq!(expiry.len(), 1);
    assert_eq!(expiry[0].event_type, "ReceiptExpired");
}
