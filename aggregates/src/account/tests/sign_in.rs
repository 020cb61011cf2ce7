//! Registration, lockout, sessions, refresh, password change, replay.

use super::*;

#[tokio::test]
async fn registering_twice_is_refused() {
    Given::with(())
        .given(vec![registered()])
        .when_async(AccountCommand::Register {
            user_id: "u1".to_owned(),
            email: "agon:sealed:u1:bm9uY2U:Y2lwaGVy".to_owned(),
            name: "agon:sealed:u1:bm9uY2U:bmFtZQ".to_owned(),
            email_index: "ix".to_owned(),
            password_hash: "h".to_owned(),
            role: Role::User,
            email_verified: false,
            identity: None,
            at: t(1),
        })
        .await
        .then_expect_error(AccountError::AlreadyRegistered);
}

#[test]
fn the_lockout_ladder_follows_the_spec() {
    assert_eq!(lock_seconds(4), None);
    assert_eq!(lock_seconds(5), Some(60));
    assert_eq!(lock_seconds(9), Some(60));
    assert_eq!(lock_seconds(10), Some(900));
    assert_eq!(lock_seconds(14), Some(900));
    assert_eq!(lock_seconds(15), Some(3_600));
    assert_eq!(lock_seconds(40), Some(3_600));
}

#[tokio::test]
async fn the_fifth_failure_locks_for_a_minute() {
    let given: Vec<_> = std::iter::once(registered())
        .chain((1..=4).map(|n| failure(n, n.into())))
        .collect();
    Given::with(())
        .given(given)
        .when_async(AccountCommand::RecordLoginFailure {
            attempt: None,
            reason: FailureReason::Password,
            at: t(10),
        })
        .await
        .then_expect_events(vec![AccountEvent::LoginFailed {
            reason: FailureReason::Password,
            failed_login_count: 5,
            locked_until: Some(t(70)),
            at: t(10),
        }]);
}

#[tokio::test]
async fn a_locked_account_names_the_remaining_seconds_and_counts_nothing() {
    let given: Vec<_> = std::iter::once(registered())
        .chain((1..=5).map(|n| failure(n, 10)))
        .collect();
    Given::with(())
        .given(given.clone())
        .when_async(login("s1", 25, None))
        .await
        .then_expect_error(AccountError::Locked {
            remaining_seconds: 45,
        });
    Given::with(())
        .given(given)
        .when_async(AccountCommand::RecordLoginFailure {
            attempt: None,
            reason: FailureReason::Password,
            at: t(69),
        })
        .await
        .then_expect_error_message("Account locked for 1 seconds");
}

#[tokio::test]
async fn the_tenth_failure_locks_for_fifteen_minutes_and_the_fifteenth_for_an_hour() {
    let nine: Vec<_> = std::iter::once(registered())
        .chain((1..=9).map(|n| failure(n, 0)))
        .collect();
    let events = Given::with(())
        .given(nine)
        .when_async(AccountCommand::RecordLoginFailure {
            attempt: None,
            reason: FailureReason::Password,
            at: t(100),
        })
        .await
        .inspect_result();
    assert_eq!(events, Ok(vec![failure(10, 100)]));
    let fourteen: Vec<_> = std::iter::once(registered())
        .chain((1..=14).map(|n| failure(n, 0)))
        .collect();
    let events = Given::with(())
        .given(fourteen)
        .when_async(AccountCommand::RecordLoginFailure {
            attempt: None,
            reason: FailureReason::SecondFactor,
            at: t(1_000),
        })
        .await
        .inspect_result();
    let Ok(events) = events else {
        panic!("failure refused")
    };
    assert!(matches!(
        &events[..],
        [AccountEvent::LoginFailed { failed_login_count: 15, locked_until: Some(until), .. }]
            if *until == t(4_600)
    ));
}

#[tokio::test]
async fn unlock_clears_the_lock_and_the_count() {
    let mut given: Vec<_> = std::iter::once(registered())
        .chain((1..=5).map(|n| failure(n, 0)))
        .collect();
    given.push(AccountEvent::AccountUnlocked {
        by: "admin".to_owned(),
        at: t(5),
    });
    let account = replay(given.clone());
    assert_eq!(account.failed_login_count, 0);
    assert_eq!(account.locked_until, None);
    Given::with(())
        .given(given)
        .when_async(AccountCommand::Unlock {
            by: "admin".to_owned(),
            at: t(6),
        })
        .await
        .then_expect_events(vec![]);
}

#[tokio::test]
async fn a_success_resets_the_failure_count() {
    let given = vec![registered(), failure(1, 0), failure(2, 1)];
    let events = Given::with(())
        .given(given.clone())
        .when_async(login("s1", 2, None))
        .await
        .inspect_result();
    let Ok(events) = events else {
        panic!("login refused")
    };
    let mut all = given;
    all.extend(events);
    let account = replay(all);
    assert_eq!(account.failed_login_count, 0);
    assert!(account.sessions.contains_key("s1"));
}

