//! v2 manages webhooks, organizations and users with an OAuth (session)
//! token only; an API key keeps working on v1 (spec §9 rule 5).

use reqwest::Method;
use serde_json::json;

use super::{Receiver, User, vars};
use crate::serve::spawn_with;
use crate::support::Kind;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn v2_takes_an_oauth_token_not_an_api_key() {
    let app = spawn_with(Kind::Sqlite, &vars(&[])).await;
    let (_, url) = Receiver::start(&[]).await;
    let alice = User::new(&app.base, "erin@example.com").await;
    let (status, key) = alice.call(Method::POST, "/api/auth/api-key", None).await;
    assert_eq!(status, 201, "{key}");
    let keyed = User {
        base: app.base.clone(),
        token: key["api_key"].as_str().unwrap().to_owned(),
    };
    let body = json!({"url": url, "events": ["debate.completed"]});
    let (status, answer) = keyed
        .call(Method::POST, "/api/v2/webhooks", Some(body.clone()))
        .await;
    assert_eq!(status, 403, "{answer}");
    let (status, _) = keyed
        .call(Method::POST, "/api/v1/webhooks", Some(body.clone()))
        .await;
    assert_eq!(status, 201);
    let (status, answer) = alice
        .call(Method::POST, "/api/v2/webhooks", Some(body))
        .await;
    assert_eq!(status, 201, "{answer}");
    assert!(
        answer["data"]["secret"]
            .as_str()
            .unwrap()
            .starts_with("whsec_")
    );
}

/// The rest of §9 rule 5: organization and user management under v2 also
/// take a session's token and refuse an API key, which v1 accepts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn v2_manages_organizations_and_users_with_an_oauth_token_only() {
    let app = spawn_with(
        Kind::Sqlite,
        &vars(&[("SERVICE_ADMIN_EMAILS", "root@example.com")]),
    )
    .await;
    let root = User::new(&app.base, "root@example.com").await;
    let (status, key) = root.call(Method::POST, "/api/auth/api-key", None).await;
    assert_eq!(status, 201, "{key}");
    let keyed = User {
        base: app.base.clone(),
        token: key["api_key"].as_str().unwrap().to_owned(),
    };
    for (method, path, body) in [
        (Method::GET, "/admin/users?limit=1", None),
        (
            Method::POST,
            "/auth/invite",
            Some(json!({"email": "new@example.com", "role": "member"})),
        ),
    ] {
        let (status, answer) = keyed
            .call(method.clone(), &format!("/api/v2{path}"), body.clone())
            .await;
        assert_eq!(status, 403, "{path}: {answer}");
        assert!(
            answer.to_string().contains("OAuth 2.0 access token"),
            "{answer}"
        );
    }
    // The same key on v1 is fine, and so is the session's token on v2.
    let (status, answer) = keyed
        .call(
            Method::POST,
            "/api/v1/auth/setup-organization",
            Some(json!({"org_name": "Acme"})),
        )
        .await;
    assert_eq!(status, 201, "{answer}");
    let (status, answer) = keyed
        .call(Method::GET, "/api/v1/admin/users?limit=1", None)
        .await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = root
        .call(Method::GET, "/api/v2/admin/users?limit=1", None)
        .await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = root
        .call(
            Method::POST,
            "/api/v2/auth/invite",
            Some(json!({"email": "new@example.com", "role": "member"})),
        )
        .await;
    assert!(matches!(status, 200 | 201), "{status}: {answer}");
}
