//! API keys: the singular key (named `default`), keys by name, the cap,
//! revocation by id and what ends them all.

use super::*;

const MAX: usize = 3;

fn default_key(id: &str, at: i64) -> AccountEvent {
    AccountEvent::ApiKeyCreated {
        key_id: id.to_owned(),
        key_hash: format!("h-{id}"),
        at: t(at),
    }
}

fn named_key(id: &str, name: &str, at: i64) -> AccountEvent {
    AccountEvent::NamedApiKeyCreated {
        key_id: id.to_owned(),
        name: name.to_owned(),
        key_hash: format!("h-{id}"),
        at: t(at),
    }
}

fn create_named(id: &str, name: &str, at: i64) -> AccountCommand {
    AccountCommand::CreateNamedApiKey {
        key_id: id.to_owned(),
        name: name.to_owned(),
        key_hash: format!("h-{id}"),
        max_keys: MAX,
        at: t(at),
    }
}

fn create_default(id: &str, at: i64) -> AccountCommand {
    AccountCommand::CreateApiKey {
        key_id: id.to_owned(),
        key_hash: format!("h-{id}"),
        max_keys: MAX,
        at: t(at),
    }
}

fn revoked(id: &str, reason: KeyRevokeReason, at: i64) -> AccountEvent {
    AccountEvent::ApiKeyRevoked {
        key_id: id.to_owned(),
        reason,
        at: t(at),
    }
}

#[tokio::test]
async fn a_new_default_key_replaces_the_old_one_and_leaves_named_keys() {
    Given::with(())
        .given(vec![
            registered(),
            default_key("k1", 1),
            named_key("n1", "ci", 2),
        ])
        .when_async(create_default("k2", 3))
        .await
        .then_expect_events(vec![
            revoked("k1", KeyRevokeReason::Replaced, 3),
            default_key("k2", 3),
        ]);
    Given::with(())
        .given(vec![registered()])
        .when_async(AccountCommand::RevokeApiKey { at: t(1) })
        .await
        .then_expect_error(AccountError::NoApiKey);
}

#[tokio::test]
async fn named_keys_sit_beside_each_other_with_trimmed_names() {
    Given::with(())
        .given(vec![registered(), named_key("n1", "ci", 1)])
        .when_async(create_named("n2", "  laptop ", 2))
        .await
        .then_expect_events(vec![named_key("n2", "laptop", 2)]);
    let account = replay(vec![
        registered(),
        default_key("k1", 1),
        named_key("n1", "ci", 2),
    ]);
    assert_eq!(account.api_keys.len(), 2);
    assert_eq!(account.api_keys["k1"].name, DEFAULT_KEY_NAME);
    assert_eq!(account.api_keys["n1"].name, "ci");
    assert_eq!(account.api_keys["n1"].created_at, t(2));
    assert_eq!(account.default_key().map(|k| k.key_id.as_str()), Some("k1"));
}

#[tokio::test]
async fn names_are_unique_and_must_be_usable() {
    let given = vec![registered(), named_key("n1", "ci", 1)];
    Given::with(())
        .given(given.clone())
        .when_async(create_named("n2", " ci ", 2))
        .await
        .then_expect_error(AccountError::ApiKeyNameTaken);
    let long = "x".repeat(MAX_KEY_NAME_CHARS + 1);
    for bad in ["", "   ", "line\nbreak", long.as_str()] {
        Given::with(())
            .given(given.clone())
            .when_async(create_named("n2", bad, 2))
            .await
            .then_expect_error(AccountError::InvalidApiKeyName);
    }
    let longest = "é".repeat(MAX_KEY_NAME_CHARS);
    assert_eq!(key_name(&longest), Ok(longest.as_str()));
}

#[tokio::test]
async fn the_cap_counts_every_live_key_but_the_replaced_default() {
    let full = vec![
        registered(),
        default_key("k1", 1),
        named_key("n1", "a", 2),
        named_key("n2", "b", 3),
    ];
    Given::with(())
        .given(full.clone())
        .when_async(create_named("n3", "c", 4))
        .await
        .then_expect_error(AccountError::TooManyApiKeys { max: MAX });
    // Replacing the default key does not add one.
    Given::with(())
        .given(full)
        .when_async(create_default("k2", 4))
        .await
        .then_expect_events(vec![
            revoked("k1", KeyRevokeReason::Replaced, 4),
            default_key("k2", 4),
        ]);
    let named_only = vec![
        registered(),
        named_key("n1", "a", 1),
        named_key("n2", "b", 2),
        named_key("n3", "c", 3),
    ];
    Given::with(())
        .given(named_only.clone())
        .when_async(create_default("k1", 4))
        .await
        .then_expect_error(AccountError::TooManyApiKeys { max: MAX });
    // A revoked key makes room again.
    let mut freed = named_only;
    freed.push(revoked("n1", KeyRevokeReason::Revoked, 4));
    Given::with(())
        .given(freed)
        .when_async(create_named("n4", "a", 5))
        .await
        .then_expect_events(vec![named_key("n4", "a", 5)]);
}