#[tokio::test]
async fn the_eleventh_session_evicts_the_oldest() {
    let given: Vec<_> = std::iter::once(registered())
        .chain((0..10).map(|n| started(&format!("s{n}"), n + 1)))
        .collect();
    Given::with(())
        .given(given)
        .when_async(login("new", 100, None))
        .await
        .then_expect_events(vec![
            AccountEvent::LoginSucceeded {
                session_id: "new".to_owned(),
                method: LoginMethod::Password,
                second_factor: None,
                at: t(100),
            },
            AccountEvent::SessionRevoked {
                session_id: "s0".to_owned(),
                reason: RevokeReason::Evicted,
                at: t(100),
            },
            started("new", 100),
        ]);
}

#[tokio::test]
async fn refresh_rotates_and_a_reused_token_ends_the_session() {
    let given = vec![registered(), started("s1", 0)];
    Given::with(())
        .given(given.clone())
        .when_async(AccountCommand::Refresh {
            session_id: "s1".to_owned(),
            generation: 0,
            refresh_expires_at: t(700_000),
            at: t(10),
        })
        .await
        .then_expect_events(vec![AccountEvent::SessionRefreshed {
            session_id: "s1".to_owned(),
            generation: 1,
            refresh_expires_at: t(700_000),
            at: t(10),
        }]);
    let rotated = AccountEvent::SessionRefreshed {
        session_id: "s1".to_owned(),
        generation: 1,
        refresh_expires_at: t(700_000),
        at: t(10),
    };
    Given::with(())
        .given(given)
        .and(vec![rotated])
        .when_async(AccountCommand::Refresh {
            session_id: "s1".to_owned(),
            generation: 0,
            refresh_expires_at: t(700_000),
            at: t(20),
        })
        .await
        .then_expect_events(vec![AccountEvent::SessionRevoked {
            session_id: "s1".to_owned(),
            reason: RevokeReason::RefreshReuse,
            at: t(20),
        }]);
}

#[tokio::test]
async fn a_revoked_session_cannot_refresh() {
    Given::with(())
        .given(vec![
            registered(),
            started("s1", 0),
            AccountEvent::SessionRevoked {
                session_id: "s1".to_owned(),
                reason: RevokeReason::Logout,
                at: t(1),
            },
        ])
        .when_async(AccountCommand::Refresh {
            session_id: "s1".to_owned(),
            generation: 0,
            refresh_expires_at: t(700_000),
            at: t(2),
        })
        .await
        .then_expect_error(AccountError::SessionNotActive);
}

#[tokio::test]
async fn a_password_change_ends_every_session() {
    Given::with(())
        .given(vec![registered(), started("a", 1), started("b", 2)])
        .when_async(AccountCommand::ChangePassword {
            attempt: None,
            password_hash: "new".to_owned(),
            at: t(3),
        })
        .await
        .then_expect_events(vec![
            AccountEvent::PasswordChanged {
                password_hash: "new".to_owned(),
                at: t(3),
            },
            AccountEvent::SessionRevoked {
                session_id: "a".to_owned(),
                reason: RevokeReason::PasswordChanged,
                at: t(3),
            },
            AccountEvent::SessionRevoked {
                session_id: "b".to_owned(),
                reason: RevokeReason::PasswordChanged,
                at: t(3),
            },
        ]);
}

#[tokio::test]
async fn revoking_others_keeps_the_callers_session() {
    Given::with(())
        .given(vec![registered(), started("a", 1), started("b", 2)])
        .when_async(AccountCommand::RevokeOtherSessions {
            keep: "b".to_owned(),
            at: t(3),
        })
        .await
        .then_expect_events(vec![AccountEvent::SessionRevoked {
            session_id: "a".to_owned(),
            reason: RevokeReason::OthersRevoked,
            at: t(3),
        }]);
}

#[test]
fn the_security_history_replays_to_the_same_state() {
    let history = vec![
        registered(),
        failure(1, 1),
        AccountEvent::LoginSucceeded {
            session_id: "s1".to_owned(),
            method: LoginMethod::Password,
            second_factor: None,
            at: t(2),
        },
        started("s1", 2),
        AccountEvent::RoleChanged {
            role: Role::Admin,
            by: "system".to_owned(),
            at: t(3),
        },
    ];
    let stored: Vec<AccountEvent> = history
        .iter()
        .map(|e| serde_json::to_value(e).and_then(serde_json::from_value))
        .collect::<Result<_, _>>()
        .unwrap_or_default();
    assert_eq!(replay(stored), replay(history.clone()));
    let account = replay(history);
    assert_eq!(account.role, Role::Admin);
    assert_eq!(account.failed_login_count, 0);
    assert_eq!(account.sessions.len(), 1);
}
