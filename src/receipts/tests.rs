//! A receipt of a made-up sealed debate verifies, and any change to any part
//! of it makes the verifier name the check that fails.

use std::collections::BTreeMap;

use agon_aggregates::debate::consensus::{Ballot, ConsensusMode, Tally, VoteChoice, decide};
use agon_aggregates::debate::{DebateEvent, Protocol, Usage};
use agon_projections::Cursor;
use chrono::{TimeZone, Utc};
use serde_json::{Value, json};

use super::check::{Report, verify};
use super::document::{Proof, Receipt, ReceiptEvent, ReceiptSeal, assemble};
use super::odr;
use crate::crypto::signing::SealKey;
use crate::store::canonical;
use crate::store::chain::{ChainedFields, GENESIS, canonical_text};
use crate::store::merkle;
use crate::store::seal::SealBody;

pub(crate) fn key() -> SealKey {
    let dir = tempfile::tempdir().unwrap();
    SealKey::load_or_create(Some(&"42".repeat(32)), dir.path()).unwrap()
}

fn usage(provider: &str, model: &str) -> Usage {
    Usage {
        provider: provider.into(),
        model: model.into(),
        tokens_in: 10,
        tokens_out: 20,
        latency_ms: 5,
        fallback: provider == "openrouter",
    }
}

/// A three-agent debate: claude answers directly, gpt through OpenRouter,
/// and a third agent times out before it ever answers.
pub(crate) fn debate_events() -> Vec<DebateEvent> {
    let at = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
    let agents = ["claude", "gpt", "mistral"].map(str::to_owned).to_vec();
    let votes = vec![
        Ballot {
            agent: "claude".into(),
            choice: VoteChoice::Agree,
            confidence: 0.9,
            reasons: vec!["sound".into()],
            modifications: vec![],
        },
        Ballot {
            agent: "gpt".into(),
            choice: VoteChoice::Disagree,
            confidence: 0.6,
            reasons: vec!["too costly".into()],
            modifications: vec![],
        },
    ];
    let failed = vec!["mistral".to_owned()];
    let result = decide(Tally {
        votes: &votes,
        mode: ConsensusMode::Majority,
        threshold: 0.5,
        judge: None,
        ratings: &BTreeMap::new(),
        summary: "Adopt the plan.",
        key_points: &[],
        failed_agents: &failed,
    });
    let mut events = vec![
        DebateEvent::DebateCreated {
            debate_id: "deb-1".into(),
            topic: "Adopt the plan?".into(),
            context: None,
            agents,
            protocol: Protocol {
                phases: vec!["opening".into()],
                rounds: 1,
                consensus: ConsensusMode::Majority,
                threshold: 0.5,
                judge: None,
            },
            created_by: Some("user-1".into()),
            org_id: None,
            at,
        },
        DebateEvent::DebateStarted { at },
        DebateEvent::AgentFailed {
            round: 1,
            phase: "opening".into(),
            agent: "mistral".into(),
            code: "timeout".into(),
            error: "no answer in 90 s".into(),
            at,
        },
    ];
    for (agent, provider, model) in [
        ("claude", "anthropic", "claude-sonnet-4-5"),
        ("gpt", "openrouter", "openai/gpt-4o"),
    ] {
        events.push(DebateEvent::MessageRecorded {
            round: 1,
            phase: "opening".into(),
            agent: agent.into(),
            content: format!("{agent} says"),
            targets: vec![],
            usage: usage(provider, model),
            at,
        });
    }
    events.push(DebateEvent::SynthesisDrafted {
        agent: "claude".into(),
        summary: "Adopt the plan.".into(),
        key_points: vec!["cheap".into()],
        usage: usage("anthropic", "claude-sonnet-4-5"),
        at,
    });
    events.push(DebateEvent::ConsensusComputed { result, at });
    events.push(DebateEvent::DebateCompleted { at });
    events
}

/// The events hashed onto their chain, sealed in two seals (the first
/// holding two other events too), and assembled into a receipt.
pub(crate) fn sealed_receipt(key: &SealKey) -> Receipt {
    sealed_receipt_of(key, debate_events())
}

