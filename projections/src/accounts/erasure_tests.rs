//! The account document after an erasure, and old plaintext registrations.

use agon_aggregates::account::{AccountEvent, ERASED, Role};
use chrono::{TimeZone, Utc};

use super::tests::{account, fold};
use super::{Accounts, DocumentProjection};

fn registered(email: &str, name: &str, email_index: Option<&str>) -> AccountEvent {
    AccountEvent::Registered {
        user_id: "u1".to_owned(),
        email: email.to_owned(),
        name: name.to_owned(),
        email_index: email_index.map(str::to_owned),
        password_hash: "h".to_owned(),
        role: Role::User,
        email_verified: false,
        at: Utc
            .timestamp_opt(1_800_000_000, 0)
            .single()
            .unwrap_or_default(),
    }
}

#[test]
fn an_erased_account_keeps_its_document_without_personal_data() {
    let sealed = "agon:sealed:u1:bm9uY2U:Y2lwaGVy";
    let erased = AccountEvent::Erased {
        by: "u1".to_owned(),
        at: Utc::now(),
    };
    let mut first = account("u1", 1, registered(sealed, sealed, Some("ix")));
    (first.event_type, first.event_version) = ("Registered".to_owned(), "2".to_owned());
    let events = [first, account("u1", 2, erased)];
    let before = fold::<Accounts>(&events[..1]).unwrap_or_else(|| panic!("no document"));
    assert_eq!(before.email, sealed);
    assert_eq!(before.email_index.as_deref(), Some("ix"));
    let after = fold::<Accounts>(&events).unwrap_or_else(|| panic!("no document"));
    assert!(after.erased);
    assert_eq!(
        (after.email.as_str(), after.name.as_str()),
        (ERASED, ERASED)
    );
    assert_eq!(after.email_index, None);
    assert_eq!(Accounts::owner(&after).as_deref(), Some("u1"));
}

#[test]
fn a_plaintext_registration_of_before_sealing_still_folds() {
    let mut record = account("u1", 1, registered("ada@example.com", "Ada", None));
    (record.event_type, record.event_version) = ("Registered".to_owned(), "1".to_owned());
    if let Some(fields) = record
        .payload
        .get_mut("Registered")
        .and_then(serde_json::Value::as_object_mut)
    {
        fields.remove("email_index");
    }
    let view = fold::<Accounts>(&[record]).unwrap_or_else(|| panic!("no document"));
    assert_eq!(
        (view.email.as_str(), view.name.as_str()),
        ("ada@example.com", "Ada")
    );
    assert!(!view.erased && view.email_index.is_none());
}
