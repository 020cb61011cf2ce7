//! The wire forms match their published schemas in `event-schemas/`: the
//! seal and the envelope here, with the checker the event payloads go
//! through; the payload samples themselves are in `accounts` (account,
//! organization and email events) and `debates` (debate events).

mod accounts;
mod backups;
mod debates;
mod golden;
mod reviews;
mod webhooks;
mod ws;

use std::collections::{BTreeMap, BTreeSet};

use agon_projections::Cursor;
use chrono::{DateTime, TimeZone, Utc};
use cqrs_es::DomainEvent;
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

// Event payloads: `event-schemas/<aggregate_type>/<event_type>.v<version>.json`.

// The ids and the instants that the account and the debate samples share.
const USER: &str = "0b3f5c1e-8d2a-4c7e-9f10-2a6b7c8d9e0f";
const ORG: &str = "9e8d7c6b-5a49-4382-a716-05f4e3d2c1b0";

fn at(minute: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2027, 1, 15, 8, minute, 0).unwrap()
}

/// One event as stored: its stream type, names and serialized payload.
struct Sample {
    aggregate_type: &'static str,
    /// From the exhaustive `*_variant` helper, not from the event's own code.
    variant: &'static str,
    event_type: String,
    event_version: String,
    payload: Value,
}

impl Sample {
    fn new<E: DomainEvent>(aggregate_type: &'static str, variant: &'static str, event: &E) -> Self {
        Sample {
            aggregate_type,
            variant,
            event_type: event.event_type(),
            event_version: event.event_version(),
            payload: serde_json::to_value(event).unwrap(),
        }
    }

    fn file(&self) -> String {
        format!(
            "{}/{}.v{}.json",
            self.aggregate_type, self.event_type, self.event_version
        )
    }
}

/// What a walk of samples against one schema file saw: the values met at each
/// `enum` and the `oneOf` branches taken, by schema location.
#[derive(Default)]
pub(crate) struct Seen {
    enums: BTreeMap<String, BTreeSet<String>>,
    branches: BTreeSet<String>,
}

impl Seen {
    fn merge(&mut self, other: Seen) {
        for (at, values) in other.enums {
            self.enums.entry(at).or_default().extend(values);
        }
        self.branches.extend(other.branches);
    }
}

/// The keywords the schemas use and `conforms` checks; any other is refused
/// so that no constraint is silently skipped.
const KEYWORDS: [&str; 16] = [
    "$schema",
    "$id",
    "title",
    "description",
    "type",
    "enum",
    "const",
    "format",
    "minimum",
    "maximum",
    "pattern",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "oneOf",
];

