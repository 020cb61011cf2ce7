//! A UI request that may change something must come from the service's own
//! origin: a foreign `Sec-Fetch-Site` or `Origin` (or neither) gets a 403
//! page, and nothing changes.

use super::{browser, spawn, ui_sign_in};
use crate::support::accounts::admin_get;
use crate::support::{Kind, on_both_backends};

on_both_backends! {
    a_foreign_form_is_refused_and_changes_nothing => a_foreign_form_is_refused_and_changes_nothing;
}

async fn debates(base: &str) -> u64 {
    admin_get(base, "/api/debates?limit=100").await["total"]
        .as_u64()
        .unwrap()
}

async fn a_foreign_form_is_refused_and_changes_nothing(kind: Kind) {
    let app = spawn(kind).await;
    let base = &app.base;
    let jar = ui_sign_in(base, "fay@example.com").await;
    let host = base.trim_start_matches("http://");
    let form = [
        ("topic", "Forged?"),
        ("agents", "demo-a"),
        ("agents", "demo-b"),
        ("rounds", "1"),
    ];
    let foreign_port = "http://127.0.0.1:1";
    let refused: [&[(&str, &str)]; 5] = [
        &[("sec-fetch-site", "same-site"), ("origin", foreign_port)],
        &[("sec-fetch-site", "cross-site")],
        // A same-origin Origin does not outvote the browser's fetch metadata.
        &[("sec-fetch-site", "same-site"), ("origin", base)],
        &[("origin", foreign_port)],
        &[],
    ];
    for headers in refused {
        for path in ["/debates/new", "/logout"] {
            let mut request = browser()
                .post(format!("{base}{path}"))
                .header("cookie", jar.header())
                .form(&form);
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 403, "{path} {headers:?}");
            assert!(
                response.headers()["content-type"]
                    .to_str()
                    .unwrap()
                    .starts_with("text/html")
            );
            assert!(response.headers().get("set-cookie").is_none());
            let page = response.text().await.unwrap();
            assert!(page.contains("Request refused"), "{page}");
        }
    }
    assert_eq!(debates(base).await, 0, "no forged debate");
    let still = browser()
        .get(format!("{base}/debates/new"))
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    assert_eq!(still.status(), 200, "no forged sign-out");

    // Our own origin, by either header, is let through.
    for (name, value) in [
        ("sec-fetch-site", "same-origin".to_owned()),
        ("origin", format!("http://{host}")),
    ] {
        let response = browser()
            .post(format!("{base}/debates/new"))
            .header("cookie", jar.header())
            .header(name, value)
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 303, "{name}");
        let location = response.headers()["location"].to_str().unwrap().to_owned();
        assert!(location.starts_with("/debates/"), "{location}");
        let page = browser()
            .get(format!("{base}{location}"))
            .header("cookie", jar.header())
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 200);
        assert!(page.text().await.unwrap().contains("Forged?"));
    }
    assert_eq!(debates(base).await, 2);
}
