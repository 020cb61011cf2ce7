//! Signing in through the UI: the cookies' attributes, a refresh when the
//! access token has expired, a revoked session signed out on its next
//! request, logout, and `/api` ignoring the cookies.

use std::time::Duration;

use reqwest::Method;

use super::{PASSWORD, browser, cookie_value, set_cookies, spawn, ui_sign_in};
use crate::support::accounts::{call, login, me, register};
use crate::support::{Kind, on_both_backends};

on_both_backends! {
    cookies_are_host_only_http_only_secure_and_strict => cookies_are_host_only_http_only_secure_and_strict;
    an_expired_access_cookie_is_refreshed_and_a_revoked_one_signs_out => an_expired_access_cookie_is_refreshed_and_a_revoked_one_signs_out;
    logout_revokes_the_session_and_clears_the_cookies => logout_revokes_the_session_and_clears_the_cookies;
    the_api_ignores_the_session_cookie => the_api_ignores_the_session_cookie;
    the_mfa_step_is_kept_in_a_cookie_not_in_the_page => the_mfa_step_is_kept_in_a_cookie_not_in_the_page;
    a_locked_account_shows_the_remaining_seconds => a_locked_account_shows_the_remaining_seconds;
}

async fn cookies_are_host_only_http_only_secure_and_strict(kind: Kind) {
    let app = spawn(kind).await;
    register(&app.base, "ann@example.com", PASSWORD).await;
    let response = browser()
        .post(format!("{}/login", app.base))
        .header("sec-fetch-site", "same-origin")
        .form(&[
            ("email", "ann@example.com"),
            ("password", PASSWORD),
            ("next", "/debates/new"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()["location"], "/debates/new");
    let cookies = set_cookies(response.headers());
    for name in ["__Host-agon_session=", "__Host-agon_refresh="] {
        let cookie = cookies.iter().find(|c| c.starts_with(name)).unwrap();
        let attributes: Vec<&str> = cookie.split(';').map(str::trim).skip(1).collect();
        for wanted in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/"] {
            assert!(attributes.contains(&wanted), "{cookie} lacks {wanted}");
        }
        assert!(
            !attributes
                .iter()
                .any(|a| a.to_lowercase().starts_with("domain")),
            "{cookie}"
        );
    }
    // A page of someone else's choosing is never where sign-in leads.
    let response = browser()
        .post(format!("{}/login", app.base))
        .header("sec-fetch-site", "same-origin")
        .form(&[
            ("email", "ann@example.com"),
            ("password", PASSWORD),
            ("next", "//evil.example/"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["location"], "/");
}

async fn an_expired_access_cookie_is_refreshed_and_a_revoked_one_signs_out(kind: Kind) {
    let app = spawn(kind).await;
    let jar = super::ui_sign_in(&app.base, "bo@example.com").await;
    let page = |cookie: String| {
        let url = format!("{}/debates/new", app.base);
        async move {
            browser()
                .get(url)
                .header("cookie", cookie)
                .send()
                .await
                .unwrap()
        }
    };
    assert_eq!(page(jar.header()).await.status(), 200);

    app.app.clock.advance(Duration::from_secs(3 * 3_600));
    let refreshed = page(jar.header()).await;
    assert_eq!(
        refreshed.status(),
        200,
        "the refresh cookie renewed the pair"
    );
    let session = cookie_value(refreshed.headers(), "__Host-agon_session").unwrap();
    let refresh = cookie_value(refreshed.headers(), "__Host-agon_refresh").unwrap();
    assert!(!session.is_empty() && session != jar.session);
    assert!(!refresh.is_empty() && refresh != jar.refresh);
    let renewed = format!("__Host-agon_session={session}; __Host-agon_refresh={refresh}");
    assert_eq!(page(renewed.clone()).await.status(), 200);
    let (status, _) = me(&app.base, &session).await;
    assert_eq!(status, 200, "the new access token is a real session's");

    // Revoke every other session through the API; the next page load signs out.
    let api = login(&app.base, "bo@example.com", PASSWORD).await;
    let (status, body) = call(
        Method::DELETE,
        &format!("{}/api/auth/sessions", app.base),
        api["access_token"].as_str(),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let refused = page(renewed).await;
    assert_eq!(refused.status(), 303);
    assert_eq!(
        refused.headers()["location"],
        "/login?next=%2Fdebates%2Fnew"
    );
    assert_eq!(
        cookie_value(refused.headers(), "__Host-agon_session").as_deref(),
        Some(""),
        "the dead cookies are cleared"
    );
}

async fn logout_revokes_the_session_and_clears_the_cookies(kind: Kind) {
    let app = spawn(kind).await;
    let jar = ui_sign_in(&app.base, "cy@example.com").await;
    let response = browser()
        .post(format!("{}/logout", app.base))
        .header("cookie", jar.header())
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    for name in ["__Host-agon_session", "__Host-agon_refresh"] {
        assert_eq!(cookie_value(response.headers(), name).as_deref(), Some(""));
    }
    let (status, _) = me(&app.base, &jar.session).await;
    assert_eq!(status, 401, "the session is revoked, not only forgotten");
    let (status, _) = call(
        Method::POST,
        &format!("{}/api/auth/refresh", app.base),
        None,
        Some(serde_json::json!({"refresh_token": jar.refresh})),
    )
    .await;
    assert_eq!(status, 401);
}

async fn the_api_ignores_the_session_cookie(kind: Kind) {
    let app = spawn(kind).await;
    let jar = ui_sign_in(&app.base, "di@example.com").await;
    for path in ["/api/auth/me", "/api/v1/auth/me", "/api/debates"] {
        let response = browser()
            .get(format!("{}{path}", app.base))
            .header("cookie", jar.header())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401, "{path}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert!(
            body["error"].is_string(),
            "the API's own error form: {body}"
        );
    }
    let (status, _) = me(&app.base, &jar.session).await;
    assert_eq!(status, 200, "the same token works as a bearer");
}

async fn the_mfa_step_is_kept_in_a_cookie_not_in_the_page(kind: Kind) {
    let app = spawn(kind).await;
    let base = &app.base;
    register(base, "ed@example.com", PASSWORD).await;
    let access = login(base, "ed@example.com", PASSWORD).await["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, setup) = call(
        Method::POST,
        &format!("{base}/api/auth/mfa/setup"),
        Some(&access),
        None,
    )
    .await;
    let secret = setup["secret"].as_str().unwrap().to_owned();
    let code = |at: i64| agon::crypto::totp::code_at(&secret, u64::try_from(at).unwrap()).unwrap();
    let (status, _) = call(
        Method::POST,
        &format!("{base}/api/auth/mfa/enable"),
        Some(&access),
        Some(serde_json::json!({"code": code(app.app.clock.unix())})),
    )
    .await;
    assert_eq!(status, 200);
    app.app.clock.advance(Duration::from_secs(30));

    let response = browser()
        .post(format!("{base}/login"))
        .header("sec-fetch-site", "same-origin")
        .form(&[("email", "ed@example.com"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(cookie_value(response.headers(), "__Host-agon_session").is_none());
    let step = cookie_value(response.headers(), "__Host-agon_mfa").unwrap();
    let page = response.text().await.unwrap();
    assert!(page.contains("name=\"code\""), "{page}");
    assert!(!page.contains(&step), "the step token is not in the page");

    let send = |code: String| {
        let (url, cookie) = (
            format!("{base}/login/code"),
            format!("__Host-agon_mfa={step}"),
        );
        async move {
            browser()
                .post(url)
                .header("cookie", cookie)
                .header("sec-fetch-site", "same-origin")
                .form(&[("code", code.as_str()), ("next", "/debates/new")])
                .send()
                .await
                .unwrap()
        }
    };
    let wrong = if code(app.app.clock.unix()) == "000000" {
        "111111"
    } else {
        "000000"
    };
    assert_eq!(send(wrong.to_owned()).await.status(), 401);
    let signed = send(code(app.app.clock.unix())).await;
    assert_eq!(signed.status(), 303);
    assert_eq!(signed.headers()["location"], "/debates/new");
    let session = cookie_value(signed.headers(), "__Host-agon_session").unwrap();
    assert_eq!(me(base, &session).await.0, 200);
    assert_eq!(
        cookie_value(signed.headers(), "__Host-agon_mfa").as_deref(),
        Some("")
    );
}

async fn a_locked_account_shows_the_remaining_seconds(kind: Kind) {
    let app = spawn(kind).await;
    register(&app.base, "flo@example.com", PASSWORD).await;
    let attempt = |password: &'static str| {
        let url = format!("{}/login", app.base);
        async move {
            let response = browser()
                .post(url)
                .header("sec-fetch-site", "same-origin")
                .form(&[("email", "flo@example.com"), ("password", password)])
                .send()
                .await
                .unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    for _ in 0..5 {
        let (status, page) = attempt("not the password").await;
        assert!(status == 401 || status == 429, "{status}");
        assert!(page.contains("role=\"alert\""), "{page}");
    }
    let (status, page) = attempt(PASSWORD).await;
    assert_eq!(status, 429, "{page}");
    let seconds: String = page
        .split("Account locked for ")
        .nth(1)
        .unwrap_or_else(|| panic!("{page}"))
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let seconds: u64 = seconds.parse().unwrap();
    assert!((1..=60).contains(&seconds), "{seconds}");
    assert!(
        page.contains(&format!("Try again in {seconds} seconds")),
        "{page}"
    );
}
