//! `/leaderboard` shows the same ranking as `GET /api/leaderboard`.

use std::time::Duration;

use super::account::get;
use super::{spawn, ui_sign_in};
use crate::support::provider::{create_debate, wait_finished};
use crate::support::{Kind, client, on_both_backends};

on_both_backends! {
    the_leaderboard_page_equals_the_api => the_leaderboard_page_equals_the_api;
}

/// The cells of each body row of the page's table, tags stripped.
fn rows(html: &str) -> Vec<Vec<String>> {
    let Some(start) = html.find("<tbody>") else {
        return Vec::new();
    };
    let body = &html[start..html.find("</tbody>").unwrap()];
    body.split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("</t")
                .filter_map(|cell| cell.rfind('>').map(|i| cell[i + 1..].trim().to_owned()))
                .filter(|cell| !cell.is_empty())
                .collect()
        })
        .collect()
}

async fn the_leaderboard_page_equals_the_api(kind: Kind) {
    let app = spawn(kind).await;
    let jar = ui_sign_in(&app.base, "ranks@example.com").await;
    let (status, html) = get(&app.base, &jar, "/leaderboard").await;
    assert_eq!(status, 200);
    assert!(html.contains("No agent has finished a debate yet."));
    let client = client();
    let id = create_debate(&client, &app.base, &["demo-a", "demo-b"], 1).await;
    wait_finished(&client, &app.base, &id).await;
    let api = loop {
        let body: serde_json::Value = client
            .get(format!("{}/api/leaderboard?limit=100", app.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if body["total"].as_u64().unwrap_or(0) >= 2 {
            break body;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let wanted: Vec<Vec<String>> = api["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            vec![
                a["rank"].to_string(),
                a["name"].as_str().unwrap().to_owned(),
                format!("{:.1}", a["elo"].as_f64().unwrap()),
                a["debates"].to_string(),
                a["wins"].to_string(),
                a["losses"].to_string(),
                a["draws"].to_string(),
                a["failures"].to_string(),
            ]
        })
        .collect();
    let (_, html) = get(&app.base, &jar, "/leaderboard").await;
    assert_eq!(rows(&html), wanted, "{html}");
}
