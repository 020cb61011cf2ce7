//! Review and source-host delivery events against their schemas
//! (`event-schemas/review/`, `event-schemas/scm_delivery/`): every variant,
//! every kind, source, action and outcome.

use agon_aggregates::review::delivery::{Receipt, ScmDeliveryEvent};
use agon_aggregates::review::{
    Anchor, ReviewAction, ReviewComment, ReviewEvent, ReviewKind, Target,
};

use super::{Sample, USER, at, check_event_schemas};

fn variant(event: &ReviewEvent) -> &'static str {
    match event {
        ReviewEvent::ReviewRequested { .. } => "ReviewRequested",
        ReviewEvent::ReviewCompleted { .. } => "ReviewCompleted",
        ReviewEvent::ReviewFailed { .. } => "ReviewFailed",
        ReviewEvent::ReviewSubmitted { .. } => "ReviewSubmitted",
        ReviewEvent::ReviewPosted { .. } => "ReviewPosted",
    }
}

fn pull() -> Target {
    Target {
        repository: Some("octo/widgets".to_owned()),
        pr_number: Some(7),
        title: Some("Reuse idle connections".to_owned()),
        head_sha: Some("6dcb09b5b57875f334f61aebed695e2e4193db5e".to_owned()),
    }
}

fn comment() -> ReviewComment {
    ReviewComment {
        path: "src/pool.rs".to_owned(),
        position: 3,
        body: "Close the handle".to_owned(),
    }
}

#[test]
fn every_review_event_matches_its_schema() {
    let mut events = Vec::new();
    for (kind, source, target) in [
        (ReviewKind::Snippet, "api", Target::default()),
        (ReviewKind::Diff, "api", Target::default()),
        (ReviewKind::PullRequest, "webhook", pull()),
    ] {
        events.push(ReviewEvent::ReviewRequested {
            review_id: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".to_owned(),
            kind,
            source: source.to_owned(),
            owner: Some(USER.to_owned()),
            org_id: None,
            target,
            anchors: vec![Anchor {
                path: "src/pool.rs".to_owned(),
                position: 3,
            }],
            truncated: false,
            debate_id: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c".to_owned(),
            at: at(0),
        });
    }
    let actions = [
        ReviewAction::Approve,
        ReviewAction::RequestChanges,
        ReviewAction::Comment,
    ];
    for action in actions {
        events.push(ReviewEvent::ReviewCompleted {
            action,
            body: "Review".to_owned(),
            comments: vec![comment()],
            confidence: 0.8,
            at: at(1),
        });
    }
    events.push(ReviewEvent::ReviewFailed {
        reason: "no agent left".to_owned(),
        at: at(2),
    });
    for action in actions {
        events.push(ReviewEvent::ReviewSubmitted {
            review_id: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5d".to_owned(),
            owner: Some(USER.to_owned()),
            target: pull(),
            action,
            body: "Fix it".to_owned(),
            comments: vec![comment()],
            host_review_id: None,
            demo: true,
            at: at(3),
        });
    }
    events.push(ReviewEvent::ReviewPosted {
        host_review_id: 80,
        at: at(4),
    });
    let mut samples: Vec<Sample> = events
        .iter()
        .map(|e| Sample::new("review", variant(e), e))
        .collect();
    let deliveries: Vec<ScmDeliveryEvent> = [
        "review_queued",
        "triage_queued",
        "tracked",
        "acknowledged",
        "ignored",
    ]
    .into_iter()
    .map(|outcome| ScmDeliveryEvent::DeliveryReceived {
        receipt: Receipt {
            delivery_id: "72d3162e-cc78-11e3-81ab-4c9367dc0958".to_owned(),
            event: "pull_request".to_owned(),
            action: Some("opened".to_owned()),
            repository: Some("octo/widgets".to_owned()),
            installation_id: Some(42),
            outcome: outcome.to_owned(),
            ..Receipt::default()
        },
        at: at(4),
    })
    .collect();
    samples.extend(
        deliveries
            .iter()
            .map(|e| Sample::new("scm_delivery", "DeliveryReceived", e)),
    );
    check_event_schemas(&samples, &["review", "scm_delivery"]);
}
