//! Token streaming over the WebSocket push (`agent.delta`): a client that
//! follows every debate sees each agent's text in pieces before the
//! recorded message, and the pieces of the last attempt make exactly the
//! recorded text; streamed provider answers (both wire formats, from a
//! fake provider streaming server-sent events) and demo agents alike; a
//! stream the provider cuts off is retried, never recorded half. On
//! PostgreSQL the pieces travel over core NATS.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use reqwest::Method;
use serde_json::{Value, json};

use crate::schemas::{Seen, conforms};
use crate::support::accounts::call;
use crate::support::provider::{Behavior, FakeProvider, answer_text, quiet_limits};
use crate::support::sse::pieces;
use crate::support::{Kind, TEST_TOKEN, on_both_backends};
use crate::ws::{Socket, connect, demo, live, next, schema};

on_both_backends! {
    demo_agents_write_in_pieces_before_their_messages => demo_agents_write_in_pieces_before_their_messages;
    streamed_answers_arrive_in_pieces_and_a_cut_stream_is_retried => streamed_answers_arrive_in_pieces_and_a_cut_stream_is_retried;
}

/// Every frame of debate `id`, deltas included, up to its `debate_end`.
async fn all_frames(socket: &mut Socket, id: &str) -> Vec<Value> {
    let mut frames = Vec::new();
    loop {
        let frame = next(socket).await.expect("closed before debate_end");
        if frame["debate_id"] != id {
            continue;
        }
        let end = frame["type"] == "debate_end";
        frames.push(frame);
        if end {
            return frames;
        }
    }
}

fn turn(data: &Value) -> String {
    format!(
        "{}/{}/{}",
        data["agent"].as_str().unwrap(),
        data["round"],
        data["phase"].as_str().unwrap()
    )
}

/// Checks the deltas against the recorded contributions: every delta meets
/// its schema and has no position; every agent_message and critique has
/// deltas before it, and the pieces of its last attempt, in order, are its
/// content. Returns the attempts seen per turn.
fn check_pieces(frames: &[Value]) -> BTreeMap<String, Vec<u64>> {
    let delta_schema = schema("agent.delta");
    let mut pieces: BTreeMap<String, Vec<(u64, u64, String)>> = BTreeMap::new();
    let mut recorded = 0;
    for frame in frames {
        let data = &frame["data"];
        match frame["type"].as_str().unwrap() {
            "agent.delta" => {
                if let Err(e) = conforms(frame, &delta_schema, "frame", "#", &mut Seen::default()) {
                    panic!("agent.delta: {e}\n{frame}");
                }
                assert!(frame.get("position").is_none(), "{frame}");
                pieces.entry(turn(data)).or_default().push((
                    data["attempt"].as_u64().unwrap(),
                    data["seq"].as_u64().unwrap(),
                    data["text"].as_str().unwrap().to_owned(),
                ));
            }
            "agent_message" | "critique" => {
                recorded += 1;
                let seen = pieces
                    .get(&turn(data))
                    .unwrap_or_else(|| panic!("no delta before {frame}"));
                let last = seen.iter().map(|p| p.0).max().unwrap();
                let mut latest: Vec<&(u64, u64, String)> =
                    seen.iter().filter(|p| p.0 == last).collect();
                latest.sort_by_key(|p| p.1);
                let text: String = latest.iter().map(|p| p.2.as_str()).collect();
                assert_eq!(text, data["content"].as_str().unwrap(), "{frame}");
            }
            _ => {}
        }
    }
    assert!(recorded > 0, "no recorded message among {frames:?}");
    pieces
        .into_iter()
        .map(|(turn, seen)| (turn, seen.iter().map(|p| p.0).collect()))
        .collect()
}

async fn demo_agents_write_in_pieces_before_their_messages(kind: Kind) {
    let live = live(kind, &[("SERVICE_DEMO_DELTA_DELAY_MS", "1")]).await;
    let mut watcher = connect(&format!("{}/ws?token={TEST_TOKEN}&all=true", live.ws)).await;
    let id = demo(&live.app.base, TEST_TOKEN, "Monorepo or many repos?").await;
    let frames = all_frames(&mut watcher, &id).await;
    let attempts = check_pieces(&frames);
    assert!(
        attempts.values().any(|a| a.len() > 1),
        "demo answers came in one piece each: {attempts:?}"
    );
    assert_eq!(frames.last().unwrap()["data"]["status"], "completed");
    live.app.stop.cancel();
}

async fn streamed_answers_arrive_in_pieces_and_a_cut_stream_is_retried(kind: Kind) {
    let fake = FakeProvider::start().await;
    let cut = Arc::new(AtomicBool::new(false));
    let first = cut.clone();
    fake.script(move |call| {
        if call.turn() == "claude/1/opening" && !first.swap(true, Ordering::SeqCst) {
            Behavior::CutOff
        } else {
            Behavior::Answer
        }
    });
    let mut env = fake.env();
    env.extend(quiet_limits());
    let vars: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let live = live(kind, &vars).await;
    let mut watcher = connect(&format!("{}/ws?token={TEST_TOKEN}&all=true", live.ws)).await;
    let body = json!({"topic": "Streams or batches?", "agents": ["claude", "gpt"], "rounds": 1});
    let url = format!("{}/api/debates", live.app.base);
    let (status, created) = call(Method::POST, &url, Some(TEST_TOKEN), Some(body)).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap();
    let frames = all_frames(&mut watcher, id).await;
    assert_eq!(frames.last().unwrap()["data"]["status"], "completed");
    let attempts = check_pieces(&frames);

    // The cut stream's piece came under attempt 1, the retry's under 2;
    // the recorded opening is the whole answer.
    assert!(cut.load(Ordering::SeqCst));
    let cut_turn = &attempts["claude/1/opening"];
    assert!(
        cut_turn.contains(&1) && cut_turn.contains(&2),
        "{cut_turn:?}"
    );
    assert_eq!(fake.turn_counts()["claude/1/opening"], 2);
    let opening = frames
        .iter()
        .find(|f| f["type"] == "agent_message" && turn(&f["data"]) == "claude/1/opening")
        .unwrap();
    let asked = fake
        .calls()
        .into_iter()
        .find(|c| c.turn() == "claude/1/opening")
        .unwrap();
    assert!(asked.stream, "the provider was not asked to stream");
    assert_eq!(opening["data"]["content"], answer_text(&asked));
    // Both wire formats streamed in several pieces.
    for agent in ["claude", "gpt"] {
        let key = format!("{agent}/1/opening");
        let expected = pieces(&answer_text(&asked_for(&fake, &key))).len();
        let last = *attempts[&key].iter().max().unwrap();
        let count = attempts[&key].iter().filter(|a| **a == last).count();
        assert_eq!(count, expected, "{key}: {attempts:?}");
        assert!(expected > 1);
    }
    live.app.stop.cancel();
}

fn asked_for(fake: &FakeProvider, turn: &str) -> crate::support::provider::Call {
    fake.calls().into_iter().find(|c| c.turn() == turn).unwrap()
}
