//! The developer portal's webhooks: one added on the page shows its secret
//! once, and that secret verifies the test ping the page sends; a new
//! secret replaces it; deliveries are listed with their response and sent
//! again on request; a refused address is named and nothing is added;
//! another user's subscription is not found.

use super::account::{get, post};
use super::ui_sign_in;
use crate::serve::spawn_with;
use crate::support::{Kind, on_both_backends};
use crate::webhooks::{QUICK, Receiver, Reply, verifies};

on_both_backends! {
    webhooks_are_added_tested_rotated_and_redelivered_on_the_portal => portal;
}

/// The secret the page shows once.
fn shown_secret(html: &str) -> String {
    let start = html
        .find("<code class=\"secret\">")
        .expect("no secret shown")
        + 21;
    html[start..start + html[start..].find('<').unwrap()].to_owned()
}

async fn portal(kind: Kind) {
    let app = spawn_with(kind, &QUICK).await;
    let base = app.base.as_str();
    let jar = ui_sign_in(base, "hooks@example.com").await;
    let (receiver, url) = Receiver::start(&[Reply::Status(500)]).await;

    let (status, html) = get(base, &jar, "/developer/webhooks").await;
    assert_eq!(status, 200);
    assert!(html.contains("No webhooks yet."));
    // The form is a page of its own, under "Webhooks".
    assert!(html.contains("<a class=\"button\" href=\"/developer/webhooks/new\">"));
    assert!(!html.contains("id=\"hook-url\""));
    let (status, form_page) = get(base, &jar, "/developer/webhooks/new").await;
    assert_eq!(status, 200);
    assert!(form_page.contains("<form method=\"post\" action=\"/developer/webhooks\""));
    assert!(form_page.contains("<a href=\"/developer/webhooks\" aria-current=\"page\">"));

    // A refused address is named on the form, which keeps what was sent,
    // and nothing is added.
    let form = [
        ("url", "ftp://example.com/x"),
        ("events", "debate.completed"),
        ("description", "ci <hook>"),
    ];
    let (status, _, html) = post(base, &jar, "/developer/webhooks", &form).await;
    assert_eq!(status, 422, "{html}");
    assert!(html.contains("id=\"webhook-error\""), "{html}");
    assert!(html.contains("value=\"ftp://example.com/x\""), "{html}");
    assert!(
        html.contains("value=\"ci &#60;hook&#62;\"") || html.contains("value=\"ci &lt;hook&gt;\""),
        "{html}"
    );
    assert!(
        html.contains("value=\"debate.completed\" checked>"),
        "{html}"
    );
    assert!(
        html.contains("value=\"debate.failed\">"),
        "not ticked: {html}"
    );
    let (_, list) = get(base, &jar, "/developer/webhooks").await;
    assert!(list.contains("No webhooks yet."));

    let form = [
        ("url", url.as_str()),
        ("events", "debate.completed"),
        ("events", "debate.failed"),
    ];
    let (status, _, html) = post(base, &jar, "/developer/webhooks", &form).await;
    assert_eq!(status, 200, "{html}");
    let secret = shown_secret(&html);
    assert!(secret.starts_with("whsec_"));
    let (_, again) = get(base, &jar, "/developer/webhooks").await;
    assert!(!again.contains(&secret), "the secret is shown once");
    assert!(again.contains("debate.completed, debate.failed"));
    let id = again
        .split("/developer/webhooks/")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();

    // The test message is signed with that secret; the receiver said 500.
    let (status, location, _) =
        post(base, &jar, &format!("/developer/webhooks/{id}/ping"), &[]).await;
    assert_eq!(
        (status, location.as_str()),
        (303, format!("/developer/webhooks/{id}").as_str())
    );
    let first = receiver.wait("the ping", |seen| !seen.is_empty()).await;
    assert!(verifies(&secret, &first[0]));
    assert_eq!(first[0].json()["type"], "webhook.ping");
    let (status, html) = get(base, &jar, &format!("/developer/webhooks/{id}")).await;
    assert_eq!(status, 200);
    assert!(html.contains("1 delivery"), "{html}");
    assert!(html.contains("<td>500</td>"), "{html}");

    // Sent again with the same message id, in its turn.
    let delivery = html
        .split("/deliveries/")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap()
        .to_owned();
    let path = format!("/developer/webhooks/{id}/deliveries/{delivery}/redeliver");
    let (status, _, _) = post(base, &jar, &path, &[]).await;
    assert_eq!(status, 303);
    let seen = receiver
        .wait("the redelivery", |seen| seen.len() >= 2)
        .await;
    assert_eq!(seen[1].id, seen[0].id);

    // A new secret signs from now on; the old one no longer verifies.
    let (status, _, html) =
        post(base, &jar, &format!("/developer/webhooks/{id}/rotate"), &[]).await;
    assert_eq!(status, 200);
    let rotated = shown_secret(&html);
    assert_ne!(rotated, secret);
    post(base, &jar, &format!("/developer/webhooks/{id}/ping"), &[]).await;
    let first_id = first[0].id.clone();
    let seen = receiver
        .wait("the second ping", |seen| {
            seen.iter().any(|r| r.id != first_id)
        })
        .await;
    let second = seen.iter().find(|r| r.id != first_id).unwrap();
    assert!(verifies(&rotated, second));
    assert!(!verifies(&secret, second));

    // Another user finds nothing there.
    let other = ui_sign_in(base, "other-hooks@example.com").await;
    let (status, _) = get(base, &other, &format!("/developer/webhooks/{id}")).await;
    assert_eq!(status, 404);
    let (status, _, _) = post(
        base,
        &other,
        &format!("/developer/webhooks/{id}/rotate"),
        &[],
    )
    .await;
    assert_eq!(status, 404);
    let (status, _, _) = post(base, &other, &path, &[]).await;
    assert_eq!(status, 404);
}
