//! The wire forms match their published schemas in `event-schemas/`.

use std::collections::BTreeSet;

use agon_projections::Cursor;
use serde_json::Value;

use crate::support::{Kind, fill_stream, fresh, settled_feed};

fn schema(name: &str) -> Value {
    let path = format!("{}/event-schemas/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn keys(value: &Value) -> BTreeSet<String> {
    value.as_object().unwrap().keys().cloned().collect()
}

fn required(schema: &Value) -> BTreeSet<String> {
    schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn seal_bodies_and_envelopes_have_exactly_the_schema_fields() {
    let store = fresh(Kind::Sqlite).await;
    fill_stream(&store.log, "tally", "s", 2).await;
    let key = agon::crypto::signing::SealKey::load_or_create(None, store.dir.path()).unwrap();
    let seal = store.log.seal_now(&key).await.unwrap().unwrap();
    let body = serde_json::to_value(&seal).unwrap();
    let seal_schema = schema("seal.v1.json");
    assert_eq!(keys(&body), required(&seal_schema));
    assert_eq!(keys(&body), keys(&seal_schema["properties"]));
    assert_eq!(
        keys(&body["from"]),
        required(&seal_schema["$defs"]["cursor"])
    );

    let record = settled_feed(&store.log, 2)
        .await
        .remove(0)
        .into_record()
        .unwrap();
    assert!(record.cursor > Cursor::START);
    let envelope = serde_json::to_value(&record).unwrap();
    let envelope_schema = schema("envelope.v1.json");
    assert_eq!(keys(&envelope), required(&envelope_schema));
    assert_eq!(keys(&envelope), keys(&envelope_schema["properties"]));
    for field in required(&envelope_schema["properties"]["metadata"]) {
        assert!(
            envelope["metadata"].get(&field).is_some(),
            "metadata lacks {field}"
        );
    }
}
