//! Given/when/then tests of the Account aggregate: shared givens here,
//! sign-in and sessions in [`sign_in`], second factors and verification in
//! [`factors`], API keys in [`keys`], reserved checks in [`attempts`], erasure in [`erasure`],
//! provider identities in [`identities`].

use chrono::{DateTime, Duration, TimeZone, Utc};
use cqrs_es::test::TestFramework;
use serde_json::json;

use super::*;

mod attempts;
mod erasure;
mod factors;
mod identities;
mod keys;
mod sign_in;

pub(super) type Given = TestFramework<Account>;

pub(super) fn t(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000, 0)
        .single()
        .unwrap_or_default()
        + Duration::seconds(seconds)
}

pub(super) fn registered() -> AccountEvent {
    AccountEvent::Registered {
        user_id: "u1".to_owned(),
        email: "ada@example.com".to_owned(),
        name: "Ada".to_owned(),
        email_index: None,
        password_hash: "$argon2id$old".to_owned(),
        role: Role::User,
        email_verified: false,
        at: t(0),
    }
}

pub(super) fn failure(count: u32, at: i64) -> AccountEvent {
    AccountEvent::LoginFailed {
        reason: FailureReason::Password,
        failed_login_count: count,
        locked_until: lock_seconds(count).map(|s| t(at) + Duration::seconds(s)),
        at: t(at),
    }
}

pub(super) fn started(id: &str, at: i64) -> AccountEvent {
    AccountEvent::SessionStarted {
        session_id: id.to_owned(),
        device: Device::default(),
        refresh_expires_at: t(at + 604_800),
        at: t(at),
    }
}

pub(super) fn login(id: &str, at: i64, second_factor: Option<SecondFactor>) -> AccountCommand {
    AccountCommand::Login {
        session_id: id.to_owned(),
        device: Device::default(),
        second_factor,
        step_token: None,
        attempt: None,
        max_sessions: 10,
        refresh_expires_at: t(at + 604_800),
        via: None,
        at: t(at),
    }
}

pub(super) fn mfa_on() -> Vec<AccountEvent> {
    vec![
        AccountEvent::MfaSetupStarted {
            secret: json!({"_encrypted": true}),
            at: t(1),
        },
        AccountEvent::MfaEnabled {
            backup_code_hashes: vec!["b1".to_owned(), "b2".to_owned()],
            totp_step: 100,
            at: t(2),
        },
    ]
}

pub(super) fn replay(events: Vec<AccountEvent>) -> Account {
    let mut account = Account::default();
    for event in events {
        cqrs_es::Aggregate::apply(&mut account, event);
    }
    account
}