/// Checks `value` (at `field`, a dotted path for messages) against the subset
/// of JSON Schema 2020-12 that the event schemas use, recording into `seen`
/// under the schema location `at`.
pub(crate) fn conforms(
    value: &Value,
    schema: &Value,
    field: &str,
    at: &str,
    seen: &mut Seen,
) -> Result<(), String> {
    let schema = schema
        .as_object()
        .ok_or_else(|| format!("{at}: schema is not an object"))?;
    if let Some(keyword) = schema.keys().find(|k| !KEYWORDS.contains(&k.as_str())) {
        return Err(format!(
            "{at}: keyword {keyword} is not checked by this test"
        ));
    }
    if let Some(types) = schema.get("type") {
        let types: Vec<&str> = match types {
            Value::Array(types) => types.iter().filter_map(Value::as_str).collect(),
            other => other.as_str().into_iter().collect(),
        };
        let actual = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        // An integer is also a JSON Schema number.
        let number = actual == "integer" && types.contains(&"number");
        if !types.contains(&actual) && !number {
            return Err(format!(
                "field {field}: {value} is of type {actual}, but the schema's type is {types:?}"
            ));
        }
    }
    if let Some(allowed) = schema.get("enum") {
        if !allowed.as_array().unwrap().contains(value) {
            return Err(format!(
                "field {field}: {value} is not one of the schema's enum {allowed}"
            ));
        }
        seen.enums
            .entry(at.to_owned())
            .or_default()
            .insert(value.to_string());
    }
    if let Some(constant) = schema.get("const")
        && constant != value
    {
        return Err(format!(
            "field {field}: {value} is not the schema's const {constant}"
        ));
    }
    if let (Some(format), Value::String(text)) = (schema.get("format"), value) {
        if format != "date-time" {
            return Err(format!("{at}: format {format} is not checked by this test"));
        }
        DateTime::parse_from_rfc3339(text)
            .map_err(|e| format!("field {field}: {text:?} is not an RFC 3339 date-time: {e}"))?;
    }
    if let (Some(minimum), Value::Number(n)) = (schema.get("minimum"), value)
        && n.as_f64() < minimum.as_f64()
    {
        return Err(format!("field {field}: {n} is below the minimum {minimum}"));
    }
    if let (Some(maximum), Value::Number(n)) = (schema.get("maximum"), value)
        && n.as_f64() > maximum.as_f64()
    {
        return Err(format!("field {field}: {n} is above the maximum {maximum}"));
    }
    if let (Some(pattern), Value::String(text)) = (schema.get("pattern"), value) {
        let pattern = pattern.as_str().unwrap();
        let length: usize = pattern
            .strip_prefix("^[0-9a-f]{")
            .and_then(|rest| rest.strip_suffix("}$"))
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("{at}: pattern {pattern} is not checked by this test"))?;
        let lower_hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
        if text.chars().count() != length || !text.chars().all(lower_hex) {
            return Err(format!("field {field}: {text:?} does not match {pattern}"));
        }
    }
    if let Value::Object(object) = value {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for name in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(name) {
                    return Err(format!("field {field}.{name}: required but missing"));
                }
            }
        }
        // `false` closes the object; a schema is that of a map's values.
        if let Some(additional) = schema.get("additionalProperties") {
            let extra = object
                .iter()
                .filter(|(name, _)| !properties.is_some_and(|p| p.contains_key(*name)));
            for (name, inner) in extra {
                match additional {
                    Value::Bool(false) => {
                        return Err(format!(
                            "field {field}.{name}: not in the schema's properties"
                        ));
                    }
                    Value::Object(_) => conforms(
                        inner,
                        additional,
                        &format!("{field}.{name}"),
                        &format!("{at}/additionalProperties"),
                        seen,
                    )?,
                    _ => {
                        return Err(format!(
                            "{at}: additionalProperties must be false or a schema"
                        ));
                    }
                }
            }
        }
        for (name, property) in properties.into_iter().flatten() {
            if let Some(inner) = object.get(name) {
                let field = format!("{field}.{name}");
                conforms(
                    inner,
                    property,
                    &field,
                    &format!("{at}/properties/{name}"),
                    seen,
                )?;
            }
        }
    }
    if let (Some(items), Value::Array(values)) = (schema.get("items"), value) {
        for (index, item) in values.iter().enumerate() {
            conforms(
                item,
                items,
                &format!("{field}[{index}]"),
                &format!("{at}/items"),
                seen,
            )?;
        }
    }
    if let Some(branches) = schema.get("oneOf") {
        let mut matched = Vec::new();
        let mut errors = Vec::new();
        for (index, branch) in branches.as_array().unwrap().iter().enumerate() {
            let branch_at = format!("{at}/oneOf/{index}");
            let mut branch_seen = Seen::default();
            match conforms(value, branch, field, &branch_at, &mut branch_seen) {
                Ok(()) => matched.push((branch_at, branch_seen)),
                Err(e) => errors.push(e),
            }
        }
        if matched.len() != 1 {
            return Err(format!(
                "field {field}: {value} matches {} of the schema's oneOf branches, not 1 ({errors:?})",
                matched.len()
            ));
        }
        let (branch_at, branch_seen) = matched.remove(0);
        seen.branches.insert(branch_at);
        seen.merge(branch_seen);
    }
    Ok(())
}

/// Every `enum` (with its values) and `oneOf` branch in `schema`, by location;
/// also insists that each property says what it means.
fn schema_locations(
    schema: &Value,
    at: &str,
    enums: &mut BTreeMap<String, BTreeSet<String>>,
    branches: &mut BTreeSet<String>,
) -> Result<(), String> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        enums.insert(at.to_owned(), values.iter().map(Value::to_string).collect());
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            let description = property["description"].as_str().unwrap_or_default();
            if description.trim().is_empty() || description.contains('\n') {
                return Err(format!(
                    "{at}/properties/{name}: needs a one-line description"
                ));
            }
            schema_locations(
                property,
                &format!("{at}/properties/{name}"),
                enums,
                branches,
            )?;
        }
    }
    if let Some(items) = schema.get("items") {
        schema_locations(items, &format!("{at}/items"), enums, branches)?;
    }
    if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        schema_locations(
            values,
            &format!("{at}/additionalProperties"),
            enums,
            branches,
        )?;
    }
    for (index, branch) in schema["oneOf"].as_array().into_iter().flatten().enumerate() {
        let branch_at = format!("{at}/oneOf/{index}");
        schema_locations(branch, &branch_at, enums, branches)?;
        branches.insert(branch_at);
    }
    Ok(())
}

