//! The live debate page and `/ws?format=html` from outside: the recorded
//! page holds every contribution and the consensus; the HTML mode streams
//! escaped fragments that replace their elements by id, drafts before the
//! recorded message; a replay from any position repeats and misses
//! nothing; hostile agent text stays text; the session cookie opens `/ws`
//! only from the service's own origin.

use std::time::Duration;

use futures::StreamExt;
use reqwest::Method;
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::{Jar, browser, ui_sign_in};
use crate::support::accounts::call;
use crate::support::{Kind, on_both_backends};
use crate::ws::{Socket, live, next};

on_both_backends! {
    the_recorded_page_shows_every_contribution_and_the_consensus => the_recorded_page_shows_every_contribution_and_the_consensus;
    html_fragments_stream_by_id_and_a_replay_repeats_and_misses_nothing => html_fragments_stream_by_id_and_a_replay_repeats_and_misses_nothing;
    the_cookie_opens_the_socket_only_from_our_own_origin => the_cookie_opens_the_socket_only_from_our_own_origin;
    a_long_debate_shows_its_rounds_a_page_at_a_time => a_long_debate_shows_its_rounds_a_page_at_a_time;
}

/// Agent text the demo agents quote back from the topic.
const HOSTILE: &str = "<img src=x onerror=alert(1)> [x](javascript:alert(1))";

