//! The wire forms match their published schemas in `event-schemas/`.

use std::collections::{BTreeMap, BTreeSet};

use agon::crypto::fields::FieldCipher;
use agon::crypto::secrets::{new_api_key, sha256_hex};
use agon_aggregates::account::{
    AccountEvent, Device, FailureReason, KeyRevokeReason, LoginMethod, RevokeReason, Role,
    SecondFactor,
};
use agon_aggregates::debate::consensus::{Tally, decide};
use agon_aggregates::debate::{Ballot, ConsensusMode, DebateEvent, Protocol, Usage, VoteChoice};
use agon_aggregates::email_claim::EmailClaimEvent;
use agon_aggregates::organization::{OrgRole, OrganizationEvent};
use agon_projections::Cursor;
use chrono::{DateTime, TimeZone, Utc};
use cqrs_es::DomainEvent;
use serde_json::{Value, json};

use crate::support::{Kind, fill_stream, fresh, settled_feed};

fn schema(name: &str) -> Value {
    let path = format!("{}/event-schemas/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn keys(value: &Value) -> BTreeSet<String> {
    value.as_object().unwrap().keys().cloned().collect()
}

fn required(schema: &Value) -> BTreeSet<String> {
    schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn seal_bodies_and_envelopes_have_exactly_the_schema_fields() {
    let store = fresh(Kind::Sqlite).await;
    fill_stream(&store.log, "tally", "s", 2).await;
    let key = agon::crypto::signing::SealKey::load_or_create(None, store.dir.path()).unwrap();
    let seal = store.log.seal_now(&key).await.unwrap().unwrap();
    let body = serde_json::to_value(&seal).unwrap();
    let seal_schema = schema("seal.v1.json");
    assert_eq!(keys(&body), required(&seal_schema));
    assert_eq!(keys(&body), keys(&seal_schema["properties"]));
    assert_eq!(
        keys(&body["from"]),
        required(&seal_schema["$defs"]["cursor"])
    );

    let record = settled_feed(&store.log, 2)
        .await
        .remove(0)
        .into_record()
        .unwrap();
    assert!(record.cursor > Cursor::START);
    let envelope = serde_json::to_value(&record).unwrap();
    let envelope_schema = schema("envelope.v1.json");
    assert_eq!(keys(&envelope), required(&envelope_schema));
    assert_eq!(keys(&envelope), keys(&envelope_schema["properties"]));
    for field in required(&envelope_schema["properties"]["metadata"]) {
        assert!(
            envelope["metadata"].get(&field).is_some(),
            "metadata lacks {field}"
        );
    }
}

// Event payloads: `event-schemas/<aggregate_type>/<event_type>.v<version>.json`.

/// The aggregate types whose payloads have published schemas, one folder each.
const EVENT_SCHEMA_DIRS: [&str; 3] = ["account", "organization", "email"];

const USER: &str = "0b3f5c1e-8d2a-4c7e-9f10-2a6b7c8d9e0f";
const ADMIN: &str = "6a1d2e3f-4b5c-4d6e-8f70-8192a3b4c5d6";
const SESSION: &str = "c4d5e6f7-0819-4a2b-8c3d-4e5f60718293";
const ORG: &str = "9e8d7c6b-5a49-4382-a716-05f4e3d2c1b0";
const INVITE: &str = "1f2e3d4c-5b6a-4798-8a7b-6c5d4e3f2a1b";
const PASSWORD_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$uJ2Y2xvZ2luZ3Bhc3N3b3JkaGFzaGhhc2g";

/// One event as stored: its stream type, names and serialized payload.
struct Sample {
    aggregate_type: &'static str,
    /// From the exhaustive `*_variant` helper, not from the event's own code.
    variant: &'static str,
    event_type: String,
    event_version: String,
    payload: Value,
}

impl Sample {
    fn new<E: DomainEvent>(aggregate_type: &'static str, variant: &'static str, event: &E) -> Self {
        Sample {
            aggregate_type,
            variant,
            event_type: event.event_type(),
            event_version: event.event_version(),
            payload: serde_json::to_value(event).unwrap(),
        }
    }

    fn file(&self) -> String {
        format!(
            "{}/{}.v{}.json",
            self.aggregate_type, self.event_type, self.event_version
        )
    }
}

// The variant names. These matches are exhaustive on purpose: a new variant
// does not compile until it is named here, and then needs a sample below.

fn account_variant(event: &AccountEvent) -> &'static str {
    use AccountEvent as E;
    match event {
        E::Registered { .. } => "Registered",
        E::VerificationIssued { .. } => "VerificationIssued",
        E::EmailVerified { .. } => "EmailVerified",
        E::LoginFailed { .. } => "LoginFailed",
        E::AccountUnlocked { .. } => "AccountUnlocked",
        E::LoginSucceeded { .. } => "LoginSucceeded",
        E::SessionStarted { .. } => "SessionStarted",
        E::SessionRefreshed { .. } => "SessionRefreshed",
        E::SessionRevoked { .. } => "SessionRevoked",
        E::PasswordChanged { .. } => "PasswordChanged",
        E::MfaSetupStarted { .. } => "MfaSetupStarted",
        E::MfaEnabled { .. } => "MfaEnabled",
        E::MfaDisabled { .. } => "MfaDisabled",
        E::MfaReset { .. } => "MfaReset",
        E::ApiKeyCreated { .. } => "ApiKeyCreated",
        E::ApiKeyRevoked { .. } => "ApiKeyRevoked",
        E::UserDisabled { .. } => "UserDisabled",
        E::RoleChanged { .. } => "RoleChanged",
        E::JoinedOrganization { .. } => "JoinedOrganization",
    }
}

fn organization_variant(event: &OrganizationEvent) -> &'static str {
    use OrganizationEvent as E;
    match event {
        E::OrganizationCreated { .. } => "OrganizationCreated",
        E::MemberInvited { .. } => "MemberInvited",
        E::InviteAccepted { .. } => "InviteAccepted",
    }
}

