//! Account, organization and email-claim event payloads against their
//! schemas: a sample of every variant, with every value of the enums inside.

use agon::crypto::fields::FieldCipher;
use agon::crypto::secrets::{new_api_key, sha256_hex};
use agon::crypto::subject_keys::DataKey;
use agon_aggregates::account::{
    AccountEvent, Device, FailureReason, KeyRevokeReason, LoginMethod, ProviderRefusal,
    RevokeReason, Role, SecondFactor,
};
use agon_aggregates::email_claim::EmailClaimEvent;
use agon_aggregates::identity_claim::IdentityClaimEvent;
use agon_aggregates::organization::{OrgRole, OrganizationEvent};
use serde_json::json;

use super::{ORG, Sample, USER, at, check_event_schemas};

/// The aggregate types whose payloads have published schemas, one folder each.
const EVENT_SCHEMA_DIRS: [&str; 4] = ["account", "organization", "email", "identity"];

const ADMIN: &str = "6a1d2e3f-4b5c-4d6e-8f70-8192a3b4c5d6";
const SESSION: &str = "c4d5e6f7-0819-4a2b-8c3d-4e5f60718293";
const INVITE: &str = "1f2e3d4c-5b6a-4798-8a7b-6c5d4e3f2a1b";
const PASSWORD_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$uJ2Y2xvZ2luZ3Bhc3N3b3JkaGFzaGhhc2g";

#[test]
fn every_account_event_matches_its_schema() {
    check_event_schemas(&event_samples(), &EVENT_SCHEMA_DIRS);
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
        E::AttemptStarted { .. } => "AttemptStarted",
        E::AttemptEnded { .. } => "AttemptEnded",
        E::ReauthFailed { .. } => "ReauthFailed",
        E::MfaTokenSpent { .. } => "MfaTokenSpent",
        E::UserEnabled { .. } => "UserEnabled",
        E::NamedApiKeyCreated { .. } => "NamedApiKeyCreated",
        E::Erased { .. } => "Erased",
        E::IdentityLinked { .. } => "IdentityLinked",
        E::IdentityUnlinked { .. } => "IdentityUnlinked",
        E::ProviderLoginSucceeded { .. } => "ProviderLoginSucceeded",
        E::ProviderLoginRefused { .. } => "ProviderLoginRefused",
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

fn identity_variant(event: &IdentityClaimEvent) -> &'static str {
    match event {
        IdentityClaimEvent::IdentityClaimed { .. } => "IdentityClaimed",
        IdentityClaimEvent::IdentityReleased { .. } => "IdentityReleased",
    }
}

fn every_provider_refusal() -> [ProviderRefusal; 3] {
    use ProviderRefusal as R;
    let all = [R::Disabled, R::Locked, R::NotAuthorized];
    for reason in all {
        match reason {
            R::Disabled | R::Locked | R::NotAuthorized => {}
        }
    }
    all
}

fn email_variant(event: &EmailClaimEvent) -> &'static str {
    match event {
        EmailClaimEvent::EmailClaimed { .. } => "EmailClaimed",
        EmailClaimEvent::EmailReleased { .. } => "EmailReleased",
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

fn every_revoke_reason() -> [RevokeReason; 10] {
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
        R::ReauthFailed,
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
            | R::Inactive
            | R::ReauthFailed => {}
        }
    }
    all
}

fn every_key_revoke_reason() -> [KeyRevokeReason; 5] {
    use KeyRevokeReason as R;
    let all = [
        R::Revoked,
        R::Replaced,
        R::Disabled,
        R::AdminRevokeAll,
        R::ReauthFailed,
    ];
    for reason in all {
        match reason {
            R::Revoked | R::Replaced | R::Disabled | R::AdminRevokeAll | R::ReauthFailed => {}
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
fn account_samples() -> Vec<AccountEvent> {
    use AccountEvent as E;
    let mut events = Vec::new();
    let key = DataKey::generate();
    for role in every_role() {
        events.push(E::Registered {
            user_id: USER.to_owned(),
            email: key.seal(USER, "ada@example.com"),
            name: key.seal(USER, "Ada Lovelace"),
            email_index: Some(sha256_hex("the blind index")),
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
    let (_, named) = new_api_key();
    events.push(E::NamedApiKeyCreated {
        key_id: named.key_id.clone(),
        name: "CI runner (eu-west)".to_owned(),
        key_hash: sha256_hex(&named.secret),
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
    for credential in [
        None,
        Some(SESSION.to_owned()),
        Some(format!("api_key:{}", key.key_id)),
    ] {
        events.push(E::AttemptStarted {
            attempt_id: INVITE.to_owned(),
            credential,
            at: at(19),
        });
    }
    events.push(E::AttemptEnded {
        attempt_id: INVITE.to_owned(),
        at: at(19),
    });
    events.push(E::ReauthFailed {
        credential: SESSION.to_owned(),
        failures: 1,
        at: at(19),
    });
    events.push(E::MfaTokenSpent {
        token_id: SESSION.to_owned(),
        expires_at: at(20),
        at: at(19),
    });
    events.push(E::UserEnabled {
        by: ADMIN.to_owned(),
        at: at(19),
    });
    let subject_index = sha256_hex("sso\nada@example.com");
    for (provider, provisioned) in [("sso", true), ("extidp", false)] {
        events.push(E::IdentityLinked {
            provider: provider.to_owned(),
            subject_index: subject_index.clone(),
            provisioned,
            at: at(19),
        });
    }
    events.push(E::IdentityUnlinked {
        provider: "extidp".to_owned(),
        subject_index: subject_index.clone(),
        at: at(19),
    });
    for (_, second_factor) in every_login_method() {
        events.push(E::ProviderLoginSucceeded {
            session_id: SESSION.to_owned(),
            provider: "sso".to_owned(),
            subject_index: subject_index.clone(),
            second_factor,
            at: at(19),
        });
    }
    for reason in every_provider_refusal() {
        events.push(E::ProviderLoginRefused {
            provider: "sso".to_owned(),
            subject_index: subject_index.clone(),
            reason,
            at: at(19),
        });
    }
    events.push(E::Erased {
        by: USER.to_owned(),
        at: at(19),
    });
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
    vec![
        EmailClaimEvent::EmailClaimed {
            user_id: USER.to_owned(),
        },
        EmailClaimEvent::EmailReleased {
            user_id: USER.to_owned(),
        },
    ]
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
    for event in [
        IdentityClaimEvent::IdentityClaimed {
            user_id: USER.to_owned(),
        },
        IdentityClaimEvent::IdentityReleased {
            user_id: USER.to_owned(),
        },
    ] {
        samples.push(Sample::new("identity", identity_variant(&event), &event));
    }
    samples
}
