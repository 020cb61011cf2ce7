//! WebSocket frames (`event-schemas/ws/`): the frames the push builds from
//! the debate events' golden samples are exactly the published frame
//! samples, and every sample meets its schema. A frame whose form changes
//! fails here: it needs a new version, not an edit.

use std::collections::BTreeMap;

use agon::push::frames::{Track, control, delta};
use agon::runner::Delta;
use agon_aggregates::debate::DebateEvent;
use agon_aggregates::wire::{self, Stored};
use agon_projections::Cursor;
use chrono::{TimeZone, Utc};
use serde_json::{Value, json};

use super::{Seen, conforms};

fn read(path: &str) -> Value {
    let full = format!("{}/event-schemas/{path}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// The golden sample of debate event `event_type`, decoded as the push decodes it.
fn debate_sample(event_type: &str) -> DebateEvent {
    let stored = Stored {
        aggregate_type: "debate",
        event_type,
        event_version: "1",
    };
    wire::decode(stored, read(&format!("debate/{event_type}.v1.sample.json"))).unwrap()
}

/// The first frame of each type that the debate samples give, in the
/// order a debate records them, and the control frames.
fn frames() -> BTreeMap<String, Value> {
    let mut critique = debate_sample("MessageRecorded");
    if let DebateEvent::MessageRecorded { phase, targets, .. } = &mut critique {
        *phase = "critique".to_owned();
        *targets = vec!["gpt-4o".to_owned()];
    }
    let events = [
        debate_sample("DebateCreated"),
        debate_sample("DebateStarted"),
        debate_sample("MessageRecorded"),
        critique,
        debate_sample("AgentFailed"),
        debate_sample("SynthesisDrafted"),
        debate_sample("VoteCast"),
        debate_sample("ConsensusComputed"),
        debate_sample("DebateCompleted"),
        // Last, so that the published samples before them keep their
        // positions; the mapping does not depend on the order.
        debate_sample("CheckpointCreated"),
        debate_sample("DebatePaused"),
        debate_sample("DebateResumed"),
    ];
    let mut track = Track::default();
    let mut found = BTreeMap::new();
    let id = "01947a2b-3c4d-7e5f-8a6b-7c8d9e0f1a2b";
    for (n, event) in events.iter().enumerate() {
        let position = i64::try_from(n).unwrap() + 1;
        for frame in track.frames(id, Cursor { txid: 0, position }, event) {
            let value: Value = serde_json::from_str(&frame.json).unwrap();
            found.entry(frame.kind.to_owned()).or_insert(value);
        }
    }
    let at = Utc.with_ymd_and_hms(2027, 1, 15, 8, 40, 0).unwrap();
    let pong = control("pong", json!({}), None, at);
    found.insert("pong".to_owned(), serde_json::from_str(&pong).unwrap());
    let error = control(
        "error",
        json!({"code": "not_found", "error": "Debate not found"}),
        Some(id),
        at,
    );
    found.insert("error".to_owned(), serde_json::from_str(&error).unwrap());
    let piece = delta(&Delta {
        debate_id: id.to_owned(),
        created_by: Some("user-1".to_owned()),
        org_id: None,
        round: 1,
        phase: "opening".to_owned(),
        agent: "claude".to_owned(),
        attempt: 1,
        seq: 0,
        text: "Rust's ownership model ".to_owned(),
        at: Utc.with_ymd_and_hms(2027, 1, 15, 8, 31, 59).unwrap()
            + chrono::Duration::milliseconds(500),
    });
    found.insert(
        "agent.delta".to_owned(),
        serde_json::from_str(&piece.json).unwrap(),
    );
    found
}

#[test]
fn the_frames_built_from_the_debate_samples_are_the_published_frame_samples() {
    let dir = format!("{}/event-schemas/ws", env!("CARGO_MANIFEST_DIR"));
    let mut schemas: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".v1.json"))
        .collect();
    schemas.sort();
    let built = frames();
    let kinds: Vec<String> = schemas
        .iter()
        .map(|s| s.trim_end_matches(".v1.json").to_owned())
        .collect();
    assert_eq!(
        kinds,
        built.keys().cloned().collect::<Vec<_>>(),
        "a frame type without a schema, or a schema no frame uses"
    );
    for kind in kinds {
        let schema = read(&format!("ws/{kind}.v1.json"));
        let sample = read(&format!("ws/{kind}.v1.sample.json"));
        if let Err(e) = conforms(&sample, &schema, "frame", "#", &mut Seen::default()) {
            panic!("ws/{kind}.v1.sample.json: {e}");
        }
        assert_eq!(
            built[&kind],
            sample,
            "the {kind} frame differs from its sample; sent now:\n{}",
            serde_json::to_string_pretty(&built[&kind]).unwrap()
        );
    }
}