fn email_variant(event: &EmailClaimEvent) -> &'static str {
    match event {
        EmailClaimEvent::EmailClaimed { .. } => "EmailClaimed",
    }
}

fn debate_variant(event: &DebateEvent) -> &'static str {
    use DebateEvent as E;
    match event {
        E::DebateCreated { .. } => "DebateCreated",
        E::DebateStarted { .. } => "DebateStarted",
        E::MessageRecorded { .. } => "MessageRecorded",
        E::AgentFailed { .. } => "AgentFailed",
        E::SynthesisDrafted { .. } => "SynthesisDrafted",
        E::VoteCast { .. } => "VoteCast",
        E::ConsensusComputed { .. } => "ConsensusComputed",
        E::DebateCompleted { .. } => "DebateCompleted",
        E::DebateFailed { .. } => "DebateFailed",
        E::CheckpointCreated { .. } => "CheckpointCreated",
        E::DebatePaused { .. } => "DebatePaused",
        E::DebateResumed { .. } => "DebateResumed",
    }
}

// Every value of the enums inside events, so that each value a schema lists
// shows up in a sample. Exhaustive for the same reason as above.

fn every_role() -> [Role; 2] {
    let all = [Role::User, Role::Admin];
    for role in all {
        match role {
            Role::User | Role::Admin => {}
        }
    }
    all
}

fn every_failure_reason() -> [FailureReason; 2] {
    use FailureReason as R;
    let all = [R::Password, R::SecondFactor];
    for reason in all {
        match reason {
            R::Password | R::SecondFactor => {}
        }
    }
    all
}

/// Each login method with a second factor that goes with it.
fn every_login_method() -> [(LoginMethod, Option<SecondFactor>); 3] {
    use LoginMethod as M;
    let all = [
        (M::Password, None),
        (
            M::PasswordAndTotp,
            Some(SecondFactor::Totp { step: 60_000_000 }),
        ),
        (
            M::PasswordAndBackupCode,
            Some(SecondFactor::BackupCode {
                code_hash: sha256_hex(&format!("{USER}:ABCDE-FGHJK")),
            }),
        ),
    ];
    for (method, factor) in &all {
        match method {
            M::Password | M::PasswordAndTotp | M::PasswordAndBackupCode => {}
        }
        match factor {
            None | Some(SecondFactor::Totp { .. } | SecondFactor::BackupCode { .. }) => {}
        }
    }
    all
}

