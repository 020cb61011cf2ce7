//! Erasure: the account ends for every purpose, and its state keeps no
//! personal data.

use super::*;

#[tokio::test]
async fn erasing_ends_sessions_and_keys_and_forgets_the_person() {
    let given = vec![
        registered(),
        started("a", 1),
        AccountEvent::ApiKeyCreated {
            key_id: "k1".to_owned(),
            key_hash: "h".to_owned(),
            at: t(2),
        },
    ];
    let erase = || AccountCommand::Erase {
        by: "u1".to_owned(),
        at: t(3),
    };
    let events = Given::with(())
        .given(given.clone())
        .when_async(erase())
        .await
        .inspect_result();
    let Ok(events) = events else {
        panic!("erasure refused")
    };
    assert!(matches!(
        events.as_slice(),
        [
            AccountEvent::SessionRevoked {
                reason: RevokeReason::Deleted,
                ..
            },
            AccountEvent::ApiKeyRevoked { .. },
            AccountEvent::Erased { .. },
        ]
    ));
    let mut all = given;
    all.extend(events);
    let account = replay(all.clone());
    assert!(!account.exists() && account.erased);
    assert_eq!(
        (account.email.as_str(), account.name.as_str()),
        (ERASED, ERASED)
    );
    assert!(account.password_hash.is_empty());
    assert!(account.sessions.is_empty() && account.api_keys.is_empty());
    // Erasing again changes nothing; signing in finds no account.
    Given::with(())
        .given(all.clone())
        .when_async(erase())
        .await
        .then_expect_events(vec![]);
    Given::with(())
        .given(all)
        .when_async(login("s9", 4, None))
        .await
        .then_expect_error(AccountError::NotRegistered);
}

#[tokio::test]
async fn an_unknown_account_cannot_be_erased() {
    Given::with(())
        .given(vec![])
        .when_async(AccountCommand::Erase {
            by: "admin".to_owned(),
            at: t(1),
        })
        .await
        .then_expect_error(AccountError::NotRegistered);
}
