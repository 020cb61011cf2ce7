//! The NATS JetStream bus against real nats-server processes.

use std::sync::Arc;
use std::time::Duration;

use agon::bus::{Bus, Identity, NatsBus};
use agon::store::EventLog;
use tokio_util::sync::CancellationToken;

use crate::support::{
    Kind, LoopbackServer, Recorder, assert_complete_and_ordered, fresh, on_both_backends,
    write_concurrently,
};

on_both_backends! {
    writers_reach_consumers_through_jetstream => writers_reach_consumers_through_jetstream;
    nats_restart_mid_stream_loses_nothing => nats_restart_mid_stream_loses_nothing;
    a_new_nats_server_gets_the_whole_log_again => a_new_nats_server_gets_the_whole_log_again;
    a_message_of_another_deployment_is_never_applied => a_message_of_another_deployment_is_never_applied;
    a_restart_binds_the_same_durable_at_the_checkpoint => a_restart_binds_the_same_durable_at_the_checkpoint;
}

/// A bus of deployment `test`, replica `r`.
async fn connect(url: &str) -> NatsBus {
    connect_as(url, "test", "r").await
}

async fn connect_as(url: &str, deployment: &str, replica: &str) -> NatsBus {
    let identity = Identity::new(deployment, replica).unwrap();
    NatsBus::connect(url, identity).await.unwrap()
}

fn spawn_bus(bus: &Bus, log: &EventLog, consumers: &[Arc<Recorder>], stop: &CancellationToken) {
    bus.spawn_relay(log, stop);
    for consumer in consumers {
        bus.spawn_consumer(log, consumer.clone(), stop);
    }
}

async fn writers_reach_consumers_through_jetstream(kind: Kind) {
    let server = LoopbackServer::nats().await;
    let store = fresh(kind).await;
    let bus = Bus::Nats(Box::new(connect(&server.url()).await));
    let stop = CancellationToken::new();
    let (a, b) = (
        Recorder::new("consumer-a", &store.log),
        Recorder::new("consumer-b", &store.log),
    );
    spawn_bus(&bus, &store.log, &[a.clone(), b.clone()], &stop);
    write_concurrently(&store.log, "w", 16, 500).await;
    for recorder in [&a, &b] {
        let seen = recorder.wait_for(8_000, Duration::from_secs(90)).await;
        assert_complete_and_ordered(&seen, 16, 500);
    }
    stop.cancel();
}

async fn nats_restart_mid_stream_loses_nothing(kind: Kind) {
    let mut server = LoopbackServer::nats().await;
    let store = fresh(kind).await;
    let bus = Bus::Nats(Box::new(connect(&server.url()).await));
    let stop = CancellationToken::new();
    let recorder = Recorder::new("survivor", &store.log);
    spawn_bus(&bus, &store.log, std::slice::from_ref(&recorder), &stop);

    write_concurrently(&store.log, "a", 4, 50).await;
    assert_eq!(
        recorder.wait_for(200, Duration::from_secs(30)).await.len(),
        200
    );

    server.stop();
    // Commands still commit while NATS is down.
    write_concurrently(&store.log, "b", 4, 50).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.restart().await;
    write_concurrently(&store.log, "c", 4, 50).await;

    let seen = recorder.wait_for(600, Duration::from_secs(90)).await;
    assert_complete_and_ordered(&seen, 12, 50);
    stop.cancel();
}

async fn a_new_nats_server_gets_the_whole_log_again(kind: Kind) {
    let store = fresh(kind).await;
    {
        let first = LoopbackServer::nats().await;
        let bus = Bus::Nats(Box::new(connect(&first.url()).await));
        let stop = CancellationToken::new();
        let recorder = Recorder::new("before", &store.log);
        spawn_bus(&bus, &store.log, std::slice::from_ref(&recorder), &stop);
        write_concurrently(&store.log, "a", 3, 20).await;
        assert_eq!(
            recorder.wait_for(60, Duration::from_secs(30)).await.len(),
            60
        );
        stop.cancel();
    }
    // All of NATS's data is gone; the relay's checkpoint in the database is not.
    let second = LoopbackServer::nats().await;
    let bus = Bus::Nats(Box::new(connect(&second.url()).await));
    let stop = CancellationToken::new();
    let recorder = Recorder::new("after", &store.log);
    spawn_bus(&bus, &store.log, std::slice::from_ref(&recorder), &stop);
    write_concurrently(&store.log, "b", 1, 5).await;
    let seen = recorder.wait_for(65, Duration::from_secs(30)).await;
    assert_eq!(
        seen.len(),
        65,
        "every event, old and new, reached the new server"
    );
    stop.cancel();
}

