//! The create body's schema says what a create accepts, in terms a client
//! (or a fuzzer) can check before sending: which agent names this
//! deployment seats, which fields exclude each other, and the rules the
//! derive cannot state. Every body it calls valid is one the handler takes.

use agon_aggregates::debate::{ConsensusMode, MIN_AGENTS};
use serde_json::{Value, json};

use crate::debates::DebateLimits;

/// Text with at least one character the service does not trim. Spelled out
/// rather than `\s`, whose meaning differs between regular-expression
/// dialects, and matching Rust's `char::is_whitespace`.
pub const NOT_BLANK: &str = "[^\\t\\n\\u000b\\u000c\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";

/// Consensus modes as documented, and `null` (the default).
fn consensus_modes() -> Value {
    let mut modes: Vec<Value> = ConsensusMode::ALL
        .iter()
        .map(|m| json!(m.as_str()))
        .collect();
    modes.push(Value::Null);
    Value::Array(modes)
}

/// Two spellings of one setting, the second maybe inside `protocol`: a
/// body gives at most one of them (`null` counts as not given).
fn not_both(first: &str, second: &str, nested: bool) -> Value {
    let value = json!({"not": {"type": "null"}});
    if nested {
        json!({"not": {"required": [first, "protocol"], "properties": {
            first: value,
            "protocol": {"type": "object", "required": [second], "properties": {second: value}},
        }}})
    } else {
        json!({"not": {"required": [first, second], "properties": {first: value, second: value}}})
    }
}

/// Fits the `CreateDebateBody` and `ProtocolBody` components of `doc` to a
/// deployment whose agent names match `agent_pattern` and whose debates
/// are within `limits`.
pub fn fit(doc: &mut Value, agent_pattern: &str, limits: DebateLimits) {
    fit_search(doc, limits.search_chars);
    let shape = limits.shape;
    let name = json!({"type": "string", "pattern": agent_pattern});
    if let Some(protocol) = doc.pointer_mut("/components/schemas/ProtocolBody/properties") {
        protocol["consensus"]["enum"] = consensus_modes();
        protocol["judge"]["pattern"] = json!(agent_pattern);
        protocol["rounds"]["maximum"] = json!(shape.rounds);
        // The canonical spelling of a phase name (the debate's rules).
        let phase = format!("^[a-z0-9_-]{{1,{}}}$", shape.phase_chars);
        protocol["phases"]["items"] = json!({"type": "string", "pattern": phase});
        protocol["phases"]["minItems"] = json!(1);
        protocol["phases"]["maxItems"] = json!(shape.phases);
        protocol["phases"]["uniqueItems"] = json!(true);
    }
    let Some(body) = doc.pointer_mut("/components/schemas/CreateDebateBody") else {
        return;
    };
    let properties = &mut body["properties"];
    for field in ["topic", "task"] {
        properties[field]["pattern"] = json!(NOT_BLANK);
        properties[field]["maxLength"] = json!(limits.topic_chars);
    }
    for field in ["rounds", "max_rounds"] {
        properties[field]["maximum"] = json!(shape.rounds);
    }
    properties["context"]["maxLength"] = json!(limits.context_chars);
    properties["consensus"]["enum"] = consensus_modes();
    properties["judge"]["pattern"] = json!(agent_pattern);
    let agents = &mut properties["agents"];
    agents["items"] = name;
    agents["uniqueItems"] = json!(true);
    agents["maxItems"] = json!(shape.agents);
    // Empty (the service picks) or a panel of at least two.
    agents["anyOf"] = json!([{"maxItems": 0}, {"minItems": MIN_AGENTS}]);
    let given =
        |field: &str| json!({"required": [field], "properties": {field: {"type": "string"}}});
    body["allOf"] = json!([
        {"anyOf": [given("topic"), given("task")]},
        not_both("topic", "task", false),
        not_both("rounds", "max_rounds", false),
        not_both("rounds", "rounds", true),
        not_both("max_rounds", "rounds", true),
        not_both("consensus", "consensus", true),
        not_both("judge", "judge", true),
        // Without auto-selection the caller names the panel.
        {"if": {"required": ["auto_select"], "properties": {"auto_select": {"const": false}}},
         "then": {"required": ["agents"], "properties": {"agents": {"type": "array", "minItems": MIN_AGENTS}}}},
    ]);
}

/// States the configured longest search (`q`) on every mount of the list.
fn fit_search(doc: &mut Value, max_chars: usize) {
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for item in paths.values_mut() {
        // Every mount of the list: `list_debates` with its mount's suffix.
        let listing = item
            .pointer("/get/operationId")
            .and_then(Value::as_str)
            .is_some_and(|id| id.starts_with("list_debates"));
        if !listing {
            continue;
        }
        let Some(parameters) = item
            .pointer_mut("/get/parameters")
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        let lists = |p: &Value| p["name"] == "q" && p["in"] == "query";
        for parameter in parameters.iter_mut().filter(|p| lists(p)) {
            parameter["schema"]["maxLength"] = json!(max_chars);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nested_spelling_counts_only_inside_a_protocol_object() {
        let rule = not_both("rounds", "rounds", true);
        assert_eq!(rule["not"]["required"], json!(["rounds", "protocol"]));
        let protocol = &rule["not"]["properties"]["protocol"];
        assert_eq!(protocol["type"], json!("object"));
        assert_eq!(protocol["required"], json!(["rounds"]));
    }
}
