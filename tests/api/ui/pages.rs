//! What every page and asset carries: the page policy and no caching on
//! HTML, hashed immutable assets, gzip, the byte budgets (JS at most 20 KB
//! and CSS at most 10 KB gzip per page, a debate's first load at most
//! 60 KB, nothing from other origins), HTML
//! error pages, escaped text and the way to sign-in.

use super::{browser, spawn, ui_sign_in};
use crate::support::{Kind, on_both_backends};

const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
const JS_BUDGET: usize = 20 * 1024;
const CSS_BUDGET: usize = 10 * 1024;
/// A finished debate's page with its scripts and style sheet, gzip.
const FIRST_LOAD_BUDGET: usize = 60 * 1024;

on_both_backends! {
    every_page_carries_the_policy_and_keeps_its_budgets => every_page_carries_the_policy_and_keeps_its_budgets;
    signed_in_pages_send_anonymous_visitors_to_sign_in => signed_in_pages_send_anonymous_visitors_to_sign_in;
    bad_input_gets_a_page_never_a_500 => bad_input_gets_a_page_never_a_500;
    unknown_paths_get_a_page_in_a_browser_and_json_elsewhere => unknown_paths_get_a_page_in_a_browser_and_json_elsewhere;
}

/// The values of `attribute="…"` in `html`.
fn attributes<'a>(html: &'a str, attribute: &str) -> Vec<&'a str> {
    html.split(&format!("{attribute}=\""))
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .collect()
}