/// `debate` hashed, sealed (the first seal holding two other events and
/// its first three or five events, the second the rest) and assembled.
fn sealed_receipt_of(key: &SealKey, debate: Vec<DebateEvent>) -> Receipt {
    let split = if debate.len() > 5 { 5 } else { 3 };
    let mut previous = GENESIS;
    let mut events = Vec::new();
    for (index, event) in debate.into_iter().enumerate() {
        let payload = serde_json::to_value(&event).unwrap();
        let metadata = json!({"user_id": "user-1"});
        let (payload_text, metadata_text) = (
            canonical_text(&payload).unwrap(),
            canonical_text(&metadata).unwrap(),
        );
        let event_type = cqrs_es::DomainEvent::event_type(&event);
        let sequence = index as i64 + 1;
        let hash = ChainedFields {
            aggregate_type: "debate",
            aggregate_id: "deb-1",
            sequence,
            event_type: &event_type,
            event_version: "1",
            payload: &payload_text,
            metadata: &metadata_text,
        }
        .hash(&previous)
        .unwrap();
        events.push(ReceiptEvent {
            aggregate_type: "debate".into(),
            aggregate_id: "deb-1".into(),
            sequence,
            event_type,
            event_version: "1".into(),
            payload,
            metadata,
            prev_hash: hex::encode(previous),
            hash: hex::encode(hash),
            proof: Proof {
                seal_number: 0,
                leaf_index: 0,
                tree_size: 0,
                audit_path: vec![],
            },
        });
        previous = hash;
    }
    // Seal 1: two foreign events, then the first five; seal 2: the rest.
    let hashes: Vec<[u8; 32]> = events
        .iter()
        .map(|e| <[u8; 32]>::try_from(hex::decode(&e.hash).unwrap()).unwrap())
        .collect();
    let first: Vec<[u8; 32]> = [[7; 32], [8; 32]]
        .into_iter()
        .chain(hashes[..split].iter().copied())
        .collect();
    let second: Vec<[u8; 32]> = hashes[split..].to_vec();
    let mut seals = Vec::new();
    let mut prev_seal = hex::encode(GENESIS);
    for (number, leaves, offset, at) in [
        (1, &first, 2usize, "2026-01-02T03:04:06.000000Z"),
        (2, &second, 0, "2026-01-02T03:05:00.000000Z"),
    ] {
        let body = SealBody {
            seal_number: number,
            from: Cursor {
                txid: 0,
                position: 0,
            },
            to: Cursor {
                txid: 0,
                position: leaves.len() as i64,
            },
            event_count: leaves.len() as i64,
            merkle_root: hex::encode(merkle::root(leaves)),
            prev_seal_hash: prev_seal.clone(),
            sealed_at: at.into(),
            public_key: key.public_hex(),
        };
        let bytes = body.canonical_bytes().unwrap();
        prev_seal = hex::encode(crate::store::seal::seal_hash(&bytes));
        let own = if number == 1 {
            0..split
        } else {
            split..events.len()
        };
        for i in own {
            let leaf = i - if number == 1 { 0 } else { split } + offset;
            events[i].proof = Proof {
                seal_number: number,
                leaf_index: leaf as u64,
                tree_size: leaves.len() as u64,
                audit_path: merkle::inclusion_proof(leaves, leaf)
                    .unwrap()
                    .iter()
                    .map(hex::encode)
                    .collect(),
            };
        }
        seals.push(ReceiptSeal {
            signature: hex::encode(key.sign(&bytes)),
            body,
        });
    }
    assemble(events, seals, key).unwrap()
}

fn bytes(receipt: &Receipt) -> Vec<u8> {
    canonical::to_vec(&serde_json::to_value(receipt).unwrap())
}

fn failing(report: &Report) -> Option<&str> {
    report.first_failure.as_deref()
}

#[test]
fn an_intact_receipt_passes_every_check() {
    let key = key();
    let report = verify(&bytes(&sealed_receipt(&key)), &key.public_key());
    assert!(report.valid, "{report:#?}");
    assert!(report.checks.iter().all(|c| c.status == "pass"));
}