fn every_revoke_reason() -> [RevokeReason; 9] {
    use RevokeReason as R;
    let all = [
        R::Logout,
        R::Deleted,
        R::OthersRevoked,
        R::Evicted,
        R::PasswordChanged,
        R::Disabled,
        R::AdminRevokeAll,
        R::RefreshReuse,
        R::Inactive,
    ];
    for reason in all {
        match reason {
            R::Logout
            | R::Deleted
            | R::OthersRevoked
            | R::Evicted
            | R::PasswordChanged
            | R::Disabled
            | R::AdminRevokeAll
            | R::RefreshReuse
            | R::Inactive => {}
        }
    }
    all
}

fn every_key_revoke_reason() -> [KeyRevokeReason; 4] {
    use KeyRevokeReason as R;
    let all = [R::Revoked, R::Replaced, R::Disabled, R::AdminRevokeAll];
    for reason in all {
        match reason {
            R::Revoked | R::Replaced | R::Disabled | R::AdminRevokeAll => {}
        }
    }
    all
}

fn every_org_role() -> [OrgRole; 4] {
    use OrgRole as R;
    let all = [R::Owner, R::Admin, R::Member, R::Viewer];
    for role in all {
        match role {
            R::Owner | R::Admin | R::Member | R::Viewer => {}
        }
    }
    all
}

fn every_vote_choice() -> [VoteChoice; 3] {
    use VoteChoice as C;
    let all = [C::Agree, C::AgreeWithModifications, C::Disagree];
    for choice in all {
        match choice {
            C::Agree | C::AgreeWithModifications | C::Disagree => {}
        }
    }
    all
}

fn every_consensus_mode() -> [ConsensusMode; 5] {
    use ConsensusMode as M;
    let all = [
        M::Majority,
        M::Supermajority,
        M::Unanimous,
        M::Judge,
        M::Weighted,
    ];
    for mode in all {
        match mode {
            M::Majority | M::Supermajority | M::Unanimous | M::Judge | M::Weighted => {}
        }
    }
    all
}

fn at(minute: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2027, 1, 15, 8, minute, 0).unwrap()
}

fn account_samples() -> Vec<AccountEvent> {
    use AccountEvent as E;
    let mut events = Vec::new();
    for role in every_role() {
        events.push(E::Registered {
            user_id: USER.to_owned(),
            email: "ada@example.com".to_owned(),
            name: "Ada Lovelace".to_owned(),
            password_hash: PASSWORD_HASH.to_owned(),
            role,
            email_verified: role == Role::Admin,
            at: at(0),
        });
    }
    events.push(E::VerificationIssued {
        token_hash: sha256_hex("verification token"),
        expires_at: at(59),
        at: at(1),
    });
    events.push(E::EmailVerified { at: at(2) });
    for (reason, locked_until) in every_failure_reason().into_iter().zip([None, Some(at(4))]) {
        events.push(E::LoginFailed {
            reason,
            failed_login_count: if locked_until.is_some() { 5 } else { 1 },
            locked_until,
            at: at(3),
        });
    }
    events.push(E::AccountUnlocked {
        by: ADMIN.to_owned(),
        at: at(5),
    });
    for (method, second_factor) in every_login_method() {
        events.push(E::LoginSucceeded {
            session_id: SESSION.to_owned(),
            method,
            second_factor,
            at: at(6),
        });
    }
    for ip in [Some("203.0.113.7".to_owned()), None] {
        events.push(E::SessionStarted {
            session_id: SESSION.to_owned(),
            device: Device {
                device_type: "desktop".to_owned(),
                browser: "Firefox".to_owned(),
                ip,
            },
            refresh_expires_at: at(50),
            at: at(6),
        });
    }
    events.push(E::SessionRefreshed {
        session_id: SESSION.to_owned(),
        generation: 1,
        refresh_expires_at: at(55),
        at: at(7),
    });
    for reason in every_revoke_reason() {
        events.push(E::SessionRevoked {
            session_id: SESSION.to_owned(),
            reason,
            at: at(8),
        });
    }
    events.push(E::PasswordChanged {
        password_hash: PASSWORD_HASH.to_owned(),
        at: at(9),
    });
    let cipher = FieldCipher::parse(&"11".repeat(32)).unwrap();
    let totp_secret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP";
    for secret in [cipher.encrypt(totp_secret), json!(totp_secret)] {
        events.push(E::MfaSetupStarted { secret, at: at(10) });
    }
    events.push(E::MfaEnabled {
        backup_code_hashes: (0..10)
            .map(|n| sha256_hex(&format!("{USER}:ABCDE-FGHJ{n}")))
            .collect(),
        totp_step: 60_000_001,
        at: at(11),
    });
    events.push(E::MfaDisabled { at: at(12) });
    events.push(E::MfaReset {
        by: ADMIN.to_owned(),
        at: at(13),
    });
    let (_, key) = new_api_key();
    events.push(E::ApiKeyCreated {
        key_id: key.key_id.clone(),
        key_hash: sha256_hex(&key.secret),
        at: at(14),
    });
    for reason in every_key_revoke_reason() {
        events.push(E::ApiKeyRevoked {
            key_id: key.key_id.clone(),
            reason,
            at: at(15),
        });
    }
    events.push(E::UserDisabled {
        by: ADMIN.to_owned(),
        at: at(16),
    });
    for role in every_role() {
        events.push(E::RoleChanged {
            role,
            by: ADMIN.to_owned(),
            at: at(17),
        });
    }
    for role in every_org_role() {
        events.push(E::JoinedOrganization {
            org_id: ORG.to_owned(),
            org_role: role.as_str().to_owned(),
            at: at(18),
        });
    }
    events
}

