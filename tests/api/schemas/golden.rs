//! Golden samples: every published event version has a stored payload,
//! `event-schemas/<aggregate>/<Event>.v<N>.sample.json`, that today's code
//! must decode (through the upcasters) forever, and that meets its schema.
//! Published files never change in place: `PUBLISHED.sha256` lists each one.

use std::collections::{BTreeMap, BTreeSet};

use agon::crypto::secrets::sha256_hex;
use agon_aggregates::account::AccountEvent;
use agon_aggregates::backup::BackupEvent;
use agon_aggregates::backup_drill::DrillEvent;
use agon_aggregates::debate::DebateEvent;
use agon_aggregates::email_claim::EmailClaimEvent;
use agon_aggregates::organization::OrganizationEvent;
use agon_aggregates::review::ReviewEvent;
use agon_aggregates::review::delivery::ScmDeliveryEvent;
use agon_aggregates::webhook::WebhookEvent;
use agon_aggregates::wire::{self, DecodeError, STANDARD, Stored};
use cqrs_es::DomainEvent;
use serde_json::Value;

use super::{Seen, conforms};

fn root() -> String {
    format!("{}/event-schemas", env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `event-schemas/` ending in `suffix`, as relative paths.
fn files(suffix: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut dirs = vec![String::new()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(format!("{}/{dir}", root())).unwrap() {
            let entry = entry.unwrap();
            let name = format!("{dir}{}", entry.file_name().into_string().unwrap());
            if entry.file_type().unwrap().is_dir() {
                dirs.push(format!("{name}/"));
            } else if name.ends_with(suffix) {
                found.insert(name);
            }
        }
    }
    found
}

/// `(aggregate, event type, version)` of `<aggregate>/<Event>.v<N>.sample.json`.
fn sample_name(path: &str) -> (&str, &str, &str) {
    let (aggregate, file) = path.split_once('/').unwrap();
    let stem = file.strip_suffix(".sample.json").unwrap();
    let (event_type, version) = stem.rsplit_once(".v").unwrap();
    (aggregate, event_type, version)
}

/// Decodes a stored payload the way the repository and the projections do,
/// and returns the event's own type and version.
fn decode(stored: Stored<'_>, payload: Value) -> Result<(String, String), DecodeError> {
    fn named<E: DomainEvent>(event: E) -> (String, String) {
        (event.event_type(), event.event_version())
    }
    match stored.aggregate_type {
        "account" => wire::decode::<AccountEvent>(stored, payload).map(named),
        "debate" => wire::decode::<DebateEvent>(stored, payload).map(named),
        "organization" => wire::decode::<OrganizationEvent>(stored, payload).map(named),
        "email" => wire::decode::<EmailClaimEvent>(stored, payload).map(named),
        "identity" => {
            wire::decode::<agon_aggregates::identity_claim::IdentityClaimEvent>(stored, payload)
                .map(named)
        }
        "webhook" => wire::decode::<WebhookEvent>(stored, payload).map(named),
        "review" => wire::decode::<ReviewEvent>(stored, payload).map(named),
        "scm_delivery" => wire::decode::<ScmDeliveryEvent>(stored, payload).map(named),
        "receipt" => {
            wire::decode::<agon_aggregates::receipt::ReceiptEvent>(stored, payload).map(named)
        }
        "backup" => wire::decode::<BackupEvent>(stored, payload).map(named),
        "backup_drill" => wire::decode::<DrillEvent>(stored, payload).map(named),
        other => panic!("no event enum for aggregate type {other}"),
    }
}

/// Folders of payloads that leave the service (webhook bodies, WebSocket
/// frames): versioned DTOs, not stored events; their own tests check them.
const PUBLIC_PAYLOADS: [&str; 4] = ["webhooks/", "ws/", "receipts/", "audit/"];

fn is_public_payload(path: &str) -> bool {
    PUBLIC_PAYLOADS.iter().any(|dir| path.starts_with(dir))
}

#[test]
fn every_sample_decodes_with_todays_code_and_meets_its_schema() {
    // Payloads that leave the service are not stored events: `schemas/ws.rs`
    // and `schemas/webhooks.rs` check them against what the code sends.
    let samples: BTreeSet<String> = files(".sample.json")
        .into_iter()
        .filter(|path| !is_public_payload(path))
        .collect();
    assert!(!samples.is_empty());
    // The newest published version of each event type.
    let mut newest: BTreeMap<(String, String), u32> = BTreeMap::new();
    for path in &samples {
        let (aggregate_type, event_type, event_version) = sample_name(path);
        let text = std::fs::read_to_string(format!("{}/{path}", root())).unwrap();
        let payload: Value = serde_json::from_str(&text).unwrap();
        let schema_path = path.replace(".sample.json", ".json");
        let schema: Value = serde_json::from_str(
            &std::fs::read_to_string(format!("{}/{schema_path}", root()))
                .unwrap_or_else(|e| panic!("{path}: no schema {schema_path}: {e}")),
        )
        .unwrap();
        if let Err(e) = conforms(&payload, &schema, "payload", "#", &mut Seen::default()) {
            panic!("{path}: {e}");
        }
        let stored = Stored {
            aggregate_type,
            event_type,
            event_version,
        };
        let (decoded_type, decoded_version) =
            decode(stored, payload).unwrap_or_else(|e| panic!("{path} no longer decodes: {e}"));
        assert_eq!(decoded_type, event_type, "{path}");
        let current = STANDARD.current(aggregate_type, event_type);
        assert_eq!(
            decoded_version,
            current.to_string(),
            "{path}: the event enum writes another version than the upcasters reach"
        );
        let version: u32 = event_version.parse().unwrap();
        let top = newest
            .entry((aggregate_type.to_owned(), event_type.to_owned()))
            .or_default();
        *top = (*top).max(version);
    }
    for ((aggregate_type, event_type), version) in newest {
        assert_eq!(
            version,
            STANDARD.current(&aggregate_type, &event_type),
            "{aggregate_type}/{event_type}: the current version has no published sample"
        );
    }
    // Every published event schema has its sample.
    for schema in files(".json") {
        let event_schema = schema.contains('/')
            && !schema.ends_with(".sample.json")
            && !is_public_payload(&schema);
        if event_schema {
            let sample = schema.replace(".json", ".sample.json");
            assert!(samples.contains(&sample), "{schema} has no sample {sample}");
        }
    }
}

#[test]
fn published_schemas_and_samples_never_change_in_place() {
    let manifest = std::fs::read_to_string(format!("{}/PUBLISHED.sha256", root())).unwrap();
    let mut listed = BTreeSet::new();
    for line in manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (digest, path) = line.split_once("  ").unwrap();
        let text = std::fs::read_to_string(format!("{}/{path}", root()))
            .unwrap_or_else(|e| panic!("{path} is listed as published but cannot be read: {e}"));
        assert_eq!(
            sha256_hex(&text),
            digest,
            "{path} changed after it was published: add a new version instead"
        );
        listed.insert(path.to_owned());
    }
    for path in files(".json") {
        assert!(
            listed.contains(&path),
            "{path} is not in event-schemas/PUBLISHED.sha256: add its SHA-256 there"
        );
    }
}