async fn a_message_of_another_deployment_is_never_applied(kind: Kind) {
    let server = LoopbackServer::nats().await;
    let store = fresh(kind).await;
    let bus = Bus::Nats(Box::new(connect_as(&server.url(), "blue", "r").await));
    let stop = CancellationToken::new();
    let recorder = Recorder::new("guarded", &store.log);
    spawn_bus(&bus, &store.log, std::slice::from_ref(&recorder), &stop);
    write_concurrently(&store.log, "a", 2, 5).await;
    let seen = recorder.wait_for(10, Duration::from_secs(30)).await;
    assert_eq!(seen.len(), 10);

    // Far ahead in the feed: applied, it would move the checkpoint past
    // every later event of our own.
    let mut foreign = seen[0].clone();
    foreign.event_id = "foreign".to_owned();
    foreign.cursor.txid = i64::MAX / 2;
    foreign.cursor.position = i64::MAX / 2;
    let client = async_nats::connect(server.url()).await.unwrap();
    let jetstream = async_nats::jetstream::new(client);
    let body = serde_json::to_vec(&foreign).unwrap();
    for deployment in [Some("green"), None] {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", format!("foreign-{deployment:?}").as_str());
        if let Some(deployment) = deployment {
            headers.insert(agon::bus::nats::DEPLOYMENT_HEADER, deployment);
        }
        jetstream
            .publish_with_headers("agon.blue.events.tally.a0", headers, body.clone().into())
            .await
            .unwrap()
            .await
            .unwrap();
    }

    write_concurrently(&store.log, "b", 2, 5).await;
    let seen = recorder.wait_for(20, Duration::from_secs(30)).await;
    assert!(seen.iter().all(|e| e.event_id != "foreign"), "applied");
    assert_complete_and_ordered(&seen, 4, 5);
    // The checkpoint follows our own events only (it is saved just after
    // the recorder notes a batch).
    let newest = seen.iter().map(|e| e.cursor).max().unwrap();
    let mut checkpoint = store.log.load_checkpoint("guarded").await.unwrap();
    for _ in 0..100 {
        if checkpoint == newest {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        checkpoint = store.log.load_checkpoint("guarded").await.unwrap();
    }
    assert_eq!(checkpoint, newest);
    stop.cancel();
}

/// The durable `name` of deployment `test` on the server at `url`.
async fn durable_info(url: &str, name: &str) -> async_nats::jetstream::consumer::Info {
    let client = async_nats::connect(url).await.unwrap();
    let stream = async_nats::jetstream::new(client)
        .get_stream("AGON_test_EVENTS")
        .await
        .unwrap();
    stream.consumer_info(name).await.unwrap()
}

/// Every consumer name on deployment `test`'s stream, sorted.
pub async fn consumer_names(url: &str, stream: &str) -> Vec<String> {
    use futures::TryStreamExt;
    let client = async_nats::connect(url).await.unwrap();
    let stream = async_nats::jetstream::new(client)
        .get_stream(stream)
        .await
        .unwrap();
    let mut names: Vec<String> = stream.consumer_names().try_collect().await.unwrap();
    names.sort();
    names
}

async fn a_restart_binds_the_same_durable_at_the_checkpoint(kind: Kind) {
    let server = LoopbackServer::nats().await;
    let store = fresh(kind).await;
    write_concurrently(&store.log, "old", 3, 100).await;
    let mut created = None;
    for (round, replica) in ["r", "r", "r", "r2"].into_iter().enumerate() {
        let bus = Bus::Nats(Box::new(connect_as(&server.url(), "test", replica).await));
        let stop = CancellationToken::new();
        let recorder = Recorder::new("steady", &store.log);
        spawn_bus(&bus, &store.log, std::slice::from_ref(&recorder), &stop);
        write_concurrently(&store.log, &format!("round{round}-"), 1, 10).await;
        let expected = if round == 0 { 310 } else { 10 };
        let seen = recorder.wait_for(expected, Duration::from_secs(30)).await;
        assert_eq!(
            seen.len(),
            expected,
            "round {round}: only what lies after the checkpoint"
        );
        let info = durable_info(&server.url(), &format!("test_steady_{replica}")).await;
        match (round, replica) {
            (0, _) => created = Some(info.created),
            (_, "r") => {
                assert_eq!(
                    Some(info.created),
                    created,
                    "round {round}: the durable is reused"
                );
                assert_eq!(
                    consumer_names(&server.url(), "AGON_test_EVENTS").await,
                    ["test_steady_r"]
                );
            }
            _ => {
                // A new replica's durable starts at the checkpoint rather
                // than at the first of the 340 messages.
                assert!(
                    info.delivered.consumer_sequence <= 10,
                    "{:?}",
                    info.delivered
                );
            }
        }
        stop.cancel();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