fn organization_samples() -> Vec<OrganizationEvent> {
    use OrganizationEvent as E;
    let mut events = vec![E::OrganizationCreated {
        org_id: ORG.to_owned(),
        name: "Analytical Engines".to_owned(),
        owner_id: USER.to_owned(),
        at: at(20),
    }];
    // The owner's role is not granted by invitation.
    for role in every_org_role()
        .into_iter()
        .filter(|r| *r != OrgRole::Owner)
    {
        events.push(E::MemberInvited {
            invite_id: INVITE.to_owned(),
            email: "charles@example.com".to_owned(),
            role,
            token_hash: sha256_hex("invitation token"),
            expires_at: at(59),
            invited_by: USER.to_owned(),
            at: at(21),
        });
        events.push(E::InviteAccepted {
            invite_id: INVITE.to_owned(),
            user_id: ADMIN.to_owned(),
            role,
            at: at(22),
        });
    }
    events
}

fn email_samples() -> Vec<EmailClaimEvent> {
    vec![EmailClaimEvent::EmailClaimed {
        user_id: USER.to_owned(),
    }]
}

const DEBATE: &str = "01947a2b-3c4d-7e5f-8a6b-7c8d9e0f1a2b";
const AGENTS: [&str; 3] = ["claude", "gpt-4o", "gemini"];

fn usage(fallback: bool) -> Usage {
    Usage {
        provider: if fallback { "openrouter" } else { "anthropic" }.to_owned(),
        model: "claude-sonnet-4-5".to_owned(),
        tokens_in: 1_200,
        tokens_out: 350,
        latency_ms: 2_400,
        fallback,
    }
}

fn ballot(agent: &str, choice: VoteChoice, confidence: f64) -> Ballot {
    Ballot {
        agent: agent.to_owned(),
        choice,
        confidence,
        reasons: vec![format!("{agent} weighed the trade-offs")],
        modifications: vec!["Mention compile times".to_owned()],
    }
}

