//! `/debates` lists what `GET /api/debates` lists for the caller (status
//! filter, topic search, paging, export links); the gallery pages show
//! what an owner published, to anyone, and only the embed card may be
//! framed.

use reqwest::Method;
use serde_json::{Value, json};

use super::account::{get, post};
use super::{PASSWORD, browser, ui_sign_in};
use crate::serve::spawn_with;
use crate::support::accounts::{call, login};
use crate::support::provider::{create_debate, wait_finished};
use crate::support::{Kind, client, on_both_backends};

on_both_backends! {
    the_history_page_filters_searches_and_pages => history;
    the_gallery_pages_show_what_the_owner_published => gallery;
}

/// Creates a two-agent demo debate on `topic` as the holder of `token`
/// and waits until it has finished; returns its id.
async fn finished_debate(base: &str, token: &str, topic: &str) -> String {
    let body = json!({"topic": topic, "agents": ["demo-a", "demo-b"], "rounds": 1});
    let url = format!("{base}/api/debates");
    let (status, created) = call(Method::POST, &url, Some(token), Some(body)).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    wait_finished(&client(), base, &id).await;
    id
}

/// How many debates the page's table shows.
fn rows(html: &str) -> usize {
    html.matches("<th scope=\"row\">").count()
}

async fn history(kind: Kind) {
    let app = spawn_with(kind, &[("SERVICE_UI_PAGE_SIZE", "2")]).await;
    let base = app.base.as_str();
    let jar = ui_sign_in(base, "history@example.com").await;
    let token = login(base, "history@example.com", PASSWORD).await["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut ids = Vec::new();
    for topic in ["Apples or pears", "More APPLES?", "Plums <b>only</b>"] {
        ids.push(finished_debate(base, &token, topic).await);
    }
    // Another user's debate is not the caller's to list.
    let theirs = create_debate(&client(), base, &["demo-a", "demo-b"], 1).await;

    let (status, html) = get(base, &jar, "/debates").await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("3 debates."), "{html}");
    assert_eq!(rows(&html), 2, "{html}");
    assert!(!html.contains(&theirs));
    // Newest first; topics are escaped; finished debates link their exports.
    assert!(
        html.contains("Plums &#60;b&#62;only&#60;/b&#62;")
            || html.contains("Plums &lt;b&gt;only&lt;/b&gt;"),
        "{html}"
    );
    assert!(html.contains(&format!("/debates/{}/export/json", ids[2])));
    assert!(html.contains(&format!("/debates/{}/export/md", ids[2])));
    assert!(html.contains("offset=2\" rel=\"next\""), "{html}");

    let (_, second) = get(base, &jar, "/debates?status=&q=&offset=2").await;
    assert_eq!(rows(&second), 1, "{second}");
    assert!(second.contains("Apples or pears"));
    assert!(second.contains("offset=0\" rel=\"prev\""), "{second}");
    assert!(!second.contains("rel=\"next\""));

    let (_, found) = get(base, &jar, "/debates?q=apples").await;
    assert!(
        found.contains("2 debates whose topic contains “apples”"),
        "{found}"
    );
    assert!(found.contains("More APPLES?") && found.contains("Apples or pears"));
    assert!(!found.contains("Plums"));

    let (_, completed) = get(base, &jar, "/debates?status=completed&q=apples").await;
    assert!(completed.contains("2 debates"), "{completed}");
    // The filter's links keep the search, the chosen status marked; the
    // search form keeps the status.
    assert!(
        completed.contains(
            r#"<a href="/debates?status=completed&amp;q=apples" aria-current="page">completed</a>"#
        ),
        "{completed}"
    );
    assert!(completed.contains(r#"<a href="/debates?status=running&amp;q=apples">running</a>"#));
    assert!(completed.contains(r#"<input type="hidden" name="status" value="completed">"#));
    let (_, completed) = get(base, &jar, "/debates?status=completed").await;
    assert!(completed.contains("3 debates"), "{completed}");
    let (_, running) = get(base, &jar, "/debates?status=running").await;
    assert!(running.contains("0 debates"), "{running}");
    assert_eq!(rows(&running), 0);

    let (status, _) = get(base, &jar, "/debates?status=bogus").await;
    assert_eq!(status, 400);
    let anonymous = browser()
        .get(format!("{base}/debates"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 303);
    let location = anonymous.headers()["location"].to_str().unwrap();
    assert!(location.starts_with("/login"), "{location}");
}

async fn gallery(kind: Kind) {
    let app = spawn_with(kind, &[]).await;
    let base = app.base.as_str();
    let jar = ui_sign_in(base, "owner@example.com").await;
    let token = login(base, "owner@example.com", PASSWORD).await["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let id = finished_debate(base, &token, "Should cities ban cars?").await;
    let anonymous = |path: String| async move {
        let response = browser().get(format!("{base}{path}")).send().await.unwrap();
        let (status, headers) = (response.status().as_u16(), response.headers().clone());
        (status, headers, response.text().await.unwrap())
    };

    let (status, _, html) = anonymous("/gallery".to_owned()).await;
    assert_eq!(status, 200);
    assert!(html.contains("0 published debates."), "{html}");
    let (status, _, _) = anonymous(format!("/gallery/{id}")).await;
    assert_eq!(status, 404);

    // Another user cannot publish it; the owner can, from the debate's page.
    let other = ui_sign_in(base, "other@example.com").await;
    let (status, _, _) = post(base, &other, &format!("/debates/{id}/publish"), &[]).await;
    assert_eq!(status, 404);
    let (status, location, _) = post(base, &jar, &format!("/debates/{id}/publish"), &[]).await;
    assert_eq!(
        (status, location.as_str()),
        (303, format!("/debates/{id}").as_str())
    );

    let (_, _, html) = anonymous("/gallery".to_owned()).await;
    assert!(html.contains("1 published debate."), "{html}");
    assert!(html.contains(&format!("href=\"/gallery/{id}\"")));
    let (status, headers, html) = anonymous(format!("/gallery/{id}")).await;
    assert_eq!(status, 200);
    assert!(html.contains("Should cities ban cars?"));
    assert!(html.contains("Consensus: "));
    assert!(html.contains("demo-a") && html.contains("demo-b"));
    let api: Value = client()
        .get(format!("{base}/api/gallery/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let contributions: usize = api["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["messages"].as_array().unwrap().len())
        .sum();
    assert_eq!(
        html.matches("<article class=\"card\">").count(),
        contributions
    );
    assert_eq!(headers["x-frame-options"], "DENY");
    assert!(
        headers["content-security-policy"]
            .to_str()
            .unwrap()
            .ends_with("frame-ancestors 'none'")
    );

    // The card alone may be framed, by anyone.
    let (status, headers, html) = anonymous(format!("/gallery/{id}/embed")).await;
    assert_eq!(status, 200);
    assert!(headers.get("x-frame-options").is_none());
    let policy = headers["content-security-policy"].to_str().unwrap();
    assert!(policy.ends_with("frame-ancestors *"), "{policy}");
    assert!(policy.contains("script-src 'self'"));
    assert!(html.contains("Should cities ban cars?"));
    assert!(html.contains("target=\"_blank\" rel=\"noopener noreferrer\""));

    // The owner's page offers to take it out again; then it is gone.
    let (_, page) = get(base, &jar, &format!("/debates/{id}")).await;
    assert!(
        page.contains(&format!("action=\"/debates/{id}/unpublish\"")),
        "{page}"
    );
    let (status, _, _) = post(base, &jar, &format!("/debates/{id}/unpublish"), &[]).await;
    assert_eq!(status, 303);
    for path in [format!("/gallery/{id}"), format!("/gallery/{id}/embed")] {
        assert_eq!(anonymous(path).await.0, 404);
    }
    let (_, _, html) = anonymous("/gallery".to_owned()).await;
    assert!(html.contains("0 published debates."), "{html}");
}