#[test]
fn the_odr_view_maps_routers_failures_and_silent_agents() {
    let receipt = sealed_receipt(&key());
    let odr = &receipt.odr;
    let families: Vec<&str> = odr["quorum"]["participants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["model_family"].as_str().unwrap())
        .collect();
    assert_eq!(families, ["claude", "openai", odr::UNDISCLOSED]);
    assert_eq!(odr["reasoning"]["observations"][0]["kind"], "timeout");
    assert_eq!(odr["source"]["receipt_id"], json!(receipt.receipt_id));
    assert_eq!(
        odr["source"]["artifact_hash"],
        json!(receipt.events.last().unwrap().hash)
    );
    assert_eq!(
        odr["quorum"]["dissent"]["dissenting_agents"],
        json!(["gpt"])
    );
    assert_eq!(receipt.odr_digest, odr::digest(odr));
    // One vote each way is no majority.
    assert_eq!(
        receipt.debate["consensus"]["baseline"]["choice"],
        json!("disagree")
    );
}

/// Changes one value of the receipt and re-serializes it canonically, so
/// that only the content (not the form) is wrong.
fn tampered(edit: impl FnOnce(&mut Value)) -> Report {
    let key = key();
    let mut value = serde_json::to_value(sealed_receipt(&key)).unwrap();
    edit(&mut value);
    verify(&canonical::to_vec(&value), &key.public_key())
}

#[test]
fn each_tampered_part_names_its_check() {
    type Edit = Box<dyn FnOnce(&mut Value)>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "topic",
            Box::new(|v: &mut Value| v["debate"]["topic"] = json!("Reject")),
            "content_digest",
        ),
        (
            "a vote",
            Box::new(|v: &mut Value| {
                v["debate"]["consensus"]["votes"][0]["confidence"] = json!(0.1)
            }),
            "content_digest",
        ),
        (
            "costs",
            Box::new(|v: &mut Value| v["debate"]["costs"]["tokens_in"] = json!(1)),
            "content_digest",
        ),
        (
            "receipt id",
            Box::new(|v: &mut Value| v["receipt_id"] = json!("rcpt_other")),
            "content_digest",
        ),
        (
            "issued_at",
            Box::new(|v: &mut Value| v["issued_at"] = json!("2030-01-01T00:00:00Z")),
            "content_digest",
        ),
        (
            "odr digest",
            Box::new(|v: &mut Value| v["odr_digest"] = json!("00")),
            "content_digest",
        ),
        (
            "odr claim",
            Box::new(|v: &mut Value| v["odr"]["claim"]["verdict"] = json!("no_consensus")),
            "content_digest",
        ),
        (
            "odr signature",
            Box::new(|v: &mut Value| {
                v["odr"]["signatures"][0]["signed_at"] = json!("2030-01-01T00:00:00Z")
            }),
            "odr_signature",
        ),
        (
            "event payload",
            Box::new(|v: &mut Value| {
                v["events"][0]["payload"]["DebateCreated"]["topic"] = json!("x")
            }),
            "event_hashes",
        ),
        (
            "event hash",
            Box::new(|v: &mut Value| v["events"][1]["hash"] = json!("00".repeat(32))),
            "event_hashes",
        ),
        (
            "dropped event",
            Box::new(|v: &mut Value| {
                v["events"].as_array_mut().unwrap().remove(2);
            }),
            "event_hashes",
        ),
        (
            "proof path",
            Box::new(|v: &mut Value| {
                v["events"][0]["proof"]["audit_path"][0] = json!("11".repeat(32))
            }),
            "inclusion",
        ),
        (
            "proof index",
            Box::new(|v: &mut Value| v["events"][0]["proof"]["leaf_index"] = json!(3)),
            "inclusion",
        ),
        (
            "seal root",
            Box::new(|v: &mut Value| v["seals"][0]["body"]["merkle_root"] = json!("22".repeat(32))),
            "seal_signature",
        ),
        (
            "seal signature",
            Box::new(|v: &mut Value| v["seals"][1]["signature"] = json!("33".repeat(64))),
            "seal_signature",
        ),
        (
            "unknown member",
            Box::new(|v: &mut Value| v["extra"] = json!(1)),
            "structure",
        ),
    ];
    for (what, edit, check) in cases {
        let report = tampered(edit);
        assert_eq!(failing(&report), Some(check), "{what}: {report:#?}");
    }
}