/// Real results of `decide`: every mode over ballots that between them give
/// each status, baseline choice, and a null and a named judge.
fn consensus_samples() -> Vec<DebateEvent> {
    use VoteChoice as C;
    let [claude, gpt, gemini] = AGENTS;
    let ballot_sets = [
        // A three-way tie: the baseline takes disagree, yet agrees by 2 to 1.
        vec![
            ballot(claude, C::Agree, 0.9),
            ballot(gpt, C::AgreeWithModifications, 0.7),
            ballot(gemini, C::Disagree, 0.8),
        ],
        vec![ballot(claude, C::Agree, 0.9), ballot(gpt, C::Agree, 0.6)],
        vec![ballot(gpt, C::AgreeWithModifications, 0.5)],
        vec![
            ballot(claude, C::Disagree, 0.4),
            ballot(gpt, C::Disagree, 0.7),
            ballot(gemini, C::Agree, 1.0),
        ],
    ];
    let ratings: BTreeMap<String, f64> = [(claude, 1650.0), (gpt, 1500.0), (gemini, 1420.0)]
        .map(|(agent, elo)| (agent.to_owned(), elo))
        .into();
    let key_points = vec!["Ownership prevents data races".to_owned()];
    let mut events = Vec::new();
    for mode in every_consensus_mode() {
        for votes in &ballot_sets {
            let failed: Vec<String> = AGENTS
                .iter()
                .filter(|agent| !votes.iter().any(|b| b.agent == **agent))
                .map(|agent| (*agent).to_owned())
                .collect();
            let result = decide(Tally {
                votes,
                mode,
                threshold: 0.6,
                judge: Some(gemini),
                ratings: &ratings,
                summary: "Rust is fun once the borrow checker clicks.",
                key_points: &key_points,
                failed_agents: &failed,
            });
            events.push(DebateEvent::ConsensusComputed { result, at: at(40) });
        }
    }
    events
}

fn debate_samples() -> Vec<DebateEvent> {
    use DebateEvent as E;
    let agents: Vec<String> = AGENTS.iter().map(|a| (*a).to_owned()).collect();
    let mut events = Vec::new();
    for (index, consensus) in every_consensus_mode().into_iter().enumerate() {
        let known = index % 2 == 0;
        events.push(E::DebateCreated {
            debate_id: DEBATE.to_owned(),
            topic: "Is Rust fun?".to_owned(),
            context: known.then(|| "For a team new to systems programming.".to_owned()),
            agents: agents.clone(),
            protocol: Protocol {
                phases: ["opening", "critique", "revision", "vote"]
                    .map(str::to_owned)
                    .to_vec(),
                rounds: 3,
                consensus,
                threshold: 0.6,
                judge: (consensus == ConsensusMode::Judge).then(|| AGENTS[2].to_owned()),
            },
            created_by: known.then(|| USER.to_owned()),
            org_id: known.then(|| ORG.to_owned()),
            at: at(30),
        });
    }
    events.push(E::DebateStarted { at: at(31) });
    for (phase, fallback, targets) in [
        ("opening", false, vec![]),
        ("critique", true, agents[1..].to_vec()),
    ] {
        events.push(E::MessageRecorded {
            round: 1,
            phase: phase.to_owned(),
            agent: AGENTS[0].to_owned(),
            content: "Rust's ownership model makes whole classes of bugs impossible.".to_owned(),
            targets,
            usage: usage(fallback),
            at: at(32),
        });
    }
    events.push(E::AgentFailed {
        round: 1,
        phase: "critique".to_owned(),
        agent: AGENTS[2].to_owned(),
        code: "timeout".to_owned(),
        error: "no answer within 60 s".to_owned(),
        at: at(33),
    });
    events.push(E::SynthesisDrafted {
        agent: AGENTS[0].to_owned(),
        summary: "Rust is fun once the borrow checker clicks.".to_owned(),
        key_points: vec!["Ownership prevents data races".to_owned()],
        usage: usage(false),
        at: at(34),
    });
    for choice in every_vote_choice() {
        let vote = ballot(AGENTS[1], choice, 0.75);
        events.push(E::VoteCast {
            agent: vote.agent,
            choice,
            confidence: vote.confidence,
            reasons: vote.reasons,
            modifications: vote.modifications,
            usage: usage(true),
            at: at(35),
        });
    }
    events.extend(consensus_samples());
    events.push(E::DebateCompleted { at: at(41) });
    events.push(E::DebateFailed {
        reason: "every agent failed: claude (timeout: no answer within 60 s)".to_owned(),
        at: at(41),
    });
    events.push(E::CheckpointCreated {
        checkpoint_id: "c0a80101-0000-7000-8000-000000000001".to_owned(),
        round: 2,
        phase: "critique".to_owned(),
        messages: 7,
        at: at(36),
    });
    events.push(E::DebatePaused {
        checkpoint_id: "c0a80101-0000-7000-8000-000000000001".to_owned(),
        at: at(36),
    });
    events.push(E::DebateResumed { at: at(37) });
    events
}