#[tokio::test]
async fn a_key_is_revoked_by_id_only_while_it_is_the_accounts_and_live() {
    let given = vec![registered(), default_key("k1", 1), named_key("n1", "ci", 2)];
    Given::with(())
        .given(given.clone())
        .when_async(AccountCommand::RevokeApiKeyById {
            key_id: "n1".to_owned(),
            at: t(3),
        })
        .await
        .then_expect_events(vec![revoked("n1", KeyRevokeReason::Revoked, 3)]);
    let mut after = given.clone();
    after.push(revoked("n1", KeyRevokeReason::Revoked, 3));
    for (events, key_id) in [(after, "n1"), (given.clone(), "someone-elses")] {
        Given::with(())
            .given(events)
            .when_async(AccountCommand::RevokeApiKeyById {
                key_id: key_id.to_owned(),
                at: t(4),
            })
            .await
            .then_expect_error(AccountError::ApiKeyNotFound);
    }
    // The singular revoke takes the default key, whatever else is live.
    Given::with(())
        .given(given)
        .when_async(AccountCommand::RevokeApiKey { at: t(3) })
        .await
        .then_expect_events(vec![revoked("k1", KeyRevokeReason::Revoked, 3)]);
}

#[tokio::test]
async fn a_named_default_key_is_the_singular_key() {
    let given = vec![registered(), named_key("n1", DEFAULT_KEY_NAME, 1)];
    Given::with(())
        .given(given.clone())
        .when_async(AccountCommand::RevokeApiKey { at: t(2) })
        .await
        .then_expect_events(vec![revoked("n1", KeyRevokeReason::Revoked, 2)]);
    Given::with(())
        .given(given.clone())
        .when_async(create_default("k1", 2))
        .await
        .then_expect_events(vec![
            revoked("n1", KeyRevokeReason::Replaced, 2),
            default_key("k1", 2),
        ]);
    Given::with(())
        .given(given)
        .when_async(create_named("n2", DEFAULT_KEY_NAME, 2))
        .await
        .then_expect_error(AccountError::ApiKeyNameTaken);
}

#[tokio::test]
async fn disabling_and_revoke_all_end_every_key() {
    let given = vec![registered(), default_key("k1", 1), named_key("n1", "ci", 2)];
    Given::with(())
        .given(given.clone())
        .when_async(AccountCommand::RevokeAll {
            by: "admin".to_owned(),
            at: t(3),
        })
        .await
        .then_expect_events(vec![
            revoked("k1", KeyRevokeReason::AdminRevokeAll, 3),
            revoked("n1", KeyRevokeReason::AdminRevokeAll, 3),
        ]);
    let mut disabled = given.clone();
    disabled.push(AccountEvent::UserDisabled {
        by: "admin".to_owned(),
        at: t(3),
    });
    Given::with(())
        .given(disabled)
        .when_async(create_named("n2", "new", 4))
        .await
        .then_expect_error(AccountError::Disabled);
}

#[tokio::test]
async fn a_key_that_fails_too_many_checks_ends_alone() {
    let mut given = vec![registered(), default_key("k1", 1), named_key("n1", "ci", 2)];
    let credential = format!("{API_KEY_CREDENTIAL_PREFIX}n1");
    for failures in 1..REAUTH_LIMIT {
        given.push(AccountEvent::ReauthFailed {
            credential: credential.clone(),
            failures,
            at: t(3),
        });
    }
    Given::with(())
        .given(given)
        .when_async(AccountCommand::RecordReauthFailure {
            credential: credential.clone(),
            attempt: None,
            at: t(4),
        })
        .await
        .then_expect_events(vec![
            AccountEvent::ReauthFailed {
                credential,
                failures: REAUTH_LIMIT,
                at: t(4),
            },
            revoked("n1", KeyRevokeReason::ReauthFailed, 4),
        ]);
}