/// Starts a two-round debate of three demo agents through the form.
async fn start(base: &str, jar: &Jar) -> String {
    let created = browser()
        .post(format!("{base}/debates/new"))
        .header("cookie", jar.header())
        .header("sec-fetch-site", "same-origin")
        .form(&[
            ("topic", HOSTILE),
            ("agents", "demo-a"),
            ("agents", "demo-b"),
            ("agents", "demo-c"),
            ("rounds", "2"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 303);
    created.headers()["location"].to_str().unwrap().to_owned()
}

async fn page(base: &str, jar: &Jar, path: &str) -> String {
    let response = browser()
        .get(format!("{base}{path}"))
        .header("cookie", jar.header())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.text().await.unwrap()
}

/// The debate's detail once it has ended.
async fn ended(base: &str, jar: &Jar, id: &str) -> Value {
    let url = format!("{base}/api/debates/{id}");
    for _ in 0..600 {
        let (status, detail) = call(Method::GET, &url, Some(&jar.session), None).await;
        assert_eq!(status, 200, "{detail}");
        if matches!(detail["status"].as_str(), Some("completed" | "failed")) {
            return detail;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("debate {id} did not end");
}

/// The slot id of a (round, phase, agent), as the page names it.
fn slot_id(message: &Value) -> String {
    let slug = |s: &str| {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_string()
                } else {
                    format!("_{:x}", u32::from(c))
                }
            })
            .collect::<String>()
    };
    format!(
        "c-{}-{}-{}",
        message["round"],
        slug(message["phase"].as_str().unwrap()),
        slug(message["agent"].as_str().unwrap())
    )
}

/// Askama's escaping of text inside an element.
fn escaped(text: &str) -> String {
    text.replace('&', "&#38;")
        .replace('<', "&#60;")
        .replace('>', "&#62;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

fn assert_inert(html: &str) {
    assert!(!html.contains("<img"), "raw agent markup in {html}");
    assert!(
        !html.contains("href=\"javascript:"),
        "script link in {html}"
    );
    assert!(!html.contains("onerror=alert(1)>"), "{html}");
}

/// Nine contributions a page: the two-round debate of three agents (three
/// phases a round, nine contributions) shows one round a page, the last by
/// default, the other by its link; anything else asked is the default.
async fn a_long_debate_shows_its_rounds_a_page_at_a_time(kind: Kind) {
    let live = live(kind, &[("SERVICE_UI_DEBATE_CONTRIBUTIONS", "9")]).await;
    let base = &live.app.base;
    let jar = ui_sign_in(base, "rhea@example.com").await;
    let path = start(base, &jar).await;
    let id = path.trim_start_matches("/debates/");
    let detail = ended(base, &jar, id).await;
    let in_round = |round: u64| {
        detail["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(move |m| m["round"].as_u64() == Some(round))
            .map(|m| format!("id=\"{}\"", slot_id(m)))
            .collect::<Vec<_>>()
    };
    let (first, second) = (in_round(1), in_round(2));
    assert!(!first.is_empty() && !second.is_empty(), "{detail}");
    let shows = |html: &str, slots: &[String]| slots.iter().all(|slot| html.contains(slot));
    let misses = |html: &str, slots: &[String]| slots.iter().all(|slot| !html.contains(slot));

    let last = page(base, &jar, &path).await;
    assert!(shows(&last, &second) && misses(&last, &first), "{last}");
    assert!(last.contains("Round 2 of 2 shown."), "{last}");
    assert!(
        last.contains(&format!("<a href=\"/debates/{id}?round=1\">Round 1</a>")),
        "{last}"
    );
    assert!(
        last.contains(&format!(
            "<a href=\"/debates/{id}?round=2\" aria-current=\"page\">Round 2</a>"
        )),
        "{last}"
    );
    // The consensus stays on every page.
    assert!(last.contains("<meter id=\"confidence\""));

    let earlier = page(base, &jar, &format!("{path}?round=1")).await;
    assert!(
        shows(&earlier, &first) && misses(&earlier, &second),
        "{earlier}"
    );
    assert!(earlier.contains("Round 1 of 2 shown."), "{earlier}");
    for odd in ["0", "3", "x", ""] {
        let html = page(base, &jar, &format!("{path}?round={odd}")).await;
        assert!(
            shows(&html, &second) && misses(&html, &first),
            "round={odd}"
        );
    }
    live.app.stop.cancel();
}

async fn the_recorded_page_shows_every_contribution_and_the_consensus(kind: Kind) {
    let live = live(kind, &[]).await;
    let base = &live.app.base;
    let jar = ui_sign_in(base, "lou@example.com").await;
    let path = start(base, &jar).await;
    let id = path.trim_start_matches("/debates/");
    let detail = ended(base, &jar, id).await;
    let html = page(base, &jar, &path).await;
    let messages = detail["messages"].as_array().unwrap();
    assert!(messages.len() >= 6, "{detail}");
    for message in messages {
        let slot = format!("id=\"{}\"", slot_id(message));
        let at = html
            .find(&slot)
            .unwrap_or_else(|| panic!("no {slot} in {html}"));
        // Markdown now: its last line (plain prose) comes out as text.
        let content = message["content"].as_str().unwrap();
        let text = content
            .trim()
            .lines()
            .last()
            .unwrap()
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;");
        let end = html[at..].find("</article>").map_or(html.len(), |e| at + e);
        assert!(
            html[at..end].contains(&text),
            "{slot} lacks {text}: {}",
            &html[at..end]
        );
        assert!(html[at..].contains("ms"), "{slot} lacks its latency");
    }
    assert!(html.contains("id=\"consensus\""));
    assert!(html.contains("<dt>Phase</dt><dd>vote</dd>"), "{html}");
    assert!(html.contains("<meter id=\"confidence\""));
    let confidence = format!("{:.2}", detail["consensus"]["confidence"].as_f64().unwrap());
    assert!(html.contains(&format!("<strong>{confidence}</strong>")));
    // The synthesis's summary and key points are the consensus card's,
    // shown once: its own section points up to them.
    let point = detail["consensus"]["consensus"]["key_points"][0]
        .as_str()
        .unwrap();
    assert_eq!(
        html.matches(&format!("<li>{}</li>", escaped(point)))
            .count(),
        1,
        "{html}"
    );
    assert!(html.contains("are the consensus's, <a href=\"#consensus\">shown above</a>"));
    assert!(html.contains(&format!("/debates/{id}/export/md")));
    // Ended: nothing to follow.
    assert!(!html.contains("hx-ws:connect"));
    assert!(html.contains(&escaped(HOSTILE)));
    assert_inert(&html);

    // The export links: the API's detail and report, through the cookie.
    let json: Value =
        serde_json::from_str(&page(base, &jar, &format!("{path}/export/json")).await).unwrap();
    assert_eq!(json["messages"], detail["messages"]);
    let report = page(base, &jar, &format!("{path}/export/md")).await;
    assert!(report.contains("## Consensus"), "{report}");
    let first = messages[0]["content"].as_str().unwrap().trim();
    assert!(report.contains(first), "{report}");

    // Its creator publishes it from the page.
    assert!(html.contains(&format!("action=\"/debates/{id}/publish\"")));
    let published = browser()
        .post(format!("{base}{path}/publish"))
        .header("cookie", jar.header())
        .header("sec-fetch-site", "same-origin")
        .send()
        .await
        .unwrap();
    assert_eq!(published.status(), 303);
    let html = page(base, &jar, &path).await;
    assert!(html.contains("Published in the"), "{html}");
    assert!(!html.contains(&format!("action=\"/debates/{id}/publish\"")));
    live.app.stop.cancel();
}

/// A `/ws` upgrade request with the page's cookie from `origin`.
fn upgrade(
    ws: &str,
    query: &str,
    jar: &Jar,
    origin: &str,
) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    let mut request = format!("{ws}/ws?{query}").into_client_request().unwrap();
    let headers = request.headers_mut();
    headers.insert("cookie", jar.header().parse().unwrap());
    headers.insert("origin", origin.parse().unwrap());
    request
}

async fn open(request: tokio_tungstenite::tungstenite::handshake::client::Request) -> Socket {
    let (socket, response) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(response.status(), 101);
    socket
}

/// Text messages up to the first that holds `until`.
async fn texts(socket: &mut Socket, until: &str) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let message = tokio::time::timeout(Duration::from_secs(60), socket.next())
            .await
            .unwrap_or_else(|_| panic!("no fragment within 60 s after {out:?}"));
        match message {
            Some(Ok(Message::Text(text))) => {
                let done = text.contains(until);
                out.push(text.to_string());
                if done {
                    return out;
                }
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            other => panic!("socket ended: {other:?} after {out:?}"),
        }
    }
}

/// The fragments of `messages`: fragments queued together go out as one
/// message, and each begins with the one opening tag that carries
/// `hx-swap-oob` (nothing inside a fragment does).
fn fragments(messages: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for message in messages {
        let starts: Vec<usize> = message
            .match_indices('<')
            .map(|(at, _)| at)
            .filter(|&at| {
                let tag = &message[at..];
                let tag = &tag[..tag.find('>').unwrap_or(tag.len())];
                tag.contains("hx-swap-oob=")
            })
            .collect();
        assert_eq!(starts.first(), Some(&0), "not a fragment: {message}");
        let ends = starts.iter().skip(1).copied().chain([message.len()]);
        out.extend(
            starts
                .iter()
                .zip(ends)
                .map(|(&a, b)| message[a..b].to_owned()),
        );
    }
    out
}

/// Fragments of recorded events only (no drafts, no connection state).
fn recorded(fragments: &[String]) -> Vec<String> {
    fragments
        .iter()
        .filter(|f| {
            !f.contains("slot draft")
                && !f.contains("hx-swap-oob=\"beforeend:")
                && !f.starts_with("<p id=\"conn\"")
        })
        .cloned()
        .collect()
}

async fn html_fragments_stream_by_id_and_a_replay_repeats_and_misses_nothing(kind: Kind) {
    let live = live(kind, &[("SERVICE_DEMO_DELTA_DELAY_MS", "15")]).await;
    let (base, ws) = (&live.app.base, &live.ws);
    let jar = ui_sign_in(base, "kit@example.com").await;
    let path = start(base, &jar).await;
    let id = path.trim_start_matches("/debates/").to_owned();
    let html = page(base, &jar, &path).await;
    let url = html
        .split("hx-ws:connect=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a running debate's page follows it")
        .replace("&amp;", "&")
        .replace("&#38;", "&");
    let query = url.trim_start_matches("/ws?").to_owned();
    assert!(
        query.contains("format=html") && query.contains("since="),
        "{query}"
    );

    // Live: drafts stream into slots, then the recorded message replaces them.
    let mut socket = open(upgrade(ws, &query, &jar, base)).await;
    let first = fragments(&texts(&mut socket, "id=\"after\"").await);
    let detail = ended(base, &jar, &id).await;
    for fragment in &first {
        assert_inert(fragment);
        assert!(fragment.contains("hx-swap-oob"), "{fragment}");
        assert!(!fragment.contains("\"type\""), "a JSON frame: {fragment}");
    }
    // The header follows the closing stages too: the synthesis, then the
    // vote (no round message names them).
    let phases: Vec<&str> = first
        .iter()
        .filter(|f| f.contains("id=\"facts\""))
        .filter_map(|f| f.split("<dt>Phase</dt><dd>").nth(1)?.split('<').next())
        .collect();
    let synthesis = phases.iter().position(|p| *p == "synthesis");
    let vote = phases.iter().position(|p| *p == "vote");
    assert!(
        synthesis.is_some() && vote.is_some() && synthesis < vote,
        "{phases:?}"
    );
    // Once drawn, a draft grows by its next pieces alone (each an escaped
    // text added to the draft's text), never by the whole slot again. A
    // draft first seen whole has no pieces left to add (on a busy machine
    // the socket may catch up after an agent's last piece): at least one
    // of the debate's drafts must show its pieces, and none is redrawn.
    let mut drafts: Vec<(usize, &str)> = Vec::new();
    for (at, fragment) in first.iter().enumerate() {
        if fragment.contains("slot draft") {
            let id = fragment
                .split("id=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap();
            if !drafts.iter().any(|(_, seen)| *seen == id) {
                drafts.push((at, id));
            }
        }
    }
    assert!(!drafts.is_empty(), "no streamed draft");
    let mut appended: Vec<&String> = Vec::new();
    for &(drafted, draft_id) in &drafts {
        let recorded_at = first
            .iter()
            .position(|f| f.contains(&format!("id=\"{draft_id}\" class=\"card slot\"")))
            .unwrap_or_else(|| panic!("{draft_id}: the draft's message was never recorded"));
        assert!(drafted < recorded_at, "{draft_id}");
        let between = &first[drafted + 1..recorded_at];
        let append = format!("<div hx-swap-oob=\"beforeend:#{draft_id}-text\">");
        appended.extend(between.iter().filter(|f| f.starts_with(&append)));
        assert!(
            !between
                .iter()
                .any(|f| f.contains(&format!("id=\"{draft_id}\" class=\"card slot draft\""))),
            "{draft_id}: the draft was drawn again for pieces in order"
        );
    }
    assert!(
        !appended.is_empty(),
        "no piece was appended to any of {} drafts",
        drafts.len()
    );
    for fragment in appended {
        assert!(!fragment.contains("<article"), "{fragment}");
    }
    for message in detail["messages"].as_array().unwrap() {
        let slot = format!("id=\"{}\" class=\"card slot\"", slot_id(message));
        let count = first.iter().filter(|f| f.contains(&slot)).count();
        assert!(count <= 1, "{slot} recorded {count} times");
    }
    assert!(first.iter().any(|f| f.contains("id=\"consensus\"")));
    assert!(
        first
            .iter()
            .any(|f| f.contains("hx-swap-oob=\"innerHTML:#announcer\""))
    );
    assert!(
        !first
            .iter()
            .any(|f| f.contains("slot draft") && f.contains("#announcer")),
        "a draft was announced"
    );
    drop(socket);

    // The same position again, after the end: the same recorded fragments.
    let mut again = open(upgrade(ws, &query, &jar, base)).await;
    let messages = texts(&mut again, "id=\"after\"").await;
    let replay = fragments(&messages);
    assert_eq!(recorded(&replay), recorded(&first));
    // Queued together, a replay's events go out together (each event
    // announces itself once).
    assert!(
        messages
            .iter()
            .any(|m| m.matches("innerHTML:#announcer").count() > 1),
        "one event a message: {} of them",
        messages.len()
    );

    // From a position in the middle: exactly what followed it.
    let since: i64 = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("since="))
        .unwrap()
        .parse()
        .unwrap();
    let mut json = crate::ws::connect(&format!(
        "{ws}/ws?token={}&debate_id={id}&since={since}",
        jar.session
    ))
    .await;
    let mut messages = Vec::new();
    while let Some(frame) = next(&mut json).await {
        if frame["type"] == "debate_end" {
            break;
        }
        if frame["type"] == "agent_message" || frame["type"] == "critique" {
            messages.push(frame);
        }
    }
    let middle = &messages[messages.len() / 2];
    let position = middle["position"].as_i64().unwrap();
    let slot = format!("id=\"{}\" class=\"card slot\"", slot_id(&middle["data"]));
    let all = recorded(&replay);
    let at = all.iter().position(|f| f.contains(&slot)).unwrap();
    let later = query.replace(&format!("since={since}"), &format!("since={position}"));
    let mut resumed = open(upgrade(ws, &later, &jar, base)).await;
    let rest = fragments(&texts(&mut resumed, "id=\"after\"").await);
    // The middle message's event drew its slot, the header and a line for
    // the live region; what came after it comes again.
    assert!(all[at + 2].contains("#announcer"), "{:?}", &all[at..]);
    assert_eq!(recorded(&rest), all[at + 3..].to_vec());
    live.app.stop.cancel();
}

async fn the_cookie_opens_the_socket_only_from_our_own_origin(kind: Kind) {
    let live = live(kind, &[]).await;
    let (base, ws) = (&live.app.base, &live.ws);
    let jar = ui_sign_in(base, "ivy@example.com").await;
    let path = start(base, &jar).await;
    let id = path.trim_start_matches("/debates/");
    let query = format!("debate_id={id}&since=1&format=html");

    let foreign = "http://127.0.0.1:9";
    match tokio_tungstenite::connect_async(upgrade(ws, &query, &jar, foreign)).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 403);
        }
        other => panic!("a foreign origin opened a socket: {:?}", other.map(|r| r.1)),
    }
    // Without an Origin (not a browser page) the cookie counts for nothing.
    let mut bare = format!("{ws}/ws?{query}").into_client_request().unwrap();
    bare.headers_mut()
        .insert("cookie", jar.header().parse().unwrap());
    match tokio_tungstenite::connect_async(bare).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), 401);
        }
        other => panic!(
            "a cookie without Origin opened a socket: {:?}",
            other.map(|r| r.1)
        ),
    }
    let mut own = open(upgrade(ws, &query, &jar, base)).await;
    // Up to the connection state: the debate may end while it replays, and
    // its end (which sets the state too) may come in a message of its own.
    let messages = fragments(&texts(&mut own, "id=\"conn\"").await);
    assert!(
        messages.iter().any(|m| m.contains("Connection: ")),
        "{messages:?}"
    );
    live.app.stop.cancel();
}