async fn every_page_carries_the_policy_and_keeps_its_budgets(kind: Kind) {
    let app = spawn(kind).await;
    let base = &app.base;
    let jar = ui_sign_in(base, "gus@example.com").await;
    let created = browser()
        .post(format!("{base}/debates/new"))
        .header("cookie", jar.header())
        .header("sec-fetch-site", "same-origin")
        .form(&[
            ("topic", "<img src=x onerror=alert(1)>"),
            ("agents", "demo-a"),
            ("agents", "demo-b"),
            ("rounds", "1"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 303);
    let debate = created.headers()["location"].to_str().unwrap().to_owned();
    let pages = [
        ("/login", false, 200),
        ("/register", false, 200),
        ("/verify-email?token=nope", false, 404),
        ("/invite?token=nope", false, 404),
        ("/debates/new", true, 200),
        // The start page itself, not a redirect to it.
        ("/", true, 200),
        (debate.as_str(), true, 200),
        ("/debates/not-a-debate", true, 404),
        ("/assets/nothing.js", false, 404),
        ("/account", true, 200),
        ("/account/password", true, 200),
        ("/account/sessions", true, 200),
        ("/account/keys", true, 200),
        ("/account/organization", true, 200),
        ("/account/limits", true, 200),
        ("/leaderboard", true, 200),
        ("/developer", true, 200),
        ("/developer/webhooks", true, 200),
        ("/developer/webhooks/new", true, 200),
        ("/developer/events", true, 200),
    ];
    for (path, signed_in, status) in pages {
        let mut request = browser()
            .get(format!("{base}{path}"))
            .header("accept-encoding", "gzip");
        if signed_in {
            request = request.header("cookie", jar.header());
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), status, "{path}");
        let headers = response.headers().clone();
        assert_eq!(headers["content-security-policy"], POLICY, "{path}");
        assert_eq!(headers["cache-control"], "no-store", "{path}");
        assert_eq!(headers["x-frame-options"], "DENY", "{path}");
        assert!(
            headers.contains_key("x-request-id"),
            "{path}: pages run inside the platform layers"
        );
        assert_eq!(headers["content-encoding"], "gzip", "{path}");
        let gzipped = response.bytes().await.unwrap();
        let html = gunzip(&gzipped);
        assert!(!html.contains("<style"), "{path}: no inline style");
        assert!(!html.contains(" style="), "{path}: no style attribute");
        assert!(!html.contains("hx-on") && !html.contains("js:"), "{path}");
        assert_eq!(
            html.matches("<script").count(),
            html.matches("<script src=\"/assets/").count(),
            "{path}: no inline script"
        );
        let (mut js, mut css) = (0, 0);
        for url in attributes(&html, "src")
            .into_iter()
            .chain(attributes(&html, "href"))
        {
            assert!(
                !url.starts_with("//") && !url.contains("://"),
                "{path}: {url} is on another origin"
            );
            if !url.starts_with("/assets/") {
                continue;
            }
            let asset = browser()
                .get(format!("{base}{url}"))
                .header("accept-encoding", "gzip")
                .send()
                .await
                .unwrap();
            assert_eq!(asset.status(), 200, "{url}");
            assert_eq!(
                asset.headers()["cache-control"],
                "public, max-age=31536000, immutable"
            );
            assert_eq!(asset.headers()["content-encoding"], "gzip", "{url}");
            let bytes = asset.bytes().await.unwrap().len();
            if url.ends_with(".js") {
                js += bytes;
            } else if url.ends_with(".css") {
                css += bytes;
            }
        }
        assert!(js <= JS_BUDGET, "{path}: {js} bytes of gzip JS");
        assert!(css <= CSS_BUDGET, "{path}: {css} bytes of gzip CSS");
        assert!(css > 0, "{path} links the style sheet");
        // Only a running debate's page uses a script (htmx and its socket
        // extension); the others work without one and load none.
        if path != debate {
            assert_eq!(js, 0, "{path} loads no script");
        } else {
            let first_load = gzipped.len() + js + css;
            assert!(
                first_load <= FIRST_LOAD_BUDGET,
                "{path}: first load {first_load} bytes"
            );
            assert!(
                html.contains("&#60;img src=x onerror=alert(1)&#62;"),
                "escaped: {html}"
            );
            assert!(!html.contains("<img src=x"), "{html}");
        }
    }
}

/// The hashed asset names name their bytes: another hash is not served.
#[tokio::test]
async fn asset_names_carry_their_hash() {
    use agon::web::assets::ASSETS;
    use sha2::{Digest, Sha256};
    for asset in [&ASSETS.htmx, &ASSETS.htmx_ws, &ASSETS.css] {
        let hash = hex::encode(Sha256::digest(asset.bytes));
        assert!(
            asset.file.contains(&format!(".{}.", &hash[..8])),
            "{}",
            asset.file
        );
        assert_eq!(asset.url, format!("/assets/{}", asset.file));
    }
}

fn gunzip(bytes: &[u8]) -> String {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_string(&mut text)
        .unwrap();
    text
}

async fn signed_in_pages_send_anonymous_visitors_to_sign_in(kind: Kind) {
    let app = spawn(kind).await;
    for (path, next) in [
        ("/", None),
        ("/debates/new", Some("%2Fdebates%2Fnew")),
        ("/account", Some("%2Faccount")),
        ("/leaderboard", Some("%2Fleaderboard")),
        ("/admin", Some("%2Fadmin")),
        ("/developer", Some("%2Fdeveloper")),
        (
            "/debates/01900000-0000-7000-8000-000000000000?x=1",
            Some("%2Fdebates%2F01900000-0000-7000-8000-000000000000%3Fx%3D1"),
        ),
    ] {
        let response = browser()
            .get(format!("{}{path}", app.base))
            .header(
                "cookie",
                "__Host-agon_session=forged; __Host-agon_refresh=forged",
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 303, "{path}");
        let location = response.headers()["location"].to_str().unwrap();
        match next {
            Some(next) => assert_eq!(location, format!("/login?next={next}")),
            None => assert_eq!(location, "/login"),
        }
    }
}

async fn bad_input_gets_a_page_never_a_500(kind: Kind) {
    let app = spawn(kind).await;
    let base = &app.base;
    let jar = ui_sign_in(base, "hal@example.com").await;
    let forms: [&[(&str, &str)]; 6] = [
        &[("topic", ""), ("agents", "demo-a"), ("agents", "demo-b")],
        &[("topic", "x"), ("agents", "demo-a")],
        &[("topic", "x"), ("rounds", "many")],
        &[("topic", "x"), ("rounds", "99")],
        &[("topic", "x"), ("threshold", "NaN")],
        &[
            ("topic", "x"),
            ("consensus", "loudest"),
            ("agents", "nobody:here"),
        ],
    ];
    for form in forms {
        let response = browser()
            .post(format!("{base}/debates/new"))
            .header("cookie", jar.header())
            .header("sec-fetch-site", "same-origin")
            .form(form)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 422, "{form:?}");
        let page = response.text().await.unwrap();
        assert!(page.contains("The debate was not started"), "{page}");
    }
    let long = "t".repeat(100_000);
    let response = browser()
        .post(format!("{base}/debates/new"))
        .header("cookie", jar.header())
        .header("sec-fetch-site", "same-origin")
        .form(&[
            ("topic", long.as_str()),
            ("agents", "demo-a"),
            ("agents", "demo-b"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 422);
    for (path, form) in [
        (
            "/login",
            &[("email", "not an email"), ("password", "x")][..],
        ),
        (
            "/register",
            &[("email", "x"), ("password", "short"), ("name", "")][..],
        ),
        ("/login/code", &[("code", "123456")][..]),
        ("/invite", &[("token", "garbage")][..]),
    ] {
        let response = browser()
            .post(format!("{base}{path}"))
            .header("sec-fetch-site", "same-origin")
            .form(form)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        assert!((300..500).contains(&status), "{path}: {status}");
        let kind = response.headers().get("content-type");
        assert!(
            kind.is_none_or(|t| t.to_str().unwrap().starts_with("text/html")),
            "{path}"
        );
    }
}

async fn unknown_paths_get_a_page_in_a_browser_and_json_elsewhere(kind: Kind) {
    let app = spawn(kind).await;
    for (path, accept, html) in [
        (
            "/no-such-page",
            "text/html,application/xhtml+xml,*/*;q=0.8",
            true,
        ),
        ("/no-such-page", "application/json", false),
        ("/api/no-such-page", "text/html,*/*", false),
    ] {
        let response = browser()
            .get(format!("{}{path}", app.base))
            .header("accept", accept)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404, "{path} {accept}");
        let kind = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_owned();
        if html {
            assert!(kind.starts_with("text/html"), "{kind}");
            assert_eq!(response.headers()["content-security-policy"], POLICY);
            assert!(
                response
                    .text()
                    .await
                    .unwrap()
                    .contains("<h1>Page not found</h1>")
            );
        } else {
            assert!(
                kind.starts_with("application/json"),
                "{path} {accept}: {kind}"
            );
        }
    }
}
