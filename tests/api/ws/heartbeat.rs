//! The heartbeat: the push pings every `SERVICE_WS_HEARTBEAT` seconds and
//! closes a socket that answered no ping since the previous one (4009),
//! while one that answers stays open.

use std::time::Duration;

use futures::StreamExt;
use tokio_tungstenite::tungstenite::Message;

use super::access::{answers, close_code};
use super::{connect, live};
use crate::support::{Kind, TEST_TOKEN};

/// The close code for a socket that missed a heartbeat.
const MISSED_HEARTBEAT: u16 = 4009;

#[tokio::test]
async fn a_socket_that_misses_a_pong_is_closed_and_one_that_answers_stays() {
    let live = live(Kind::Sqlite, &[("SERVICE_WS_HEARTBEAT", "1")]).await;
    let url = format!("{}/ws?token={TEST_TOKEN}&all=true", live.ws);
    let mut silent = connect(&url).await;
    let mut answering = connect(&url).await;
    // tungstenite answers each ping as it reads it; the silent client does
    // not read meanwhile.
    let mut pings = 0;
    let reading = async {
        loop {
            match answering.next().await {
                Some(Ok(Message::Ping(_))) => pings += 1,
                Some(Ok(Message::Close(frame))) => panic!("closed: {frame:?}"),
                Some(Ok(_)) => {}
                Some(Err(error)) => panic!("{error}"),
                None => panic!("ended"),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_millis(3_500), reading).await;
    assert!(pings >= 2, "{pings} pings in 3.5 s at one a second");
    answers(&mut answering).await;
    assert_eq!(close_code(&mut silent).await, MISSED_HEARTBEAT);
    live.app.stop.cancel();
}
