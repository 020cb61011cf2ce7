//! The NATS JetStream bus against real nats-server processes.

use std::sync::Arc;
use std::time::Duration;

use agon::bus::{Bus, NatsBus};
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
    let bus = Bus::Nats(Box::new(NatsBus::connect(&server.url()).await.unwrap()));
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
    let bus = Bus::Nats(Box::new(NatsBus::connect(&server.url()).await.unwrap()));
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
        let bus = Bus::Nats(Box::new(NatsBus::connect(&first.url()).await.unwrap()));
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
    let bus = Bus::Nats(Box::new(NatsBus::connect(&second.url()).await.unwrap()));
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