fn event_samples() -> Vec<Sample> {
    let mut samples = Vec::new();
    for event in account_samples() {
        samples.push(Sample::new("account", account_variant(&event), &event));
    }
    for event in organization_samples() {
        samples.push(Sample::new(
            "organization",
            organization_variant(&event),
            &event,
        ));
    }
    for event in email_samples() {
        samples.push(Sample::new("email", email_variant(&event), &event));
    }
    samples
}

/// What a walk of samples against one schema file saw: the values met at each
/// `enum` and the `oneOf` branches taken, by schema location.
#[derive(Default)]
struct Seen {
    enums: BTreeMap<String, BTreeSet<String>>,
    branches: BTreeSet<String>,
}

impl Seen {
    fn merge(&mut self, other: Seen) {
        for (at, values) in other.enums {
            self.enums.entry(at).or_default().extend(values);
        }
        self.branches.extend(other.branches);
    }
}

/// The keywords the schemas use and `conforms` checks; any other is refused
/// so that no constraint is silently skipped.
const KEYWORDS: [&str; 16] = [
    "$schema",
    "$id",
    "title",
    "description",
    "type",
    "enum",
    "const",
    "format",
    "minimum",
    "maximum",
    "pattern",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "oneOf",
];

/// Checks `value` (at `field`, a dotted path for messages) against the subset
/// of JSON Schema 2020-12 that the event schemas use, recording into `seen`
/// under the schema location `at`.
fn conforms(
    value: &Value,
    schema: &Value,
    field: &str,
    at: &str,
    seen: &mut Seen,
) -> Result<(), String> {
    let schema = schema
        .as_object()
        .ok_or_else(|| format!("{at}: schema is not an object"))?;
    if let Some(keyword) = schema.keys().find(|k| !KEYWORDS.contains(&k.as_str())) {
        return Err(format!(
            "{at}: keyword {keyword} is not checked by this test"
        ));
    }
    if let Some(types) = schema.get("type") {
        let types: Vec<&str> = match types {
            Value::Array(types) => types.iter().filter_map(Value::as_str).collect(),
            other => other.as_str().into_iter().collect(),
        };
        let actual = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        // An integer is also a JSON Schema number.
        let number = actual == "integer" && types.contains(&"number");
        if !types.contains(&actual) && !number {
            return Err(format!(
                "field {field}: {value} is of type {actual}, but the schema's type is {types:?}"
            ));
        }
    }
    if let Some(allowed) = schema.get("enum") {
        if !allowed.as_array().unwrap().contains(value) {
            return Err(format!(
                "field {field}: {value} is not one of the schema's enum {allowed}"
            ));
        }
        seen.enums
            .entry(at.to_owned())
            .or_default()
            .insert(value.to_string());
    }
    if let Some(constant) = schema.get("const")
        && constant != value
    {
        return Err(format!(
            "field {field}: {value} is not the schema's const {constant}"
        ));
    }
    if let (Some(format), Value::String(text)) = (schema.get("format"), value) {
        if format != "date-time" {
            return Err(format!("{at}: format {format} is not checked by this test"));
        }
        DateTime::parse_from_rfc3339(text)
            .map_err(|e| format!("field {field}: {text:?} is not an RFC 3339 date-time: {e}"))?;
    }
    if let (Some(minimum), Value::Number(n)) = (schema.get("minimum"), value)
        && n.as_f64() < minimum.as_f64()
    {
        return Err(format!("field {field}: {n} is below the minimum {minimum}"));
    }
    if let (Some(maximum), Value::Number(n)) = (schema.get("maximum"), value)
        && n.as_f64() > maximum.as_f64()
    {
        return Err(format!("field {field}: {n} is above the maximum {maximum}"));
    }
    if let (Some(pattern), Value::String(text)) = (schema.get("pattern"), value) {
        let pattern = pattern.as_str().unwrap();
        let length: usize = pattern
            .strip_prefix("^[0-9a-f]{")
            .and_then(|rest| rest.strip_suffix("}$"))
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("{at}: pattern {pattern} is not checked by this test"))?;
        let lower_hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
        if text.chars().count() != length || !text.chars().all(lower_hex) {
            return Err(format!("field {field}: {text:?} does not match {pattern}"));
        }
    }
    if let Value::Object(object) = value {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for name in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(name) {
                    return Err(format!("field {field}.{name}: required but missing"));
                }
            }
        }
        // `false` closes the object; a schema is that of a map's values.
        if let Some(additional) = schema.get("additionalProperties") {
            let extra = object
                .iter()
                .filter(|(name, _)| !properties.is_some_and(|p| p.contains_key(*name)));
            for (name, inner) in extra {
                match additional {
                    Value::Bool(false) => {
                        return Err(format!(
                            "field {field}.{name}: not in the schema's properties"
                        ));
                    }
                    Value::Object(_) => conforms(
                        inner,
                        additional,
                        &format!("{field}.{name}"),
                        &format!("{at}/additionalProperties"),
                        seen,
                    )?,
                    _ => {
                        return Err(format!(
                            "{at}: additionalProperties must be false or a schema"
                        ));
                    }
                }
            }
        }
        for (name, property) in properties.into_iter().flatten() {
            if let Some(inner) = object.get(name) {
                let field = format!("{field}.{name}");
                conforms(
                    inner,
                    property,
                    &field,
                    &format!("{at}/properties/{name}"),
                    seen,
                )?;
            }
        }
    }
    if let (Some(items), Value::Array(values)) = (schema.get("items"), value) {
        for (index, item) in values.iter().enumerate() {
            conforms(
                item,
                items,
                &format!("{field}[{index}]"),
                &format!("{at}/items"),
                seen,
            )?;
        }
    }
    if let Some(branches) = schema.get("oneOf") {
        let mut matched = Vec::new();
        let mut errors = Vec::new();
        for (index, branch) in branches.as_array().unwrap().iter().enumerate() {
            let branch_at = format!("{at}/oneOf/{index}");
            let mut branch_seen = Seen::default();
            match conforms(value, branch, field, &branch_at, &mut branch_seen) {
                Ok(()) => matched.push((branch_at, branch_seen)),
                Err(e) => errors.push(e),
            }
        }
        if matched.len() != 1 {
            return Err(format!(
                "field {field}: {value} matches {} of the schema's oneOf branches, not 1 ({errors:?})",
                matched.len()
            ));
        }
        let (branch_at, branch_seen) = matched.remove(0);
        seen.branches.insert(branch_at);
        seen.merge(branch_seen);
    }
    Ok(())
}

