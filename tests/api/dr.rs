//! Disaster recovery on both back ends: a drill without a backup fails and
//! says so, in its answer and in the status; with a backup it restores,
//! replays and verifies it and records the recovery point (the events the
//! backup lacks) and time as an event the status and objectives show;
//! `validate` names what a recovery lacks.

use reqwest::Method;
use serde_json::{Value, json};

use crate::backups::{admin, create_backup, populated};
use crate::support::{Kind, on_both_backends};

on_both_backends! {
    drills_measure_the_newest_backup => drills_measure_the_newest_backup;
}

fn check<'a>(validation: &'a Value, name: &str) -> &'a Value {
    validation["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {validation}"))
}

async fn drills_measure_the_newest_backup(kind: Kind) {
    let live = populated(kind, &[("SERVICE_DR_RPO_EVENTS", "5")]).await;
    let base = &live.base;

    // No backup yet: validation and the drill say so.
    let (status, validation) = admin(base, Method::POST, "/api/v2/dr/validate", None).await;
    assert_eq!(status, 200, "{validation}");
    let validation = &validation["data"];
    assert_eq!(validation["valid"], false, "{validation}");
    assert_eq!(check(validation, "backup_recent")["ok"], false);
    assert_eq!(check(validation, "storage_reachable")["ok"], true);
    assert_eq!(check(validation, "seal_key_present")["ok"], true);
    let (status, failed) = admin(base, Method::POST, "/api/dr/drill", None).await;
    assert_eq!(status, 200, "{failed}");
    assert_eq!(
        (&failed["success"], &failed["status"]),
        (&json!(false), &json!("failed"))
    );
    assert_eq!(failed["error"], "no backup to restore", "{failed}");
    assert_eq!(failed["backup_id"], Value::Null);
    assert_eq!(
        (&failed["rpo_met"], &failed["rto_met"]),
        (&json!(false), &json!(false))
    );
    let (_, status_body) = admin(base, Method::GET, "/api/dr/status", None).await;
    assert_eq!(status_body["ready"], false, "{status_body}");
    assert_eq!(status_body["last_drill"]["drill_id"], failed["drill_id"]);
    let (_, objectives) = admin(base, Method::GET, "/api/dr/objectives", None).await;
    assert_eq!(objectives["rpo_events"], 5, "{objectives}");
    assert_eq!(objectives["rpo_compliant"], false, "{objectives}");

    // With a backup, the drill restores it and measures what it lacks.
    let backup = create_backup(base, "for the drill").await;
    let (_, drill) = admin(base, Method::POST, "/api/dr/drill", None).await;
    assert_eq!(drill["success"], true, "{drill}");
    assert_eq!(drill["verified"], true, "{drill}");
    assert_eq!(drill["backup_id"], backup["backup_id"], "{drill}");
    assert_eq!(drill["events_restored"], backup["events"], "{drill}");
    // The backup's own record came after it, and nothing else: one event.
    assert_eq!(drill["rpo_events"], 1, "{drill}");
    assert_eq!(drill["rpo_met"], true, "{drill}");
    assert!(drill["rto_ms"].is_u64(), "{drill}");

    // Events the backup lacks beyond the objective miss it.
    for n in 0..3 {
        crate::backups::finished_debate(base, &format!("After the backup {n}")).await;
    }
    let (_, late) = admin(base, Method::POST, "/api/dr/drill", None).await;
    assert_eq!(late["success"], true, "{late}");
    assert!(late["rpo_events"].as_u64().unwrap() > 5, "{late}");
    assert_eq!(late["rpo_met"], false, "{late}");
    let (_, status_body) = admin(base, Method::GET, "/api/dr/status", None).await;
    assert_eq!(status_body["last_drill"]["drill_id"], late["drill_id"]);
    assert_eq!(status_body["ready"], false, "{status_body}");
    let issues = status_body["issues"].to_string();
    assert!(issues.contains("recovery point"), "{status_body}");
    let (_, validation) = admin(base, Method::POST, "/api/dr/validate", None).await;
    assert_eq!(
        check(&validation, "backup_recent")["ok"],
        true,
        "{validation}"
    );

    // Each drill is an event in the log.
    let drills = live
        .app
        .log
        .read_feed(agon_projections::Cursor::START, 100_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.aggregate_type == "backup_drill" && e.event_type == "DrillCompleted")
        .count();
    assert_eq!(drills, 3);
    live.stop.cancel();
}
