//! API keys by name on both back ends: several keys per user, listed
//! without secrets, revoked one at a time (by their owner only), capped by
//! `SERVICE_MAX_API_KEYS_PER_USER`, with last use recorded; and the singular
//! `/api/auth/api-key` key as the one named `default`. Errors are checked
//! by status only: their body form is the version's business.

use std::collections::BTreeSet;

use reqwest::Method;
use serde_json::{Value, json};

use crate::auth::ROOMY;
use crate::serve::spawn_with;
use crate::support::accounts::{call, me, signed_in};
use crate::support::{Kind, on_both_backends};

on_both_backends! {
    named_keys_live_side_by_side => named_keys_live_side_by_side;
    keys_belong_to_their_owner => keys_belong_to_their_owner;
    the_singular_key_is_the_default_one_and_counts_against_the_cap => the_singular_key_is_the_default_one_and_counts_against_the_cap;
}

/// The cap the tests run with.
const CAP: &str = "3";

async fn spawn(kind: Kind) -> crate::serve::Spawned {
    let mut vars = ROOMY.to_vec();
    vars.push(("SERVICE_MAX_API_KEYS_PER_USER", CAP));
    spawn_with(kind, &vars).await
}

/// A key just created: its secret and its id.
struct Key {
    secret: String,
    id: String,
}

