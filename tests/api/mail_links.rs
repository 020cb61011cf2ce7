//! Links in mails, end to end against `agon serve`: with `SERVICE_PUBLIC_URL`
//! unset they point at the served address and port, the sender is README's
//! `SERVICE_MAIL_FROM` default, and a browser opening them gets a page
//! (JSON clients still get JSON).

use std::path::Path;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::support::TEST_TOKEN;
use crate::support::accounts::{call, login};
use crate::support::binary::Serve;

const PASSWORD: &str = "correct horse battery";

/// The outbox mails once there are `count`.
async fn outbox(dir: &Path, count: usize) -> Vec<String> {
    for _ in 0..100 {
        let mut files: Vec<_> = std::fs::read_dir(dir.join("outbox"))
            .map(|entries| {
                entries
                    .map(|e| e.unwrap().path())
                    .filter(|p| p.extension().is_some_and(|e| e == "eml"))
                    .collect()
            })
            .unwrap_or_default();
        if files.len() >= count {
            files.sort();
            return files
                .iter()
                .map(|p| std::fs::read_to_string(p).unwrap())
                .collect();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("fewer than {count} mails in the outbox");
}

/// The first link in `text` starting with `prefix`.
fn link(text: &str, prefix: &str) -> String {
    text.split_whitespace()
        .find(|word| word.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} link in {text}"))
        .to_owned()
}

async fn open(url: &str, accept: &str) -> (u16, String, String) {
    let response = crate::support::client()
        .get(url)
        .header("accept", accept)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, kind, response.text().await.unwrap())
}

#[tokio::test]
async fn mail_links_follow_the_served_port_and_open_as_pages() {
    let dir = tempfile::tempdir().unwrap();
    let served = Serve::on_free_ports()
        .loopback()
        .data_dir(dir.path())
        .env("SERVICE_API_TOKEN", TEST_TOKEN)
        .env("SERVICE_LOG_LEVEL", "ERROR")
        .start()
        .await;
    let base = served.base.clone();
    let (status, body) = call(
        Method::POST,
        &format!("{base}/api/v1/auth/signup"),
        None,
        Some(json!({"email": "mia@example.com", "password": PASSWORD, "name": "Mia"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    let mail = outbox(dir.path(), 1).await.remove(0);
    assert!(
        mail.starts_with("From: Agon <noreply@agon.localhost>\r\n"),
        "README's SERVICE_MAIL_FROM default: {mail}"
    );
    let verify = link(&mail, &format!("{base}/api/v1/auth/verify-email?token="));
    let browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
    let (status, kind, page) = open(&verify, browser).await;
    assert_eq!(status, 200, "{page}");
    assert!(kind.starts_with("text/html"), "{kind}");
    assert!(page.contains("<h1>Email verified</h1>"), "{page}");
    let (status, kind, again) = open(&verify, browser).await;
    assert_eq!(status, 409, "{again}");
    assert!(
        kind.starts_with("text/html"),
        "a used link explains itself: {kind}"
    );
    assert!(again.contains("<p>"), "{again}");
    let (status, kind, json) = open(&verify, "application/json").await;
    assert_eq!(status, 409, "{json}");
    assert!(kind.starts_with("application/json"), "{kind}");

    let token = login(&base, "mia@example.com", PASSWORD).await["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, org) = call(
        Method::POST,
        &format!("{base}/api/v1/auth/setup-organization"),
        Some(&token),
        Some(json!({"org_name": "Mia's Circle"})),
    )
    .await;
    assert_eq!(status, 201, "{org}");
    let (status, sent) = call(
        Method::POST,
        &format!("{base}/api/v1/auth/invite"),
        Some(&token),
        Some(json!({"email": "noah@example.com", "role": "member"})),
    )
    .await;
    assert_eq!(status, 201, "{sent}");
    // File names order mails by the second only: find it by its addressee.
    let invitation = outbox(dir.path(), 2)
        .await
        .into_iter()
        .find(|mail| mail.contains("To: noah@example.com\r\n"))
        .unwrap();
    let check = link(
        &invitation,
        &format!("{base}/api/v1/auth/check-invite?token="),
    );
    let (status, kind, page) = open(&check, browser).await;
    assert_eq!(status, 200, "{page}");
    assert!(kind.starts_with("text/html"), "{kind}");
    assert!(
        page.contains("noah@example.com is invited to join Mia&#39;s Circle on Agon as member"),
        "{page}"
    );
    let (status, _, json) = open(&check, "application/json").await;
    assert_eq!(status, 200);
    assert!(json.contains("\"valid\":true"), "{json}");
}
