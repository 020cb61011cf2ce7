//! `/developer`: the quick start names this server, the user's API keys
//! are listed (the account page's partial), the documents are linked, and
//! every WebSocket frame type is shown with its golden sample, escaped.

use reqwest::Method;

use super::account::get;
use super::{spawn, ui_sign_in};
use crate::support::accounts::call;
use crate::support::{Kind, on_both_backends};

on_both_backends! {
    the_portal_shows_the_quick_start_keys_documents_and_frames => the_portal_shows_the_quick_start_keys_documents_and_frames;
}

async fn the_portal_shows_the_quick_start_keys_documents_and_frames(kind: Kind) {
    let app = spawn(kind).await;
    let jar = ui_sign_in(&app.base, "dev@example.com").await;
    let (status, before) = get(&app.base, &jar, "/developer").await;
    assert_eq!(status, 200);
    assert!(before.contains("You have no API keys."), "{before}");
    let (_, _, created) =
        super::account::post(&app.base, &jar, "/account/keys", &[("name", "portal")]).await;
    let key = super::account::by_id(&created, "new-key").unwrap();
    let (_, page) = get(&app.base, &jar, "/developer").await;
    assert!(page.contains(">portal<"), "{page}");
    assert!(!page.contains(&key), "the secret is never shown again");
    // Keys are listed here and made and revoked on the account's keys page.
    assert!(page.contains("href=\"/account/keys\""), "{page}");
    assert!(!page.contains("action=\"/account/keys\""), "{page}");
    for link in [
        "/api/docs",
        "/api/redoc",
        "/api/openapi.json",
        "/api/postman.json",
    ] {
        assert!(page.contains(&format!("href=\"{link}\"")), "{link}");
    }
    assert!(page.contains("agon debate --server "));
    assert!(page.contains("aragora_sdk"));
    // The frames are a page of their own, linked from the portal.
    assert!(page.contains("<a href=\"/developer/events\">WebSocket messages</a>"));
    let (status, page) = get(&app.base, &jar, "/developer/events").await;
    assert_eq!(status, 200);
    for frame in [
        "debate_start",
        "agent.delta",
        "agent_message",
        "consensus",
        "debate_end",
    ] {
        assert!(page.contains(&format!("<code>{frame}</code>")), "{frame}");
        let sample = std::fs::read_to_string(format!(
            "{}/event-schemas/ws/{frame}.v1.sample.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let escaped = sample
            .replace('&', "&#38;")
            .replace('"', "&#34;")
            .replace('<', "&#60;")
            .replace('>', "&#62;")
            .replace('\'', "&#39;");
        assert!(
            page.contains(sample.trim())
                || page.contains(escaped.trim())
                || page.contains(&sample.replace('"', "&quot;")),
            "{frame}: the sample is shown"
        );
    }
    // The documents linked are served.
    let (status, _) = call(
        Method::GET,
        &format!("{}/api/openapi.json", app.base),
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);
}
