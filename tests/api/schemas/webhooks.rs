//! Webhook subscription events against their schemas (`event-schemas/webhook/`),
//! and the public webhook bodies (`event-schemas/webhooks/`) as the service
//! builds them: each conforms to its schema, and each golden sample reads
//! back into today's payload types.

use agon::crypto::fields::FieldCipher;
use agon::webhooks::payload::{
    self, DebateCompleted, DebateFailed, DebateVerdict, Message, Ping, Verdict,
};
use agon_aggregates::webhook::WebhookEvent;
use serde_json::{Value, json};

use super::{Sample, Seen, USER, at, check_event_schemas, conforms, schema};

fn variant(event: &WebhookEvent) -> &'static str {
    use WebhookEvent as E;
    match event {
        E::WebhookCreated { .. } => "WebhookCreated",
        E::WebhookUpdated { .. } => "WebhookUpdated",
        E::WebhookEnabled { .. } => "WebhookEnabled",
        E::WebhookDisabled { .. } => "WebhookDisabled",
        E::WebhookSecretRotated { .. } => "WebhookSecretRotated",
        E::WebhookDeleted { .. } => "WebhookDeleted",
    }
}

#[test]
fn every_webhook_event_matches_its_schema() {
    let cipher = FieldCipher::parse(&"ab".repeat(32)).unwrap();
    let secret = cipher.encrypt("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
    let events = [
        WebhookEvent::WebhookCreated {
            subscription_id: "5d0c3b1a-7e2f-4a6b-9c8d-1e2f3a4b5c6d".to_owned(),
            owner: USER.to_owned(),
            url: "https://hooks.example.com/agon".to_owned(),
            events: vec![
                "debate.completed".to_owned(),
                "debate.verdict".to_owned(),
                "debate.failed".to_owned(),
            ],
            description: None,
            secret: secret.clone(),
            at: at(0),
        },
        WebhookEvent::WebhookUpdated {
            url: None,
            events: Some(vec![
                "debate.failed".to_owned(),
                "debate.verdict".to_owned(),
                "debate.completed".to_owned(),
            ]),
            description: Some("Builds".to_owned()),
            at: at(1),
        },
        WebhookEvent::WebhookEnabled { at: at(2) },
        WebhookEvent::WebhookDisabled {
            reason: "failing".to_owned(),
            at: at(3),
        },
        WebhookEvent::WebhookDisabled {
            reason: "owner".to_owned(),
            at: at(4),
        },
        WebhookEvent::WebhookSecretRotated { secret, at: at(5) },
        WebhookEvent::WebhookDeleted { at: at(6) },
    ];
    let samples: Vec<Sample> = events
        .iter()
        .map(|e| Sample::new("webhook", variant(e), e))
        .collect();
    check_event_schemas(&samples, &["webhook"]);
}

fn verdict(reached: bool) -> Verdict {
    Verdict {
        reached,
        status: if reached {
            "consensus_reached"
        } else {
            "no_consensus"
        }
        .to_owned(),
        summary: "Adopt it.".to_owned(),
        confidence: 0.8,
        agreeing_share: 0.75,
        mode: "majority".to_owned(),
        key_points: vec!["One".to_owned()],
        disagreements: Vec::new(),
    }
}

/// Checks a body the service builds against `webhooks/<kind>.v1.json`, and
/// that the golden sample reads back into the payload type `D`.
fn check_body<D: serde::Serialize + serde::de::DeserializeOwned>(kind: &str, data: D) {
    let file = format!("webhooks/{kind}.v1.json");
    let body: Value = serde_json::from_str(&payload::body(kind, at(0), data)).unwrap();
    conforms(&body, &schema(&file), "body", "#", &mut Seen::default())
        .unwrap_or_else(|e| panic!("{file}: {e}\n{body}"));
    let sample = schema(&format!("webhooks/{kind}.v1.sample.json"));
    conforms(&sample, &schema(&file), "sample", "#", &mut Seen::default())
        .unwrap_or_else(|e| panic!("{file} sample: {e}"));
    let read: Message<D> = serde_json::from_value(sample).unwrap();
    assert_eq!(read.kind, kind);
    assert_eq!(read.version, payload::PAYLOAD_VERSION);
}

#[test]
fn webhook_bodies_match_their_published_schemas() {
    let id = "7a6b5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d".to_owned();
    let topic = "Event log?".to_owned();
    for verdict in [Some(verdict(true)), None] {
        check_body(
            payload::DEBATE_COMPLETED,
            DebateCompleted {
                debate_id: id.clone(),
                topic: topic.clone(),
                status: "completed".to_owned(),
                verdict,
                completed_at: payload::time(at(1)),
            },
        );
    }
    check_body(
        payload::DEBATE_VERDICT,
        DebateVerdict {
            debate_id: id.clone(),
            topic: topic.clone(),
            verdict: verdict(false),
            decided_at: payload::time(at(1)),
        },
    );
    check_body(
        payload::DEBATE_FAILED,
        DebateFailed {
            debate_id: id,
            topic,
            status: "failed".to_owned(),
            reason: "no agent left".to_owned(),
            failed_at: payload::time(at(1)),
        },
    );
    check_body(
        payload::PING,
        Ping {
            subscription_id: "s".to_owned(),
            message: "hi".to_owned(),
        },
    );
    assert!(json!(null).is_null());
}
