//! A review that a webhook started is posted to its pull request when its
//! debate ends, with nobody reading it, and exactly once: when the host
//! stores the review but its answer is lost, the service finds the review
//! by its marker instead of posting it again.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use super::host::fake_github;
use super::{REPO, SECRET, TOKEN, deliver, pull_request_event, sign};
use crate::serve::spawn_with;
use crate::support::accounts::call;
use crate::support::{Kind, TEST_TOKEN, on_both_backends};

on_both_backends! {
    a_webhook_review_is_posted_once_even_when_the_answer_is_lost => posted_once;
}

/// Polls until `done` holds for the review (bounded, so a hang fails).
async fn review_when(base: &str, review_id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let path = format!("{base}/api/v1/scm/pr/review/{review_id}");
    // Not read before the post: reading would settle the review itself.
    for _ in 0..600 {
        let (status, body) = call(Method::GET, &path, Some(TEST_TOKEN), None).await;
        assert_eq!(status, 200, "{body}");
        if done(&body) {
            return body;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("review {review_id} never got there");
}

async fn posted_once(kind: Kind) {
    let (host, api) = fake_github().await;
    *host.lose_next_answer.lock().unwrap() = true;
    let app = spawn_with(
        kind,
        &[
            ("SCM_TOKEN", TOKEN),
            ("SCM_API_URL", &api),
            ("SCM_WEBHOOK_SECRET", SECRET),
            ("SERVICE_CONSUMER_RETRY_BASE_MS", "50"),
        ],
    )
    .await;
    let base = app.base.as_str();
    let opened = pull_request_event("opened");
    let signature = Some(sign(&opened.to_string(), SECRET));
    let (status, queued) = deliver(base, "pull_request", "pr-post-1", &opened, signature).await;
    assert_eq!(status, 202, "{queued}");
    let review_id = queued["review_id"].as_str().unwrap().to_owned();

    // Nobody reads the review; the host receives it all the same.
    let marker = format!("<!-- agon-review:{review_id} -->");
    let mut waited = 0;
    while host.bodies(&format!("{REPO}#7")).is_empty() {
        assert!(waited < 600, "the review was never posted");
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += 1;
    }
    let review = review_when(base, &review_id, |r| r["host_review_id"].is_u64()).await;
    let sent = host.bodies(&format!("{REPO}#7"));
    assert_eq!(sent.len(), 1, "posted again after a lost answer: {sent:?}");
    let body = sent[0]["body"].as_str().unwrap();
    assert!(body.ends_with(&marker), "{body}");
    assert_eq!(
        sent[0]["event"], review["event"],
        "the host got the review's action"
    );
    assert_eq!(sent[0]["comments"], review["comments"]);
    assert_eq!(review["status"], "completed", "{review}");
    assert_eq!(review["host_review_id"], 80, "{review}");
    app.stop.cancel();
}
