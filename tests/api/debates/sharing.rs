//! Who sees a debate: members of its creator's organization as it is now,
//! whatever organization (or none) the creator's token named at creation.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use super::{Api, DEMO};
use crate::serve::spawn_with;
use crate::support::accounts::{call, login, signed_in};
use crate::support::smtp::FakeSmtp;
use crate::support::{Kind, on_both_backends};

on_both_backends! {
    members_see_debates_created_before_the_organization => members_see_older_debates;
}

const PASSWORD: &str = "correct horse battery";

/// The invitation token in the `count`th mail.
async fn token_in_mail(fake: &FakeSmtp, count: usize) -> String {
    let mails = fake.wait_for(count, Duration::from_secs(10)).await;
    let text = mails[count - 1].body();
    let start = text.find("token=").unwrap() + "token=".len();
    text[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect()
}

async fn members_see_older_debates(kind: Kind) {
    let fake = FakeSmtp::start().await;
    let mut vars = crate::auth::ROOMY.to_vec();
    vars.push(("SERVICE_RATE_LIMIT_DEBATE_CREATE", "1000000"));
    let smtp = fake.url();
    vars.push(("SERVICE_SMTP_URL", &smtp));
    let app = spawn_with(kind, &vars).await;
    let base = &app.base;

    // Alice creates a debate while in no organization, with that token.
    let (_, early_token, _) = signed_in(base, "alice@example.com").await;
    let alice = Api::with(base, &early_token);
    let body = json!({"topic": "Before the team", "agents": DEMO, "rounds": 1});
    let id = alice.create("/api/debates", body).await["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Then she sets up an organization and invites Bob, who joins.
    let (status, org) = alice
        .post(
            "/api/v1/auth/setup-organization",
            json!({"org_name": "Team"}),
        )
        .await;
    assert_eq!(status, 201, "{org}");
    let (status, sent) = alice
        .post(
            "/api/v1/auth/invite",
            json!({"email": "bob@example.com", "role": "member"}),
        )
        .await;
    assert_eq!(status, 201, "{sent}");
    let invitation = token_in_mail(&fake, 1).await;
    let accept = json!({"token": invitation, "name": "Bob", "password": PASSWORD});
    let url = format!("{base}/api/v1/auth/accept-invite");
    let (status, joined) = call(Method::POST, &url, None, Some(accept)).await;
    assert_eq!(status, 200, "{joined}");
    let bob_token = login(base, "bob@example.com", PASSWORD).await["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let bob = Api::with(base, &bob_token);

    // Bob, a member, reads it (the read models may take a moment to show
    // his membership); an outsider does not.
    let path = format!("/api/debates/{id}");
    let seen = bob.until(&path, |d: &Value| d["id"] == id.as_str()).await;
    assert_eq!(seen["topic"], "Before the team");
    let (status, _) = bob.get(format!("{path}/messages")).await;
    assert_eq!(status, 200);
    let (status, batch) = bob
        .post("/api/debates/batch", json!({"debate_ids": [id]}))
        .await;
    assert_eq!((status, &batch["count"]), (200, &json!(1)), "{batch}");
    let consensus = bob.get(format!("{path}/consensus")).await.0;
    assert!(matches!(consensus, 200 | 202), "{consensus}");

    let (_, carol_token, _) = signed_in(base, "carol@example.com").await;
    let carol = Api::with(base, &carol_token);
    assert_eq!(carol.get(&path).await.0, 404);
    assert_eq!(carol.get(format!("{path}/consensus")).await.0, 404);
    app.stop.cancel();
}
