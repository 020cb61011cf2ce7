//! Provider identities: provisioning, linking, sign-in through a link, and
//! the account's last way in.

use super::*;

fn extidp(subject_index: &str) -> ProviderIdentity {
    ProviderIdentity {
        provider: "extidp".to_owned(),
        subject_index: subject_index.to_owned(),
    }
}

fn linked(provider: &str, subject_index: &str, provisioned: bool) -> AccountEvent {
    AccountEvent::IdentityLinked {
        provider: provider.to_owned(),
        subject_index: subject_index.to_owned(),
        provisioned,
        at: t(1),
    }
}

fn provider_login(session_id: &str, identity: ProviderIdentity) -> AccountCommand {
    let AccountCommand::Login {
        device,
        max_sessions,
        refresh_expires_at,
        at,
        ..
    } = login(session_id, 10, None)
    else {
        unreachable!()
    };
    AccountCommand::Login {
        session_id: session_id.to_owned(),
        device,
        second_factor: None,
        step_token: None,
        attempt: None,
        max_sessions,
        refresh_expires_at,
        via: Some(identity),
        at,
    }
}

#[tokio::test]
async fn a_provisioned_account_is_registered_with_its_identity_linked() {
    Given::with(())
        .given_no_previous_events()
        .when_async(AccountCommand::Register {
            user_id: "u1".to_owned(),
            email: "e".to_owned(),
            name: "n".to_owned(),
            email_index: "ix".to_owned(),
            password_hash: "h".to_owned(),
            role: Role::User,
            email_verified: true,
            identity: Some(extidp("s1")),
            at: t(0),
        })
        .await
        .then_expect_events(vec![
            AccountEvent::Registered {
                user_id: "u1".to_owned(),
                email: "e".to_owned(),
                name: "n".to_owned(),
                email_index: Some("ix".to_owned()),
                password_hash: "h".to_owned(),
                role: Role::User,
                email_verified: true,
                at: t(0),
            },
            AccountEvent::IdentityLinked {
                provider: "extidp".to_owned(),
                subject_index: "s1".to_owned(),
                provisioned: true,
                at: t(0),
            },
        ]);
}

#[tokio::test]
async fn a_linked_identity_opens_a_session_recorded_as_a_provider_sign_in() {
    Given::with(())
        .given(vec![registered(), linked("extidp", "s1", false)])
        .when_async(provider_login("s9", extidp("s1")))
        .await
        .then_expect_events(vec![
            AccountEvent::ProviderLoginSucceeded {
                session_id: "s9".to_owned(),
                provider: "extidp".to_owned(),
                subject_index: "s1".to_owned(),
                second_factor: None,
                at: t(10),
            },
            started("s9", 10),
        ]);
}

#[tokio::test]
async fn an_identity_that_is_not_linked_opens_nothing() {
    Given::with(())
        .given(vec![registered(), linked("extidp", "s1", false)])
        .when_async(provider_login("s9", extidp("other")))
        .await
        .then_expect_error(AccountError::IdentityNotLinked);
}

#[tokio::test]
async fn a_provider_sign_in_still_asks_for_the_second_factor() {
    let mut given = vec![registered(), linked("extidp", "s1", false)];
    given.extend(mfa_on());
    Given::with(())
        .given(given)
        .when_async(provider_login("s9", extidp("s1")))
        .await
        .then_expect_error(AccountError::MfaRequired);
}

#[tokio::test]
async fn a_provider_links_one_identity_at_a_time() {
    Given::with(())
        .given(vec![registered(), linked("extidp", "s1", false)])
        .when_async(AccountCommand::LinkIdentity {
            identity: extidp("s2"),
            at: t(5),
        })
        .await
        .then_expect_error(AccountError::ProviderAlreadyLinked);
}

#[tokio::test]
async fn the_only_way_in_of_a_provisioned_account_stays_linked() {
    Given::with(())
        .given(vec![registered(), linked("extidp", "s1", true)])
        .when_async(AccountCommand::UnlinkIdentity {
            provider: "extidp".to_owned(),
            at: t(5),
        })
        .await
        .then_expect_error(AccountError::LastSignInMethod);
}

#[tokio::test]
async fn a_password_set_later_lets_the_provider_go() {
    Given::with(())
        .given(vec![
            registered(),
            linked("extidp", "s1", true),
            AccountEvent::PasswordChanged {
                password_hash: "$argon2id$new".to_owned(),
                at: t(3),
            },
        ])
        .when_async(AccountCommand::UnlinkIdentity {
            provider: "extidp".to_owned(),
            at: t(5),
        })
        .await
        .then_expect_events(vec![AccountEvent::IdentityUnlinked {
            provider: "extidp".to_owned(),
            subject_index: "s1".to_owned(),
            at: t(5),
        }]);
}
