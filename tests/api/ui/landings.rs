//! The mail links' landings in the UI: `/verify-email?token=` verifies
//! once, and `/invite?token=` is accepted by the signed-in invitee.

use std::path::Path;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use super::{browser, ui_sign_in};
use crate::serve::spawn_with;
use crate::support::accounts::{call, login, me};
use crate::support::{Kind, on_both_backends};

on_both_backends! {
    mail_links_land_on_pages => mail_links_land_on_pages;
}

/// The token of the first `path?token=` link in a mail to `to`.
async fn mailed_token(dir: &Path, to: &str, path: &str) -> String {
    for _ in 0..100 {
        let mails = std::fs::read_dir(dir.join("outbox"))
            .map(|entries| entries.map(|e| e.unwrap().path()).collect::<Vec<_>>())
            .unwrap_or_default();
        for mail in mails {
            let text = std::fs::read_to_string(mail).unwrap();
            if !text.contains(&format!("To: {to}\r\n")) {
                continue;
            }
            if let Some(rest) = text.split(&format!("{path}?token=")).nth(1) {
                return rest.split_whitespace().next().unwrap().to_owned();
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no {path} mail to {to}");
}

async fn mail_links_land_on_pages(kind: Kind) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let app = spawn_with(kind, &[("SERVICE_DATA_DIR", data)]).await;
    let base = &app.base;

    let response = browser()
        .post(format!("{base}/register"))
        .header("sec-fetch-site", "same-origin")
        .form(&[
            ("name", "Ivy"),
            ("email", "ivy@example.com"),
            ("password", super::PASSWORD),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let token = mailed_token(dir.path(), "ivy@example.com", "/verify-email").await;
    let open = |token: String| {
        let url = format!("{base}/verify-email?token={token}");
        async move {
            let response = browser().get(url).send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    let (status, page) = open(token.clone()).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("<h1>Email verified</h1>"), "{page}");
    let access = login(base, "ivy@example.com", super::PASSWORD).await["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(me(base, &access).await.1["email_verified"], true);
    let (status, page) = open(token).await;
    assert_eq!(status, 409, "a used link explains itself: {page}");

    let (status, org) = call(
        Method::POST,
        &format!("{base}/api/v1/auth/setup-organization"),
        Some(&access),
        Some(json!({"org_name": "Ivy & Co"})),
    )
    .await;
    assert_eq!(status, 201, "{org}");
    let (status, sent) = call(
        Method::POST,
        &format!("{base}/api/v1/auth/invite"),
        Some(&access),
        Some(json!({"email": "jo@example.com", "role": "member"})),
    )
    .await;
    assert_eq!(status, 201, "{sent}");
    let invite = mailed_token(dir.path(), "jo@example.com", "/check-invite").await;
    let jar = ui_sign_in(base, "jo@example.com").await;
    let page = browser()
        .get(format!("{base}/invite?token={invite}"))
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Ivy &#38; Co"), "{page}");
    assert!(page.contains("Accept the invitation"), "{page}");
    let accepted = browser()
        .post(format!("{base}/invite"))
        .header("cookie", jar.header())
        .header("sec-fetch-site", "same-origin")
        .form(&[("token", invite.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status(), 200);
    assert!(
        accepted
            .text()
            .await
            .unwrap()
            .contains("You joined Ivy &#38; Co.")
    );
    // The profile is a read model: it shows the membership once applied.
    let mut profile = serde_json::Value::Null;
    for _ in 0..200 {
        profile = me(base, &jar.session).await.1;
        if profile["org_role"] == "member" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(profile["org_role"], "member", "{profile}");
}
