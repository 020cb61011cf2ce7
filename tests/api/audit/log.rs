//! The log-wide audit API: the public head and seal consistency, entries
//! filtered and paged by cursor, statistics, exports (the SOC 2 package
//! checked by the independent verifier) and what only admins may do.

use std::collections::BTreeSet;

use reqwest::Method;
use serde_json::{Value, json};

use super::{REQUEST_ID, World, raw, verifier};
use crate::support::accounts::call;
use crate::support::{Kind, TEST_TOKEN, on_both_backends};
use crate::tamper::{blob_literal, exec};

on_both_backends! {
    the_head_is_public_and_each_seal_extends_the_last => the_head_is_public_and_each_seal_extends_the_last;
    entries_filter_page_and_stay_with_their_owner => entries_filter_page_and_stay_with_their_owner;
}

async fn the_head_is_public_and_each_seal_extends_the_last(kind: Kind) {
    let world = Box::pin(World::new(kind)).await;
    let app = &world.served.app;
    let head_url = world.url("/api/audit/head");
    app.log.seal_now(&app.seal_key).await.unwrap();
    let (status, first) = call(Method::GET, &head_url, None, None).await;
    assert_eq!(status, 200, "{first}");
    let kept = first["seal"].clone();
    let n = kept["body"]["seal_number"].as_i64().unwrap();
    assert_eq!(first["public_key"], app.seal_key.public_hex());

    // New events, a new seal: it extends the kept one.
    crate::support::accounts::signed_in(&world.served.base, "carol@example.com").await;
    app.log.seal_now(&app.seal_key).await.unwrap();
    let consistency =
        |from: i64, to: i64| world.url(&format!("/api/audit/consistency?from={from}&to={to}"));
    let (status, proof) = call(Method::GET, &consistency(n, n + 1), None, None).await;
    assert_eq!(status, 200, "{proof}");
    assert_eq!(proof["consistent"], true, "{proof}");
    assert_eq!(proof["from_seal"], kept);
    let seals = proof["seals"].as_array().unwrap();
    assert_eq!(seals.len(), 1);
    assert_eq!(seals[0]["body"]["prev_seal_hash"], kept["seal_hash"]);
    assert_eq!(seals[0]["body"]["from"], kept["body"]["to"]);
    let (_, from_start) = call(Method::GET, &consistency(0, n + 1), None, None).await;
    assert_eq!(from_start["seals"].as_array().unwrap().len() as i64, n + 1);
    let (status, _) = call(Method::GET, &consistency(n + 1, n), None, None).await;
    assert_eq!(status, 404);
    let (status, _) = call(Method::GET, &consistency(0, n + 5), None, None).await;
    assert_eq!(status, 404);

    // The kept seal is checked as `agon verify --expect-seal` checks it.
    let (_, holds) = call(
        Method::POST,
        &world.url("/api/audit/verify"),
        Some(TEST_TOKEN),
        Some(json!({"expect_seal": kept})),
    )
    .await;
    assert_eq!(
        (&holds["valid"], &holds["saved_seal_number"]),
        (&json!(true), &json!(n)),
        "{holds}"
    );

    // A forged signature on the newer seal breaks the chain of seals.
    exec(
        &app.log,
        &format!(
            "UPDATE seals SET signature = {} WHERE seal_number = {}",
            blob_literal(kind, &[1; 64]),
            n + 1
        ),
    )
    .await;
    let (_, proof) = call(Method::GET, &consistency(n, n + 1), None, None).await;
    assert_eq!(proof["consistent"], false, "{proof}");
    assert_eq!(proof["problem"]["check"], "seal_signature", "{proof}");
    assert_eq!(proof["problem"]["seal_number"], n + 1);
}

async fn entries_filter_page_and_stay_with_their_owner(kind: Kind) {
    let world = Box::pin(World::new(kind)).await;
    let (alice, alice_token) = (&world.alice.0, &world.alice.1);
    let bob_token = &world.bob.1;

    // Filters: actor, type, subject and request id as recorded.
    let (status, created) = world
        .get(
            &format!("/api/audit/events?type=DebateCreated&actor={alice}"),
            alice_token,
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let found = created["events"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{created}");
    assert_eq!(found[0]["request_id"], REQUEST_ID);
    assert_eq!(found[0]["trail_id"], format!("debate:{}", world.debate));

    // The cursor walks every entry once, in order.
    let subject = format!("debate:{}", world.debate);
    let (_, all) = world
        .get(
            &format!("/api/audit/events?subject={subject}&limit=500"),
            alice_token,
        )
        .await;
    let all: Vec<i64> = positions(&all);
    assert!(all.len() >= 4);
    let mut walked = Vec::new();
    let mut cursor = String::new();
    loop {
        let (status, page) = world
            .get(
                &format!("/api/audit/events?subject={subject}&limit=2{cursor}"),
                alice_token,
            )
            .await;
        assert_eq!(status, 200, "{page}");
        walked.extend(positions(&page));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    assert_eq!(walked, all);

    // Bob sees none of Alice's entries, and his own.
    let (_, bobs) = world.get("/api/audit/events?limit=500", bob_token).await;
    let trails: BTreeSet<&str> = bobs["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["trail_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        trails,
        BTreeSet::from([format!("account:{}", world.bob.0).as_str()])
    );
    let (_, none) = world
        .get(&format!("/api/audit/events?subject={subject}"), bob_token)
        .await;
    assert_eq!(none["events"], json!([]));
    let (_, stats) = world.get("/api/audit/stats", TEST_TOKEN).await;
    let (_, bob_stats) = world.get("/api/audit/stats", bob_token).await;
    assert!(
        stats["total_events"].as_i64() > bob_stats["total_events"].as_i64(),
        "{stats} {bob_stats}"
    );
    assert_eq!(bob_stats["trails"], 1);

    // Spanning users is for admins.
    let (status, _) = world.post("/api/audit/verify", bob_token, json!({})).await;
    assert_eq!(status, 403);
    let export = world.url("/api/audit/export");
    let (status, _, _) = raw(
        Method::POST,
        &export,
        bob_token,
        Some(json!({"format": "soc2"})),
    )
    .await;
    assert_eq!(status, 403);
    let (status, kind_csv, csv) = raw(
        Method::POST,
        &export,
        bob_token,
        Some(json!({"format": "csv"})),
    )
    .await;
    assert_eq!(
        (status, kind_csv.as_str()),
        (200, "text/csv; charset=utf-8")
    );
    assert!(!String::from_utf8(csv).unwrap().contains(alice.as_str()));

    // The SOC 2 package: checked whole by the independent verifier.
    let app = &world.served.app;
    app.log.seal_now(&app.seal_key).await.unwrap();
    let (status, zip_type, package) = raw(
        Method::POST,
        &export,
        TEST_TOKEN,
        Some(json!({"format": "soc2"})),
    )
    .await;
    assert_eq!((status, zip_type.as_str()), (200, "application/zip"));
    let key = app.seal_key.public_hex();
    let output = verifier(&package, &[&key]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let other_key = "22".repeat(32);
    let output = verifier(&package, &[&other_key]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("another key"));
}

fn positions(page: &Value) -> Vec<i64> {
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["position"].as_i64().unwrap())
        .collect()
}
