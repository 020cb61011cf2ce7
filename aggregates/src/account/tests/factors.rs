//! MFA, backup codes, email verification, disabling.

use super::*;

#[tokio::test]
async fn with_mfa_on_a_password_alone_does_not_sign_in() {
    let mut given = vec![registered()];
    given.extend(mfa_on());
    Given::with(())
        .given(given)
        .when_async(login("s1", 10, None))
        .await
        .then_expect_error(AccountError::MfaRequired);
}

#[tokio::test]
async fn a_totp_step_is_accepted_once() {
    let mut given = vec![registered()];
    given.extend(mfa_on());
    let first = Given::with(())
        .given(given.clone())
        .when_async(login("s1", 10, Some(SecondFactor::Totp { step: 101 })))
        .await
        .inspect_result();
    let Ok(first) = first else {
        panic!("first code refused")
    };
    Given::with(())
        .given(given.clone())
        .and(first)
        .when_async(login("s2", 11, Some(SecondFactor::Totp { step: 101 })))
        .await
        .then_expect_error(AccountError::CodeReplayed);
    // The step that enabled MFA is spent too.
    Given::with(())
        .given(given)
        .when_async(login("s3", 12, Some(SecondFactor::Totp { step: 100 })))
        .await
        .then_expect_error(AccountError::CodeReplayed);
}

#[tokio::test]
async fn a_backup_code_works_once() {
    let mut given = vec![registered()];
    given.extend(mfa_on());
    let code = || {
        Some(SecondFactor::BackupCode {
            code_hash: "b1".to_owned(),
        })
    };
    let first = Given::with(())
        .given(given.clone())
        .when_async(login("s1", 10, code()))
        .await
        .inspect_result();
    let Ok(first) = first else {
        panic!("backup code refused")
    };
    let mut all = given.clone();
    all.extend(first.clone());
    assert_eq!(replay(all).mfa.backup_code_hashes, vec!["b2".to_owned()]);
    Given::with(())
        .given(given)
        .and(first)
        .when_async(login("s2", 11, code()))
        .await
        .then_expect_error(AccountError::InvalidBackupCode);
}

#[tokio::test]
async fn mfa_cannot_be_enabled_without_setup_and_reset_clears_it() {
    Given::with(())
        .given(vec![registered()])
        .when_async(AccountCommand::EnableMfa {
            attempt: None,
            totp_step: 5,
            backup_code_hashes: vec![],
            at: t(1),
        })
        .await
        .then_expect_error(AccountError::MfaSetupNotStarted);
    let mut given = vec![registered()];
    given.extend(mfa_on());
    given.push(AccountEvent::MfaReset {
        by: "admin".to_owned(),
        at: t(3),
    });
    let account = replay(given.clone());
    assert!(!account.mfa.enabled);
    assert_eq!(account.mfa.secret, None);
    Given::with(())
        .given(given)
        .when_async(login("s1", 10, None))
        .await
        .then_expect_events(vec![
            AccountEvent::LoginSucceeded {
                session_id: "s1".to_owned(),
                method: LoginMethod::Password,
                second_factor: None,
                at: t(10),
            },
            started("s1", 10),
        ]);
}

#[tokio::test]
async fn disabling_ends_sessions_and_the_api_key_and_refuses_sign_in() {
    let given = vec![
        registered(),
        started("a", 1),
        AccountEvent::ApiKeyCreated {
            key_id: "k1".to_owned(),
            key_hash: "h".to_owned(),
            at: t(2),
        },
    ];
    let events = Given::with(())
        .given(given.clone())
        .when_async(AccountCommand::Disable {
            by: "admin".to_owned(),
            at: t(3),
        })
        .await
        .inspect_result();
    let Ok(events) = events else {
        panic!("disable refused")
    };
    assert_eq!(events.len(), 3);
    let mut all = given;
    all.extend(events);
    let account = replay(all.clone());
    assert!(account.sessions.is_empty());
    assert!(account.api_keys.is_empty());
    Given::with(())
        .given(all)
        .when_async(login("s9", 4, None))
        .await
        .then_expect_error(AccountError::Disabled);
}

#[tokio::test]
async fn a_verification_token_works_once_and_expires() {
    let issued = AccountEvent::VerificationIssued {
        token_hash: "tok".to_owned(),
        expires_at: t(100),
        at: t(0),
    };
    let verify = |hash: &str, at| AccountCommand::VerifyEmail {
        token_hash: hash.to_owned(),
        at: t(at),
    };
    Given::with(())
        .given(vec![registered(), issued.clone()])
        .when_async(verify("tok", 50))
        .await
        .then_expect_events(vec![AccountEvent::EmailVerified { at: t(50) }]);
    Given::with(())
        .given(vec![registered(), issued.clone()])
        .when_async(verify("tok", 100))
        .await
        .then_expect_error(AccountError::VerificationExpired);
    Given::with(())
        .given(vec![registered(), issued.clone()])
        .when_async(verify("other", 50))
        .await
        .then_expect_error(AccountError::InvalidVerificationToken);
    Given::with(())
        .given(vec![
            registered(),
            issued,
            AccountEvent::EmailVerified { at: t(50) },
        ])
        .when_async(verify("tok", 60))
        .await
        .then_expect_error(AccountError::AlreadyVerified);
}
