//! Reserved checks, re-authentication budgets, one-use MFA step tokens and
//! re-enabling.

use super::*;

fn begin(id: &str, credential: Option<&str>, at: i64) -> AccountCommand {
    AccountCommand::BeginAttempt {
        attempt_id: id.to_owned(),
        credential: credential.map(str::to_owned),
        at: t(at),
    }
}

fn begun(id: &str, credential: Option<&str>, at: i64) -> AccountEvent {
    AccountEvent::AttemptStarted {
        attempt_id: id.to_owned(),
        credential: credential.map(str::to_owned),
        at: t(at),
    }
}

#[tokio::test]
async fn no_more_sign_in_checks_run_at_once_than_the_next_lock_allows() {
    let mut given = vec![registered(), failure(1, 1), failure(2, 2)];
    given.extend((0..3).map(|n| begun(&format!("a{n}"), None, 3)));
    // Two failures and three checks in flight: the fifth would lock.
    Given::with(())
        .given(given.clone())
        .when_async(begin("a3", None, 4))
        .await
        .then_expect_error(AccountError::Locked {
            remaining_seconds: 60,
        });
    // A session's re-authentication has its own budget.
    given.push(started("s1", 0));
    Given::with(())
        .given(given)
        .when_async(begin("r1", Some("s1"), 4))
        .await
        .then_expect_events(vec![begun("r1", Some("s1"), 4)]);
}

#[tokio::test]
async fn after_a_lock_one_check_at_a_time_and_stale_ones_lapse() {
    let given = vec![registered(), failure(5, 0), begun("a1", None, 100)];
    Given::with(())
        .given(given.clone())
        .when_async(begin("a2", None, 101))
        .await
        .then_expect_error(AccountError::Locked {
            remaining_seconds: 60,
        });
    let later = 100 + ATTEMPT_TIMEOUT_SECONDS;
    Given::with(())
        .given(given)
        .when_async(begin("a2", None, later))
        .await
        .then_expect_events(vec![begun("a2", None, later)]);
}

#[tokio::test]
async fn a_reserved_failure_ends_its_check_and_counts() {
    Given::with(())
        .given(vec![registered(), begun("a1", None, 1)])
        .when_async(AccountCommand::RecordLoginFailure {
            reason: FailureReason::Password,
            attempt: Some("a1".to_owned()),
            at: t(2),
        })
        .await
        .then_expect_events(vec![
            AccountEvent::AttemptEnded {
                attempt_id: "a1".to_owned(),
                at: t(2),
            },
            failure(1, 2),
        ]);
}

#[tokio::test]
async fn a_lock_does_not_stop_the_owners_password_change() {
    let given = vec![registered(), started("s1", 0), failure(5, 10)];
    Given::with(())
        .given(given)
        .when_async(AccountCommand::ChangePassword {
            password_hash: "$argon2id$new".to_owned(),
            attempt: None,
            at: t(20),
        })
        .await
        .then_expect_events(vec![
            AccountEvent::PasswordChanged {
                password_hash: "$argon2id$new".to_owned(),
                at: t(20),
            },
            AccountEvent::SessionRevoked {
                session_id: "s1".to_owned(),
                reason: RevokeReason::PasswordChanged,
                at: t(20),
            },
        ]);
}

#[tokio::test]
async fn the_fifth_wrong_reauthentication_ends_the_session() {
    let mut given = vec![registered(), started("s1", 0)];
    given.extend((1..REAUTH_LIMIT).map(|n| AccountEvent::ReauthFailed {
        credential: "s1".to_owned(),
        failures: n,
        at: t(1),
    }));
    Given::with(())
        .given(given.clone())
        .when_async(AccountCommand::RecordReauthFailure {
            credential: "s1".to_owned(),
            attempt: None,
            at: t(2),
        })
        .await
        .then_expect_events(vec![
            AccountEvent::ReauthFailed {
                credential: "s1".to_owned(),
                failures: REAUTH_LIMIT,
                at: t(2),
            },
            AccountEvent::SessionRevoked {
                session_id: "s1".to_owned(),
                reason: RevokeReason::ReauthFailed,
                at: t(2),
            },
        ]);
    given.push(begun("r1", Some("s1"), 2));
    Given::with(())
        .given(given)
        .when_async(begin("r2", Some("s1"), 2))
        .await
        .then_expect_error(AccountError::AttemptsInFlight);
}

#[tokio::test]
async fn an_ended_session_starts_no_more_checks() {
    // The fifth failure ended s1, forgetting its counters; a request that
    // was let in with s1 before the end showed must not start the budget
    // again (seen: nine wrong passwords checked for one session).
    let mut given = vec![registered(), started("s1", 0)];
    given.extend((1..=REAUTH_LIMIT).map(|n| AccountEvent::ReauthFailed {
        credential: "s1".to_owned(),
        failures: n,
        at: t(1),
    }));
    given.push(AccountEvent::SessionRevoked {
        session_id: "s1".to_owned(),
        reason: RevokeReason::ReauthFailed,
        at: t(1),
    });
    Given::with(())
        .given(given)
        .when_async(begin("r9", Some("s1"), 2))
        .await
        .then_expect_error(AccountError::SessionNotActive);
    // A revoked API key likewise.
    Given::with(())
        .given(vec![registered()])
        .when_async(begin("r1", Some("api_key:k1"), 2))
        .await
        .then_expect_error(AccountError::SessionNotActive);
}

#[tokio::test]
async fn an_mfa_step_token_finishes_one_sign_in() {
    let token = StepToken {
        token_id: "m1".to_owned(),
        expires_at: t(300),
    };
    let mut given = vec![registered()];
    given.extend(mfa_on());
    given.push(AccountEvent::MfaTokenSpent {
        token_id: "m1".to_owned(),
        expires_at: t(300),
        at: t(5),
    });
    let AccountCommand::Login {
        session_id,
        device,
        max_sessions,
        refresh_expires_at,
        at,
        ..
    } = login("s2", 10, None)
    else {
        unreachable!()
    };
    Given::with(())
        .given(given)
        .when_async(AccountCommand::Login {
            session_id,
            device,
            second_factor: Some(SecondFactor::BackupCode {
                code_hash: "b1".to_owned(),
            }),
            step_token: Some(token),
            attempt: None,
            max_sessions,
            refresh_expires_at,
            via: None,
            at,
        })
        .await
        .then_expect_error(AccountError::StepTokenSpent);
}

#[tokio::test]
async fn an_admin_re_enables_a_disabled_account() {
    let disabled = AccountEvent::UserDisabled {
        by: "admin".to_owned(),
        at: t(1),
    };
    let enable = || AccountCommand::Enable {
        by: "admin".to_owned(),
        at: t(2),
    };
    Given::with(())
        .given(vec![registered(), disabled])
        .when_async(enable())
        .await
        .then_expect_events(vec![AccountEvent::UserEnabled {
            by: "admin".to_owned(),
            at: t(2),
        }]);
    Given::with(())
        .given(vec![registered()])
        .when_async(enable())
        .await
        .then_expect_events(vec![]);
}