/// Creates key `name` at `path` (`/api/auth/api-keys` or a version of it).
async fn create(base: &str, path: &str, token: &str, name: &str) -> Key {
    let (status, body) = call(
        Method::POST,
        &format!("{base}{path}"),
        Some(token),
        Some(json!({"name": name})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let secret = body["api_key"].as_str().unwrap().to_owned();
    let id = body["key_id"].as_str().unwrap().to_owned();
    assert_eq!(body["id"], id.as_str());
    assert_eq!(body["name"], name.trim());
    assert_eq!(body["prefix"], format!("agon_{id}"));
    assert!(secret.starts_with(&format!("agon_{id}_")), "{secret}");
    Key { secret, id }
}

/// The caller's key list (asserting 200), keyed by name.
async fn list(base: &str, token: &str) -> Vec<Value> {
    let (status, body) = call(
        Method::GET,
        &format!("{base}/api/auth/api-keys"),
        Some(token),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let keys = body["keys"].as_array().unwrap().clone();
    assert_eq!(body["items"], body["keys"], "the list under items too");
    assert_eq!(body["total"], keys.len());
    keys
}

fn names(keys: &[Value]) -> BTreeSet<String> {
    keys.iter()
        .map(|k| k["name"].as_str().unwrap().to_owned())
        .collect()
}

async fn revoke(base: &str, path: &str, token: &str) -> u16 {
    call(Method::DELETE, &format!("{base}{path}"), Some(token), None)
        .await
        .0
}

async fn named_keys_live_side_by_side(kind: Kind) {
    let app = spawn(kind).await;
    let base = &app.base;
    let (user_id, access, _) = signed_in(base, "kim@example.com").await;
    assert!(list(base, &access).await.is_empty());

    let ci = create(base, "/api/auth/api-keys", &access, "ci").await;
    let listed = list(base, &access).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["last_used_at"], Value::Null, "never used yet");
    let laptop = create(base, "/api/v1/auth/api-keys", &access, "  laptop ").await;

    for key in [&ci, &laptop] {
        let (status, profile) = me(base, &key.secret).await;
        assert_eq!(status, 200, "{profile}");
        assert_eq!(profile["user_id"], user_id.as_str());
        assert_eq!(profile["has_api_key"], true);
    }

    let (status, body) = call(
        Method::GET,
        &format!("{base}/api/auth/api-keys"),
        Some(&access),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let text = body.to_string();
    for key in [&ci, &laptop] {
        assert!(!text.contains(&key.secret), "a secret is listed: {text}");
    }
    let keys = body["keys"].as_array().unwrap();
    assert_eq!(names(keys), ["ci", "laptop"].map(str::to_owned).into());
    for key in keys {
        let fields: BTreeSet<&str> = key
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            fields,
            [
                "created_at",
                "id",
                "key_id",
                "last_used_at",
                "name",
                "prefix"
            ]
            .into(),
            "{key}"
        );
        assert_eq!(
            key["prefix"],
            format!("agon_{}", key["key_id"].as_str().unwrap())
        );
        assert!(key["last_used_at"].is_string(), "used above: {key}");
    }
    // Newest first.
    assert_eq!(keys[0]["key_id"], laptop.id.as_str());
    let (status, v2) = call(
        Method::GET,
        &format!("{base}/api/v2/auth/api-keys"),
        Some(&access),
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(v2["data"]["keys"].as_array().unwrap().len(), 2);

    // A key manages keys too; revoking one leaves the other working.
    let path = format!("/api/v1/auth/api-keys/{}", ci.id);
    assert_eq!(revoke(base, &path, &laptop.secret).await, 200);
    assert_eq!(me(base, &ci.secret).await.0, 401, "revoked key");
    assert_eq!(me(base, &laptop.secret).await.0, 200);
    assert_eq!(revoke(base, &path, &access).await, 404, "already revoked");
    assert_eq!(
        names(&list(base, &access).await),
        ["laptop".to_owned()].into()
    );

    // Names are unique among live keys and must be usable; a freed name
    // can be taken again. Scopes and expiry are refused, not ignored.
    let url = format!("{base}/api/auth/api-keys");
    for (body, expected) in [
        (json!({"name": "laptop"}), 409),
        (json!({"name": "   "}), 422),
        (json!({"name": "a".repeat(101)}), 422),
        (json!({"name": "tab\there"}), 422),
        (json!({}), 422),
        (json!({"name": "ro", "scopes": ["debates.read"]}), 422),
        (
            json!({"name": "tmp", "expires_at": "2030-01-01T00:00:00Z"}),
            422,
        ),
    ] {
        let (status, _) = call(Method::POST, &url, Some(&access), Some(body.clone())).await;
        assert_eq!(status, expected, "{body}");
    }
    create(base, "/api/auth/api-keys", &access, "ci").await;
    app.stop.cancel();
}

async fn keys_belong_to_their_owner(kind: Kind) {
    let app = spawn(kind).await;
    let base = &app.base;
    let (_, owner, _) = signed_in(base, "own@example.com").await;
    let (_, other, _) = signed_in(base, "oth@example.com").await;
    let key = create(base, "/api/auth/api-keys", &owner, "ci").await;
    let other_key = create(base, "/api/auth/api-keys", &other, "ci").await;

    assert_eq!(names(&list(base, &other).await), ["ci".to_owned()].into());
    assert_eq!(list(base, &other).await[0]["key_id"], other_key.id.as_str());
    for token in [other.as_str(), other_key.secret.as_str()] {
        for path in [
            format!("/api/auth/api-keys/{}", key.id),
            format!("/api/v1/auth/api-keys/{}", key.id),
        ] {
            assert_eq!(revoke(base, &path, token).await, 404, "{path}");
        }
    }
    assert_eq!(me(base, &key.secret).await.0, 200, "still works");
    assert_eq!(
        revoke(base, "/api/auth/api-keys/0123456789abcdef", &owner).await,
        404
    );
    let unauthenticated = call(
        Method::GET,
        &format!("{base}/api/auth/api-keys"),
        None,
        None,
    )
    .await;
    assert_eq!(unauthenticated.0, 401);
    app.stop.cancel();
}

async fn the_singular_key_is_the_default_one_and_counts_against_the_cap(kind: Kind) {
    let app = spawn(kind).await;
    let base = &app.base;
    let (_, access, _) = signed_in(base, "sol@example.com").await;
    let singular = format!("{base}/api/auth/api-key");
    let a = create(base, "/api/auth/api-keys", &access, "a").await;
    let b = create(base, "/api/auth/api-keys", &access, "b").await;

    let (status, first) = call(Method::POST, &singular, Some(&access), None).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(first["name"], "default");
    let first_secret = first["api_key"].as_str().unwrap().to_owned();
    assert_eq!(me(base, &first_secret).await.0, 200);
    assert_eq!(
        names(&list(base, &access).await),
        ["a", "b", "default"].map(str::to_owned).into()
    );

    // At the cap: no new name, but the default key can still be replaced.
    let (status, _) = call(
        Method::POST,
        &format!("{base}/api/auth/api-keys"),
        Some(&access),
        Some(json!({"name": "c"})),
    )
    .await;
    assert_eq!(status, 409, "over the cap of {CAP}");
    let (status, second) = call(Method::POST, &singular, Some(&access), None).await;
    assert_eq!(status, 201, "{second}");
    let second_secret = second["api_key"].as_str().unwrap().to_owned();
    assert_eq!(me(base, &first_secret).await.0, 401, "replaced");
    assert_eq!(me(base, &second_secret).await.0, 200);
    for key in [&a, &b] {
        assert_eq!(me(base, &key.secret).await.0, 200, "named keys stay");
    }
    let listed = list(base, &access).await;
    assert_eq!(listed.len(), 3);
    let default = listed.iter().find(|k| k["name"] == "default").unwrap();
    assert_eq!(default["key_id"], second["key_id"]);

    // The singular DELETE revokes the default key only; a default name is
    // taken while it lives.
    let (status, _) = call(
        Method::POST,
        &format!("{base}/api/auth/api-keys"),
        Some(&access),
        Some(json!({"name": "default"})),
    )
    .await;
    assert_eq!(status, 409);
    let (status, _) = call(Method::DELETE, &singular, Some(&access), None).await;
    assert_eq!(status, 200);
    assert_eq!(me(base, &second_secret).await.0, 401);
    assert_eq!(me(base, &a.secret).await.0, 200);
    assert_eq!(
        names(&list(base, &access).await),
        ["a", "b"].map(str::to_owned).into()
    );
    let (status, _) = call(Method::DELETE, &singular, Some(&access), None).await;
    assert_eq!(status, 409, "no default key left");

    // With a free slot, a new name fits again.
    create(base, "/api/auth/api-keys", &access, "c").await;
    app.stop.cancel();
}
