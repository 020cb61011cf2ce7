//! Tampering with any stored event or seal is caught and named.

use agon::crypto::signing::SealKey;
use agon::store::EventLog;
use agon::store::verify::Problem;

use crate::support::{Kind, TestStore, fill_stream, fresh, on_both_backends, settled_feed};

on_both_backends! {
    an_intact_log_verifies => an_intact_log_verifies;
    a_changed_payload_byte_is_named => a_changed_payload_byte_is_named;
    a_deleted_event_is_named => a_deleted_event_is_named;
    swapped_events_are_named => swapped_events_are_named;
    an_altered_seal_is_named => an_altered_seal_is_named;
    a_deleted_stream_tail_breaks_its_seal => a_deleted_stream_tail_breaks_its_seal;
    a_rewritten_chain_breaks_its_seal => a_rewritten_chain_breaks_its_seal;
    a_foreign_key_is_not_trusted => a_foreign_key_is_not_trusted;
}

/// Three streams of five events, sealed, then two more unsealed events.
pub async fn sealed_store(kind: Kind) -> (TestStore, SealKey) {
    let store = fresh(kind).await;
    let key = SealKey::load_or_create(None, store.dir.path()).unwrap();
    for id in ["s1", "s2", "s3"] {
        fill_stream(&store.log, "tally", id, 5).await;
    }
    settled_feed(&store.log, 15).await;
    let seal = store.log.seal_now(&key).await.unwrap().unwrap();
    assert_eq!((seal.seal_number, seal.event_count), (1, 15));
    fill_stream(&store.log, "tally", "s4", 2).await;
    settled_feed(&store.log, 17).await;
    (store, key)
}

pub async fn exec(log: &EventLog, sql: &str) {
    use agon::store::Db;
    let affected = match log.db() {
        Db::Sqlite { writer, .. } => sqlx::query(sql)
            .execute(writer)
            .await
            .unwrap()
            .rows_affected(),
        Db::Postgres(pool) => sqlx::query(sql)
            .execute(pool)
            .await
            .unwrap()
            .rows_affected(),
    };
    assert!(affected > 0, "tampering changed nothing: {sql}");
}

async fn problem(store: &TestStore, key: &SealKey) -> Problem {
    let report = store.log.verify(&key.public_hex()).await.unwrap();
    report.problem.expect("verification should fail")
}

fn event_problem(problem: &Problem) -> (&str, i64, &str) {
    match problem {
        Problem::Event {
            aggregate_id,
            sequence,
            fault,
            ..
        } => (aggregate_id.as_str(), *sequence, fault.as_str()),
        Problem::Seal { .. } => panic!("expected an event problem, got {problem}"),
    }
}

fn seal_problem(problem: &Problem) -> (i64, &str) {
    match problem {
        Problem::Seal {
            seal_number, fault, ..
        } => (*seal_number, fault.as_str()),
        Problem::Event { .. } => panic!("expected a seal problem, got {problem}"),
    }
}

/// Changes the 30th character of a payload (inside the note) from `x` to `y`.
pub const FLIP_PAYLOAD_BYTE: &str = "UPDATE events SET payload = substr(payload, 1, 29) || 'y' || substr(payload, 31) \
     WHERE aggregate_id = 's2' AND sequence = 3";

async fn an_intact_log_verifies(kind: Kind) {
    let (store, key) = sealed_store(kind).await;
    let report = store.log.verify(&key.public_hex()).await.unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(
        (
            report.events_checked,
            report.streams_checked,
            report.seals_checked,
            report.unsealed_events
        ),
        (17, 4, 1, 2)
    );
    let second = store.log.seal_now(&key).await.unwrap().unwrap();
    assert_eq!((second.seal_number, second.event_count), (2, 2));
    assert!(
        store.log.seal_now(&key).await.unwrap().is_none(),
        "nothing new to seal"
    );
    let report = store.log.verify(&key.public_hex()).await.unwrap();
    assert!(report.intact() && report.unsealed_events == 0, "{report:?}");
}