#[test]
fn every_single_byte_change_fails() {
    let key = key();
    let good = bytes(&sealed_receipt(&key));
    // Every byte at a stride (all of them takes long in debug builds).
    for at in (0..good.len()).step_by(7) {
        let mut bad = good.clone();
        bad[at] ^= 0x01;
        let report = verify(&bad, &key.public_key());
        assert!(!report.valid, "byte {at} changed and still valid");
    }
}

#[test]
fn non_canonical_bytes_and_duplicate_members_are_refused() {
    let key = key();
    let good = bytes(&sealed_receipt(&key));
    let mut spaced = b" ".to_vec();
    spaced.extend_from_slice(&good);
    assert_eq!(
        failing(&verify(&spaced, &key.public_key())),
        Some("canonical_form")
    );
    let text = String::from_utf8(good).unwrap();
    let doubled = text.replacen("{\"debate\":", "{\"debate\":1,\"debate\":", 1);
    assert_eq!(
        failing(&verify(doubled.as_bytes(), &key.public_key())),
        Some("canonical_form")
    );
}

#[test]
fn another_key_fails_the_seal_signature() {
    let key = key();
    let other =
        SealKey::load_or_create(Some(&"43".repeat(32)), tempfile::tempdir().unwrap().path())
            .unwrap();
    let report = verify(&bytes(&sealed_receipt(&key)), &other.public_key());
    assert_eq!(failing(&report), Some("seal_signature"));
}

/// A debate that failed before any vote: no consensus, so quorum and
/// confidence are absent markers and the failures are observations.
fn failed_events() -> Vec<DebateEvent> {
    let mut events: Vec<DebateEvent> = debate_events().into_iter().take(3).collect();
    let at = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 9).unwrap();
    events.push(DebateEvent::AgentFailed {
        round: 1,
        phase: "opening".into(),
        agent: "gpt".into(),
        code: "http_status".into(),
        error: "502 from the provider".into(),
        at,
    });
    events.push(DebateEvent::DebateFailed {
        reason: "fewer than two agents can answer".into(),
        at,
    });
    events
}

#[test]
fn a_failed_debate_has_a_receipt_that_verifies() {
    let key = key();
    let receipt = sealed_receipt_of(&key, failed_events());
    let report = verify(&bytes(&receipt), &key.public_key());
    assert!(report.valid, "{report:#?}");
    let odr = &receipt.odr;
    assert_eq!(odr["claim"]["verdict"], "failed");
    assert_eq!(odr["quorum"]["status"], "absent");
    assert_eq!(odr["confidence"]["status"], "absent");
    let kinds: Vec<&str> = odr["reasoning"]["observations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["timeout", "failure"]);
    assert_eq!(receipt.debate["consensus"], Value::Null);
    if let Some(path) = std::env::var_os("AGON_WRITE_FAILED_ODR") {
        std::fs::write(path, canonical::to_vec(odr)).unwrap();
    }
}

/// The golden samples are this made-up debate's receipt and its ODR view,
/// byte for byte (`AGON_WRITE_GOLDEN=1` writes them; once published they
/// never change, see `PUBLISHED.sha256`).
#[test]
fn the_golden_samples_are_what_the_code_writes() {
    let receipt = sealed_receipt(&key());
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/event-schemas/receipts");
    let files = [
        ("Receipt.v1.sample.json", bytes(&receipt)),
        ("Odr.v0.2.sample.json", canonical::to_vec(&receipt.odr)),
        ("public-key.sample.txt", key().public_hex().into_bytes()),
    ];
    for (name, written) in files {
        let path = format!("{dir}/{name}");
        if std::env::var_os("AGON_WRITE_GOLDEN").is_some() {
            std::fs::write(&path, &written).unwrap();
        }
        assert_eq!(std::fs::read(&path).unwrap(), written, "{name}");
    }
}
