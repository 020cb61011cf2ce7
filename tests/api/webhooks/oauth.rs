//! v2 manages webhooks with an OAuth (session) token only; an API key
//! keeps working on v1 (spec §9).

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
