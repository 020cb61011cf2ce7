//! `/account` from outside: the page shows the user's own data; a key made
//! on it works on `/api` until revoked there; signing out other sessions
//! ends them for the API too; MFA turns on with a computed code; a refused
//! CSRF post changes nothing.

use agon::crypto::totp;
use reqwest::Method;

use super::{Jar, PASSWORD, browser, spawn, ui_sign_in};
use crate::support::accounts::{call, login, me};
use crate::support::{Kind, on_both_backends};

on_both_backends! {
    the_account_page_shows_profile_sessions_and_keys => the_account_page_shows_profile_sessions_and_keys;
    the_password_changes_on_its_own_page_and_signs_out => the_password_changes_on_its_own_page_and_signs_out;
    a_key_made_on_the_page_works_until_revoked_there => a_key_made_on_the_page_works_until_revoked_there;
    signing_out_other_sessions_ends_them => signing_out_other_sessions_ends_them;
    mfa_turns_on_with_a_computed_code_and_shows_backup_codes_once => mfa_turns_on_with_a_computed_code_and_shows_backup_codes_once;
    a_cross_site_post_changes_nothing => a_cross_site_post_changes_nothing;
}

pub async fn get(base: &str, jar: &Jar, path: &str) -> (u16, String) {
    let response = browser()
        .get(format!("{base}{path}"))
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

/// A same-origin form post; returns the status, `Location` and body.
pub async fn post(
    base: &str,
    jar: &Jar,
    path: &str,
    form: &[(&str, &str)],
) -> (u16, String, String) {
    let response = browser()
        .post(format!("{base}{path}"))
        .header("cookie", jar.header())
        .header("sec-fetch-site", "same-origin")
        .form(form)
        .send()
        .await
        .unwrap();
    let location = response
        .headers()
        .get("location")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (
        response.status().as_u16(),
        location,
        response.text().await.unwrap(),
    )
}

/// The text of the element with `id` (its first child text, up to `<`).
pub fn by_id(html: &str, id: &str) -> Option<String> {
    let start = html.find(&format!("id=\"{id}\""))?;
    let rest = &html[start..];
    let open = rest.find('>')? + 1;
    let end = rest[open..].find('<')?;
    Some(rest[open..open + end].to_owned())
}

async fn the_account_page_shows_profile_sessions_and_keys(kind: Kind) {
    let app = spawn(kind).await;
    let jar = ui_sign_in(&app.base, "acct@example.com").await;
    let (status, html) = get(&app.base, &jar, "/account").await;
    assert_eq!(status, 200);
    assert!(html.contains("acct@example.com"), "{html}");
    assert!(html.contains("Test User"));
    // The other parts are pages of their own, each linked from every one.
    for (path, part) in [
        ("/account/password", "Password"),
        ("/account/sessions", "Sessions"),
        ("/account/keys", "API keys"),
        ("/account/organization", "Organization"),
        ("/account/limits", "Rate limits"),
    ] {
        assert!(
            html.contains(&format!("<a href=\"{path}\">{part}</a>")),
            "{path}"
        );
    }
    assert!(!html.contains("this browser") && !html.contains("API keys</h2>"));
    assert!(
        !html.contains("name=\"current_password\""),
        "the password form is a page of its own"
    );
    let (status, sessions) = get(&app.base, &jar, "/account/sessions").await;
    assert_eq!(status, 200);
    assert!(
        sessions.contains("this browser"),
        "the current session is marked"
    );
    assert!(sessions.contains("<a href=\"/account/sessions\" aria-current=\"page\">"));
    let (_, keys) = get(&app.base, &jar, "/account/keys").await;
    assert!(keys.contains("You have no API keys."));
    let (_, organization) = get(&app.base, &jar, "/account/organization").await;
    assert!(organization.contains("You are not in an organization."));
    let (status, limits) = get(&app.base, &jar, "/account/limits").await;
    assert_eq!(status, 200);
    assert!(limits.contains("id=\"buckets\""), "{limits}");
    // Anonymous visitors are sent to sign in.
    let response = browser()
        .get(format!("{}/account", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()["location"], "/login?next=%2Faccount");
}

async fn the_password_changes_on_its_own_page_and_signs_out(kind: Kind) {
    let app = spawn(kind).await;
    let jar = ui_sign_in(&app.base, "pw@example.com").await;
    let (status, page) = get(&app.base, &jar, "/account/password").await;
    assert_eq!(status, 200);
    assert!(page.contains("<a href=\"/account/password\" aria-current=\"page\">Password</a>"));
    assert!(
        page.contains("<form method=\"post\" action=\"/account/password\""),
        "{page}"
    );
    let new = "a new and longer passphrase";
    // Refusals come back on the same page, and change nothing.
    for (current, confirm, says) in [
        (
            PASSWORD,
            "something else entirely",
            "The new passwords differ",
        ),
        ("not the password", new, "id=\"form-errors\""),
    ] {
        let form = [
            ("current_password", current),
            ("new_password", new),
            ("confirm_password", confirm),
        ];
        let (status, _, body) = post(&app.base, &jar, "/account/password", &form).await;
        assert_eq!(status, 422, "{body}");
        assert!(body.contains(says), "{says}: {body}");
        assert!(
            body.contains("action=\"/account/password\""),
            "the form again"
        );
    }
    assert_eq!(
        get(&app.base, &jar, "/account").await.0,
        200,
        "still signed in"
    );
    let form = [
        ("current_password", PASSWORD),
        ("new_password", new),
        ("confirm_password", new),
    ];
    let (status, location, _) = post(&app.base, &jar, "/account/password", &form).await;
    assert_eq!((status, location.as_str()), (303, "/login?notice=password"));
    // Every session ended, this one too; the new password signs in.
    assert_eq!(get(&app.base, &jar, "/account").await.0, 303);
    assert!(login(&app.base, "pw@example.com", new).await["access_token"].is_string());
}

async fn a_key_made_on_the_page_works_until_revoked_there(kind: Kind) {
    let app = spawn(kind).await;
    let jar = ui_sign_in(&app.base, "keys@example.com").await;
    let (status, _, html) = post(&app.base, &jar, "/account/keys", &[("name", "ci")]).await;
    assert_eq!(status, 201, "{html}");
    let key = by_id(&html, "new-key").expect("the key is shown");
    assert!(key.starts_with("agon_"), "{key}");
    let (status, profile) = me(&app.base, &key).await;
    assert_eq!(status, 200);
    assert_eq!(profile["email"], "keys@example.com");
    // The list shows it by name, never the secret again.
    let (_, page) = get(&app.base, &jar, "/account/keys").await;
    assert!(page.contains(">ci<"));
    assert!(!page.contains(&key));
    let (_, keys) = call(
        Method::GET,
        &format!("{}/api/auth/api-keys", app.base),
        Some(&key),
        None,
    )
    .await;
    let key_id = keys["keys"][0]["key_id"].as_str().unwrap().to_owned();
    // Revoking asks first; the question changes nothing.
    let confirm = format!("/account/keys/{key_id}/revoke");
    let (status, question) = get(&app.base, &jar, &confirm).await;
    assert_eq!(status, 200);
    assert!(question.contains("Revoke key"));
    assert_eq!(me(&app.base, &key).await.0, 200);
    let (status, location, _) = post(&app.base, &jar, &confirm, &[]).await;
    assert_eq!((status, location.as_str()), (303, "/account/keys?done=key"));
    assert_eq!(me(&app.base, &key).await.0, 401);
    // Another user's key id is not found.
    let other = ui_sign_in(&app.base, "other@example.com").await;
    assert_eq!(post(&app.base, &other, &confirm, &[]).await.0, 404);
}

async fn signing_out_other_sessions_ends_them(kind: Kind) {
    let app = spawn(kind).await;
    let jar = ui_sign_in(&app.base, "many@example.com").await;
    let api = login(&app.base, "many@example.com", super::PASSWORD).await;
    let token = api["access_token"].as_str().unwrap();
    assert_eq!(me(&app.base, token).await.0, 200);
    let (_, page) = get(&app.base, &jar, "/account/sessions").await;
    assert!(page.contains("/account/sessions/others/revoke"));
    let (status, location, _) = post(&app.base, &jar, "/account/sessions/others/revoke", &[]).await;
    assert_eq!(
        (status, location.as_str()),
        (303, "/account/sessions?done=others")
    );
    assert_eq!(me(&app.base, token).await.0, 401);
    // This browser stays signed in.
    let (status, page) = get(&app.base, &jar, "/account/sessions?done=others").await;
    assert_eq!(status, 200);
    assert!(page.contains("Every other session was signed out."));
}

async fn mfa_turns_on_with_a_computed_code_and_shows_backup_codes_once(kind: Kind) {
    let app = spawn(kind).await;
    let jar = ui_sign_in(&app.base, "mfa@example.com").await;
    let (status, _, html) = post(&app.base, &jar, "/account/mfa/setup", &[]).await;
    assert_eq!(status, 200);
    assert!(
        html.contains("<svg role=\"img\""),
        "the QR code is inline SVG"
    );
    let secret = by_id(&html, "totp-secret").unwrap();
    let (status, _, wrong) = post(
        &app.base,
        &jar,
        "/account/mfa/enable",
        &[("code", "000000")],
    )
    .await;
    let now = u64::try_from(chrono::Utc::now().timestamp()).unwrap();
    if totp::code_at(&secret, now).as_deref() != Some("000000") {
        assert_eq!(status, 422, "{wrong}");
    }
    let code = totp::code_at(&secret, now).unwrap();
    let (status, _, html) = post(&app.base, &jar, "/account/mfa/enable", &[("code", &code)]).await;
    assert_eq!(status, 200, "{html}");
    assert_eq!(html.matches("<li><code>").count(), 10, "{html}");
    let (_, page) = get(&app.base, &jar, "/account").await;
    assert_eq!(by_id(&page, "mfa-state").as_deref(), Some("on"));
    // The API sees it: a password alone no longer signs in.
    let (_, body) = call(
        Method::POST,
        &format!("{}/api/auth/login", app.base),
        None,
        Some(serde_json::json!({"email": "mfa@example.com", "password": super::PASSWORD})),
    )
    .await;
    assert_eq!(body["mfa_required"], true, "{body}");
}

async fn a_cross_site_post_changes_nothing(kind: Kind) {
    let app = spawn(kind).await;
    let jar = ui_sign_in(&app.base, "csrf@example.com").await;
    let api = login(&app.base, "csrf@example.com", super::PASSWORD).await;
    let token = api["access_token"].as_str().unwrap();
    for (path, form) in [
        ("/account/keys", vec![("name", "evil")]),
        ("/account/sessions/others/revoke", vec![]),
        ("/account/organization", vec![("org_name", "Evil")]),
    ] {
        let response = browser()
            .post(format!("{}{path}", app.base))
            .header("cookie", jar.header())
            .header("sec-fetch-site", "same-site")
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 403, "{path}");
    }
    assert_eq!(me(&app.base, token).await.0, 200);
    let (_, keys) = call(
        Method::GET,
        &format!("{}/api/auth/api-keys", app.base),
        Some(token),
        None,
    )
    .await;
    assert_eq!(keys["total"], 0);
    assert_eq!(
        me(&app.base, token).await.1["org_id"],
        serde_json::Value::Null
    );
}
