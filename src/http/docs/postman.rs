//! A Postman collection (format v2.1) made from the OpenAPI document, one
//! folder per tag, `{{baseUrl}}` and `{{bearerToken}}` as variables.

use std::collections::BTreeMap;

use serde_json::{Value, json};

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

pub fn collection(document: &Value) -> Value {
    let mut folders: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    if let Some(paths) = document["paths"].as_object() {
        for (path, item) in paths {
            for method in METHODS {
                let Some(op) = item.get(method) else { continue };
                let tag = op["tags"][0].as_str().unwrap_or("other").to_owned();
                folders
                    .entry(tag)
                    .or_default()
                    .push(request(path, method, op));
            }
        }
    }
    let items: Vec<Value> = folders
        .into_iter()
        .map(|(name, item)| json!({"name": name, "item": item}))
        .collect();
    json!({
        "info": {
            "name": document["info"]["title"],
            "description": document["info"]["description"],
            "version": document["info"]["version"],
            "schema": "https://schema.getpostman.com/json/collection/v2.1.0/collection.json",
        },
        "auth": {"type": "bearer", "bearer": [{"key": "token", "value": "{{bearerToken}}", "type": "string"}]},
        "variable": [
            {"key": "baseUrl", "value": "http://localhost:8080"},
            {"key": "bearerToken", "value": ""},
        ],
        "item": items,
    })
}

fn request(path: &str, method: &str, op: &Value) -> Value {
    // Postman writes path variables as `:name`.
    let segments: Vec<String> = path
        .trim_start_matches('/')
        .split('/')
        .map(
            |s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(name) => format!(":{name}"),
                None => s.to_owned(),
            },
        )
        .collect();
    let variables: Vec<Value> = segments
        .iter()
        .filter_map(|s| s.strip_prefix(':'))
        .map(|name| json!({"key": name, "value": ""}))
        .collect();
    let name = op["summary"]
        .as_str()
        .or_else(|| op["operationId"].as_str())
        .unwrap_or(path);
    let mut request = json!({
        "method": method.to_ascii_uppercase(),
        "header": [{"key": "Accept", "value": "application/json"}],
        "url": {
            "raw": format!("{{{{baseUrl}}}}/{}", segments.join("/")),
            "host": ["{{baseUrl}}"],
            "path": segments,
            "variable": variables,
        },
        "description": op["description"].as_str().unwrap_or(""),
    });
    if op.get("requestBody").is_some() {
        request["body"] =
            json!({"mode": "raw", "raw": "{}", "options": {"raw": {"language": "json"}}});
    }
    json!({"name": format!("{} {path}", method.to_ascii_uppercase()) + &format!(" ({name})"), "request": request})
}