/// Every `enum` (with its values) and `oneOf` branch in `schema`, by location;
/// also insists that each property says what it means.
fn schema_locations(
    schema: &Value,
    at: &str,
    enums: &mut BTreeMap<String, BTreeSet<String>>,
    branches: &mut BTreeSet<String>,
) -> Result<(), String> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        enums.insert(at.to_owned(), values.iter().map(Value::to_string).collect());
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            let description = property["description"].as_str().unwrap_or_default();
            if description.trim().is_empty() || description.contains('\n') {
                return Err(format!(
                    "{at}/properties/{name}: needs a one-line description"
                ));
            }
            schema_locations(
                property,
                &format!("{at}/properties/{name}"),
                enums,
                branches,
            )?;
        }
    }
    if let Some(items) = schema.get("items") {
        schema_locations(items, &format!("{at}/items"), enums, branches)?;
    }
    if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        schema_locations(
            values,
            &format!("{at}/additionalProperties"),
            enums,
            branches,
        )?;
    }
    for (index, branch) in schema["oneOf"].as_array().into_iter().flatten().enumerate() {
        let branch_at = format!("{at}/oneOf/{index}");
        schema_locations(branch, &branch_at, enums, branches)?;
        branches.insert(branch_at);
    }
    Ok(())
}

#[test]
fn every_account_event_matches_its_schema() {
    check_event_schemas(&event_samples(), &EVENT_SCHEMA_DIRS);
}

