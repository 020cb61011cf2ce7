//! Code review (§4.5) end to end on both back ends: a snippet and a diff
//! are reviewed by a debate of the demo agents, the results show in the
//! owner's history with comments anchored in the diff, and another user
//! can neither read a result nor see it listed.

use reqwest::Method;
use serde_json::json;

use crate::scm::{DIFF, finished};
use crate::serve::spawn_with;
use crate::support::accounts::{call, signed_in};
use crate::support::{Kind, on_both_backends};

on_both_backends! {
    snippets_and_diffs_are_reviewed_for_their_owner => snippets_and_diffs_are_reviewed_for_their_owner;
}

async fn snippets_and_diffs_are_reviewed_for_their_owner(kind: Kind) {
    let app = spawn_with(kind, &[]).await;
    let base = app.base.as_str();
    let (_, owner, _) = signed_in(base, "reviewer@example.com").await;
    let (_, other, _) = signed_in(base, "other@example.com").await;

    let (status, started) = call(
        Method::POST,
        &format!("{base}/api/v1/code-review/review"),
        Some(&owner),
        Some(json!({"code": "fn add(a: i32, b: i32) -> i32 { a - b }", "language": "rust", "filename": "src/math.rs"})),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    // The review is settled as its debate ends, which the demo agents may
    // reach before the answer is read back.
    assert!(
        ["in_progress", "completed"].contains(&started["status"].as_str().unwrap()),
        "{started}"
    );
    let snippet_id = started["review_id"].as_str().unwrap().to_owned();
    let snippet = finished(
        base,
        &format!("/api/v1/code-review/results/{snippet_id}"),
        &owner,
    )
    .await;
    assert_eq!(snippet["status"], "completed", "{snippet}");
    assert_eq!(snippet["kind"], "snippet");
    assert!(
        snippet["body"].as_str().unwrap().starts_with("Review: "),
        "{snippet}"
    );
    for comment in snippet["comments"].as_array().unwrap() {
        assert_eq!(
            (comment["path"].as_str(), comment["position"].as_u64()),
            (Some("src/math.rs"), Some(1))
        );
    }

    let (status, started) = call(
        Method::POST,
        &format!("{base}/api/v1/code-review/diff"),
        Some(&owner),
        Some(json!({"diff": DIFF, "focus": "correctness"})),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let diff_id = started["review_id"].as_str().unwrap().to_owned();
    let diff = finished(
        base,
        &format!("/api/v1/code-review/results/{diff_id}"),
        &owner,
    )
    .await;
    assert_eq!(
        (diff["status"].as_str(), diff["kind"].as_str()),
        (Some("completed"), Some("diff")),
        "{diff}"
    );
    assert!(["APPROVE", "REQUEST_CHANGES", "COMMENT"].contains(&diff["event"].as_str().unwrap()));
    // The debate behind it is the owner's to read.
    let debate_id = diff["debate_id"].as_str().unwrap();
    let (status, _) = call(
        Method::GET,
        &format!("{base}/api/v1/debates/{debate_id}"),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!(status, 200);

    let (status, bad) = call(
        Method::POST,
        &format!("{base}/api/v1/code-review/diff"),
        Some(&owner),
        Some(json!({"diff": " \n\t"})),
    )
    .await;
    assert_eq!(status, 422, "{bad}");

    let (status, history) = call(
        Method::GET,
        &format!("{base}/api/v1/code-review/history"),
        Some(&owner),
        None,
    )
    .await;
    assert_eq!(status, 200, "{history}");
    let ids: Vec<&str> = history["reviews"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["review_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [diff_id.as_str(), snippet_id.as_str()], "{history}");
    assert_eq!(history["total"], 2);
    assert!(
        history["reviews"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["status"] == "completed")
    );

    // Another user sees none of it.
    let (status, _) = call(
        Method::GET,
        &format!("{base}/api/v1/code-review/results/{diff_id}"),
        Some(&other),
        None,
    )
    .await;
    assert_eq!(status, 404);
    let (_, theirs) = call(
        Method::GET,
        &format!("{base}/api/v1/code-review/history"),
        Some(&other),
        None,
    )
    .await;
    assert_eq!(theirs["total"], 0, "{theirs}");
    app.stop.cancel();
}