/// Whether `name` (`<Event>.v<N>.json` in `dir`) is older than the version
/// today's code writes.
fn superseded(dir: &str, name: &str) -> bool {
    let Some((event_type, version)) = name
        .strip_suffix(".json")
        .and_then(|stem| stem.rsplit_once(".v"))
    else {
        return false;
    };
    version
        .parse::<u32>()
        .is_ok_and(|v| v < agon_aggregates::wire::STANDARD.current(dir, event_type))
}

/// Checks each sample against its schema file, then that every schema file in
/// `dirs` is met by some sample, with each of its enum values and oneOf branches.
fn check_event_schemas(samples: &[Sample], dirs: &[&str]) {
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    for sample in samples {
        let event = format!("{} {}", sample.aggregate_type, sample.event_type);
        assert_eq!(
            sample.event_type, sample.variant,
            "{event}: event_type() differs from the variant name {}",
            sample.variant
        );
        let file = sample.file();
        let path = format!("{}/event-schemas/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{event}: no schema at event-schemas/{file}: {e}"));
        let schema: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{event}: event-schemas/{file} is not JSON: {e}"));
        assert_eq!(
            schema["$id"],
            format!("agon/{file}"),
            "{event}: $id of event-schemas/{file}"
        );

        // One key, the event type, in the payload and in the schema.
        let payload_keys = keys(&sample.payload);
        let expected = BTreeSet::from([sample.event_type.clone()]);
        assert_eq!(payload_keys, expected, "{event}: payload's single key");
        assert_eq!(
            required(&schema),
            expected,
            "{event}: schema's required key"
        );
        assert_eq!(
            keys(&schema["properties"]),
            expected,
            "{event}: schema's property"
        );

        // The event's fields are exactly the required and the listed ones.
        let fields = &sample.payload[&sample.event_type];
        let fields_schema = &schema["properties"][&sample.event_type];
        assert_eq!(
            keys(fields),
            required(fields_schema),
            "{event}: fields vs the schema's required"
        );
        assert_eq!(
            keys(fields),
            keys(&fields_schema["properties"]),
            "{event}: fields vs the schema's properties"
        );

        // Types, enum values, formats and nested objects.
        let mut walk = Seen::default();
        if let Err(e) = conforms(&sample.payload, &schema, "payload", "#", &mut walk) {
            panic!("{event}: {e}\npayload: {}", sample.payload);
        }
        seen.entry(file).or_default().merge(walk);
    }

    // Every schema belongs to an event built above, and every value an enum
    // lists and every oneOf branch is met by some sample.
    let root = format!("{}/event-schemas", env!("CARGO_MANIFEST_DIR"));
    for dir in dirs {
        for entry in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if !name.ends_with(".json") || name.ends_with(".sample.json") {
                continue;
            }
            let file = format!("{dir}/{name}");
            if superseded(dir, &name) {
                // An older published version: `schemas/golden.rs` checks
                // its sample still decodes; today's code writes the newer.
                continue;
            }
            let Some(met) = seen.get(&file) else {
                panic!(
                    "event-schemas/{file} matches no event variant: stale, or a sample is missing"
                );
            };
            let schema: Value =
                serde_json::from_str(&std::fs::read_to_string(format!("{root}/{file}")).unwrap())
                    .unwrap();
            let mut enums = BTreeMap::new();
            let mut branches = BTreeSet::new();
            if let Err(e) = schema_locations(&schema, "#", &mut enums, &mut branches) {
                panic!("event-schemas/{file}: {e}");
            }
            for (at, values) in enums {
                let met = met.enums.get(&at).cloned().unwrap_or_default();
                let unmet: Vec<&str> = values.difference(&met).map(String::as_str).collect();
                assert!(
                    unmet.is_empty(),
                    "event-schemas/{file} {at}: enum values {} occur in no sample: stale, or a sample is missing",
                    unmet.join(", ")
                );
            }
            let untaken: Vec<&str> = branches
                .difference(&met.branches)
                .map(String::as_str)
                .collect();
            assert!(
                untaken.is_empty(),
                "event-schemas/{file}: no sample takes the oneOf branches {}",
                untaken.join(", ")
            );
        }
    }
}