#[test]
fn every_debate_event_matches_its_schema() {
    let samples: Vec<Sample> = debate_samples()
        .iter()
        .map(|event| Sample::new("debate", debate_variant(event), event))
        .collect();
    check_event_schemas(&samples, &["debate"]);
}

/// Checks each sample against its schema file, then that every schema file in
/// `dirs` is met by some sample, with each of its enum values and oneOf branches.
fn check_event_schemas(samples: &[Sample], dirs: &[&str]) {
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    for sample in samples {
        let event = format!("{} {}", sample.aggregate_type, sample.event_type);
        assert_eq!(
            sample.event_type, sample.variant,
            "{event}: event_type() differs from the variant name {}",
            sample.variant
        );
        let file = sample.file();
        let path = format!("{}/event-schemas/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{event}: no schema at event-schemas/{file}: {e}"));
        let schema: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{event}: event-schemas/{file} is not JSON: {e}"));
        assert_eq!(
            schema["$id"],
            format!("agon/{file}"),
            "{event}: $id of event-schemas/{file}"
        );

        // One key, the event type, in the payload and in the schema.
        let payload_keys = keys(&sample.payload);
        let expected = BTreeSet::from([sample.event_type.clone()]);
        assert_eq!(payload_keys, expected, "{event}: payload's single key");
        assert_eq!(
            required(&schema),
            expected,
            "{event}: schema's required key"
        );
        assert_eq!(
            keys(&schema["properties"]),
            expected,
            "{event}: schema's property"
        );

        // The event's fields are exactly the required and the listed ones.
        let fields = &sample.payload[&sample.event_type];
        let fields_schema = &schema["properties"][&sample.event_type];
        assert_eq!(
            keys(fields),
            required(fields_schema),
            "{event}: fields vs the schema's required"
        );
        assert_eq!(
            keys(fields),
            keys(&fields_schema["properties"]),
            "{event}: fields vs the schema's properties"
        );

        // Types, enum values, formats and nested objects.
        let mut walk = Seen::default();
        if let Err(e) = conforms(&sample.payload, &schema, "payload", "#", &mut walk) {
            panic!("{event}: {e}\npayload: {}", sample.payload);
        }
        seen.entry(file).or_default().merge(walk);
    }

    // Every schema belongs to an event built above, and every value an enum
    // lists and every oneOf branch is met by some sample.
    let root = format!("{}/event-schemas", env!("CARGO_MANIFEST_DIR"));
    for dir in dirs {
        for entry in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if !name.ends_with(".json") {
                continue;
            }
            let file = format!("{dir}/{name}");
            let Some(met) = seen.get(&file) else {
                panic!(
                    "event-schemas/{file} matches no event variant: stale, or a sample is missing"
                );
            };
            let schema: Value =
                serde_json::from_str(&std::fs::read_to_string(format!("{root}/{file}")).unwrap())
                    .unwrap();
            let mut enums = BTreeMap::new();
            let mut branches = BTreeSet::new();
            if let Err(e) = schema_locations(&schema, "#", &mut enums, &mut branches) {
                panic!("event-schemas/{file}: {e}");
            }
            for (at, values) in enums {
                let met = met.enums.get(&at).cloned().unwrap_or_default();
                let unmet: Vec<&str> = values.difference(&met).map(String::as_str).collect();
                assert!(
                    unmet.is_empty(),
                    "event-schemas/{file} {at}: enum values {} occur in no sample: stale, or a sample is missing",
                    unmet.join(", ")
                );
            }
            let untaken: Vec<&str> = branches
                .difference(&met.branches)
                .map(String::as_str)
                .collect();
            assert!(
                untaken.is_empty(),
                "event-schemas/{file}: no sample takes the oneOf branches {}",
                untaken.join(", ")
            );
        }
    }
}
