//! Polling clients: the debate detail and list carry a weak `ETag`, and
//! `If-None-Match` with it answers 304 until the debate (or the page)
//! changes, under the v1 and v2 forms alike, each with its own tag.

use reqwest::header::{ETAG, IF_NONE_MATCH};

use super::Api;

/// GETs `path` with `headers`; returns the status and the `ETag`.
async fn tagged(api: &Api, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .get(format!("{}{path}", api.base))
        .bearer_auth(&api.token);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let tag = response
        .headers()
        .get(ETAG)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let status = response.status().as_u16();
    if status == 304 {
        assert!(
            response.bytes().await.unwrap().is_empty(),
            "{path}: a 304 has no body"
        );
    }
    (status, tag)
}

/// `path` is tagged, answers 304 to its tag and 200 to another one.
async fn revalidates(api: &Api, path: &str, version: &[(&str, &str)]) -> String {
    let (status, tag) = tagged(api, path, version).await;
    assert_eq!(status, 200, "{path}");
    assert!(tag.starts_with("W/\""), "{path}: {tag:?}");
    let mut asked = version.to_vec();
    asked.push((IF_NONE_MATCH.as_str(), &tag));
    assert_eq!(
        tagged(api, path, &asked).await,
        (304, tag.clone()),
        "{path}"
    );
    asked.pop();
    asked.push((IF_NONE_MATCH.as_str(), "W/\"v1-0000000000000000\""));
    assert_eq!(tagged(api, path, &asked).await.0, 200, "{path}");
    tag
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn detail_and_list_answer_304_while_unchanged() {
    // Demo agents write slowly enough that a debate is read while it runs.
    let (app, api) = Api::spawn(&[("SERVICE_DEMO_DELTA_DELAY_MS", "10")]).await;
    let id = api.demo("Tagged").await;
    api.finished(&id).await;
    let detail = format!("/api/debates/{id}");
    let v1 = revalidates(&api, &detail, &[]).await;
    assert_eq!(
        revalidates(&api, &format!("/api/v1/debates/{id}"), &[]).await,
        v1
    );
    let v2 = revalidates(&api, &format!("/api/v2/debates/{id}"), &[]).await;
    assert_ne!(v1, v2, "the v2 envelope is another representation");
    let negotiated = revalidates(&api, &detail, &[("X-API-Version", "2")]).await;
    assert_eq!(negotiated, v2);

    let list = revalidates(&api, "/api/debates", &[]).await;
    let list_v2 = revalidates(&api, "/api/v2/debates?limit=5", &[]).await;
    assert_ne!(list, list_v2);

    // A new debate changes the list: the old tag no longer matches.
    let other = api.demo("Another").await;
    let stale = [(IF_NONE_MATCH.as_str(), list.as_str())];
    let (status, fresh) = tagged(&api, "/api/debates", &stale).await;
    assert_eq!(status, 200);
    assert_ne!(fresh, list);
    // And a debate's tag moves with the debate.
    let (_, running) = tagged(&api, &format!("/api/debates/{other}"), &[]).await;
    api.finished(&other).await;
    let stale = [(IF_NONE_MATCH.as_str(), running.as_str())];
    let (status, _) = tagged(&api, &format!("/api/debates/{other}"), &stale).await;
    assert_eq!(status, 200);

    // Someone else's debate is not found, whatever tag is sent.
    let bob = crate::support::accounts::signed_in(&app.base, "bob@example.com").await;
    let bob = Api::with(&app.base, &bob.1);
    let asked = [(IF_NONE_MATCH.as_str(), v1.as_str())];
    assert_eq!(tagged(&bob, &detail, &asked).await.0, 404);
    app.stop.cancel();
}