async fn a_changed_payload_byte_is_named(kind: Kind) {
    let (store, key) = sealed_store(kind).await;
    exec(&store.log, FLIP_PAYLOAD_BYTE).await;
    let problem = problem(&store, &key).await;
    let (id, sequence, fault) = event_problem(&problem);
    assert_eq!((id, sequence), ("s2", 3));
    assert!(fault.contains("hash does not match"), "{fault}");
}

async fn a_deleted_event_is_named(kind: Kind) {
    let (store, key) = sealed_store(kind).await;
    exec(
        &store.log,
        "DELETE FROM events WHERE aggregate_id = 's1' AND sequence = 2",
    )
    .await;
    let problem = problem(&store, &key).await;
    let (id, sequence, fault) = event_problem(&problem);
    assert_eq!((id, sequence), ("s1", 3));
    assert!(fault.contains("sequence 2 is missing"), "{fault}");
}

async fn swapped_events_are_named(kind: Kind) {
    let (store, key) = sealed_store(kind).await;
    let rows = store.log.load_stream("tally", "s3", 0).await.unwrap();
    let (second, third) = (&rows[1], &rows[2]);
    for (target, source) in [(second, third), (third, second)] {
        exec(
            &store.log,
            &format!(
                "UPDATE events SET payload = '{}', metadata = '{}' WHERE position = {}",
                source.payload, source.metadata, target.position
            ),
        )
        .await;
    }
    let problem = problem(&store, &key).await;
    assert_eq!(event_problem(&problem).0, "s3");
    assert_eq!(event_problem(&problem).1, 2);
}

async fn an_altered_seal_is_named(kind: Kind) {
    let (store, key) = sealed_store(kind).await;
    exec(
        &store.log,
        "UPDATE seals SET body = replace(body, '\"event_count\":15', '\"event_count\":14')",
    )
    .await;
    let problem = problem(&store, &key).await;
    let (number, fault) = seal_problem(&problem);
    assert_eq!(number, 1);
    assert!(fault.contains("seal_hash"), "{fault}");
}

async fn a_deleted_stream_tail_breaks_its_seal(kind: Kind) {
    let (store, key) = sealed_store(kind).await;
    // Deleting the last event of a stream leaves every chain consistent;
    // only the seal over it can tell.
    exec(
        &store.log,
        "DELETE FROM events WHERE aggregate_id = 's3' AND sequence = 5",
    )
    .await;
    let problem = problem(&store, &key).await;
    let (number, fault) = seal_problem(&problem);
    assert_eq!(number, 1);
    assert!(fault.contains("covers 15 events but 14"), "{fault}");
}

async fn a_rewritten_chain_breaks_its_seal(kind: Kind) {
    let (store, key) = sealed_store(kind).await;
    // An attacker with write access rewrites an event and recomputes its hash
    // (it is the stream's last, so no successor links to it).
    let rows = store.log.load_stream("tally", "s1", 0).await.unwrap();
    let last = rows.last().unwrap();
    let forged_payload = last.payload.replace("xxxx", "yyyy");
    let mut forged = last.clone();
    forged.payload = forged_payload.clone();
    let forged_hash = forged
        .recompute_hash(&last.stored_prev_hash().unwrap())
        .unwrap();
    exec(
        &store.log,
        &format!(
            "UPDATE events SET payload = '{forged_payload}', hash = {} WHERE position = {}",
            blob_literal(store.kind, &forged_hash),
            last.position
        ),
    )
    .await;
    let problem = problem(&store, &key).await;
    let (number, fault) = seal_problem(&problem);
    assert_eq!(number, 1);
    assert!(fault.contains("Merkle root"), "{fault}");
}

async fn a_foreign_key_is_not_trusted(kind: Kind) {
    let (store, _key) = sealed_store(kind).await;
    let other = SealKey::load_or_create(Some(&"22".repeat(32)), store.dir.path()).unwrap();
    let problem = problem(&store, &other).await;
    let (number, fault) = seal_problem(&problem);
    assert_eq!(number, 1);
    assert!(fault.contains("not the trusted key"), "{fault}");
}

pub fn blob_literal(kind: Kind, bytes: &[u8]) -> String {
    match kind {
        Kind::Sqlite => format!("X'{}'", hex::encode(bytes)),
        Kind::Postgres => format!("'\\x{}'::bytea", hex::encode(bytes)),
    }
}
