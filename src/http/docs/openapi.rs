//! Builds the served OpenAPI document: the handlers' own annotations at
//! their registered paths, copied to every path the route table mounts,
//! with the error form, v2 envelope and deprecation each path really has.

use serde_json::{Map, Value, json};
use utoipa::openapi::path::Paths;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{ComponentsBuilder, InfoBuilder, OpenApiBuilder, RefOr, schema::Schema};

use crate::http::error::ErrorForm;
use crate::http::routes::{Access, METHODS, Mount, MountKind, RouteTable};
use crate::http::version::is_api;

const DESCRIPTION: &str = "\
Agon hosts debates between AI agents and keeps every state change in a \
hash-chained, sealed event log.

## Versions
Paths exist unversioned (`/api/...`, v1 by default), under `/api/v1/` and \
under `/api/v2/`. Without a prefix, `X-API-Version: 2` or \
`Accept: application/json; version=2` selects v2. v2 bodies are wrapped as \
`{data, meta: {version, timestamp, request_id}, links}`. v1 asked for by \
name (`/api/v1/`, a version header) is deprecated (sunset 2026-06-01) and \
still served; its responses carry `Deprecation`, `Sunset`, `Link` and \
`X-Deprecation-Level` headers. Unprefixed paths with no version asked for \
are supported: they answer v1 bodies and are not deprecated.

## Errors
Every `/api` error has `error` as a string. v1 (unprefixed paths included) \
answers `{error, status, code, details, trace_id}`; v2 answers `{error, \
code, resource_type, resource_id, trace_id, support_url}`; paths outside \
`/api` (such as `/metrics`) answer `{error: {code, message, details, \
trace_id}}`; a 429 answers its version's form with \
`{error, code, retry_after, limit, remaining}` on top (`error` a string) and \
`Retry-After`. Codes: BAD_REQUEST 400, \
UNAUTHORIZED 401, FORBIDDEN 403, NOT_FOUND 404, METHOD_NOT_ALLOWED 405, \
REQUEST_TIMEOUT 408, CONFLICT 409, PAYLOAD_TOO_LARGE 413, \
UNSUPPORTED_MEDIA_TYPE 415, VALIDATION_ERROR 422, RATE_LIMIT_EXCEEDED 429, \
INTERNAL_ERROR 500, SERVICE_UNAVAILABLE 503. `trace_id` is the request's \
`X-Request-ID`.";

/// The whole document as JSON.
pub fn document(paths: Paths, schemas: Vec<(String, RefOr<Schema>)>, table: &RouteTable) -> Value {
    let components = ComponentsBuilder::new()
        .schemas_from_iter(schemas)
        .security_scheme(
            "bearerAuth",
            SecurityScheme::Http(
                Http::builder()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        )
        .build();
    let base = OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("Agon API")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(DESCRIPTION))
                .build(),
        )
        .paths(paths)
        .components(Some(components))
        .build();
    let mut doc = serde_json::to_value(&base).unwrap_or_else(|_| json!({}));
    let canonical = match doc.get_mut("paths").map(Value::take) {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let mut paths = Map::new();
    for mount in table.mounts() {
        let Some(item) = canonical.get(&mount.canonical) else {
            continue;
        };
        let Value::Object(operations) = mounted_item(item.clone(), mount) else {
            continue;
        };
        // Handlers of other methods at the same path share its entry.
        let entry = paths.entry(mount.path.clone()).or_insert_with(|| json!({}));
        if let Some(entry) = entry.as_object_mut() {
            for (key, value) in operations {
                if !METHODS.contains(&key.as_str()) || mount.methods.contains(&key.as_str()) {
                    entry.insert(key, value);
                }
            }
        }
    }
    doc["paths"] = Value::Object(paths);
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        schemas.extend(shared_schemas());
    }
    doc
}

fn mounted_item(mut item: Value, mount: &Mount) -> Value {
    let form = match mount.kind {
        MountKind::Legacy | MountKind::Alias if !is_api(&mount.path) => ErrorForm::General,
        MountKind::Legacy | MountKind::Alias | MountKind::V1 => ErrorForm::V1,
        MountKind::V2 => ErrorForm::V2,
    };
    // Unprefixed paths are the supported legacy face; `/api/v1/` and
    // aliases are deprecated.
    let deprecated = mount.versioned && matches!(mount.kind, MountKind::V1 | MountKind::Alias);
    let has_path_params = mount.path.contains('{');
    for method in METHODS {
        let Some(op) = item.get_mut(method).and_then(Value::as_object_mut) else {
            continue;
        };
        if let Some(Value::String(id)) = op.get_mut("operationId") {
            id.push_str(&operation_suffix(mount));
        }
        if deprecated {
            op.insert("deprecated".into(), json!(true));
        }
        let security = match mount.access {
            Access::Public => json!([]),
            Access::Authenticated | Access::Permission(_) => json!([{"bearerAuth": []}]),
        };
        op.insert("security".into(), security);
        let has_body = op.contains_key("requestBody");
        let has_query = op
            .get("parameters")
            .and_then(Value::as_array)
            .is_some_and(|ps| ps.iter().any(|p| p["in"] == "query"));
        let responses = op
            .entry("responses")
            .or_insert_with(|| json!({}))
            .as_object_mut();
        let Some(responses) = responses else { continue };
        if mount.kind == MountKind::V2 && mount.enveloped {
            for (status, response) in responses.iter_mut() {
                if status.starts_with('2') {
                    wrap_in_envelope(response);
                }
            }
        }
        let mut statuses = vec!["400", "405", "429", "500"];
        match mount.access {
            Access::Public => {}
            // 403 also for a credential of the wrong kind (the static token
            // on a route that needs a user account) or a disabled account.
            Access::Authenticated | Access::Permission(_) => statuses.extend(["401", "403"]),
        }
        if has_path_params {
            statuses.push("404");
        }
        if has_body {
            statuses.extend(["413", "415", "422"]);
        }
        if has_query {
            statuses.push("422");
        }
        for status in statuses {
            responses
                .entry(status)
                .or_insert_with(|| json!({"description": describe(status)}));
        }
        for (status, response) in responses.iter_mut() {
            if response.get("description").is_none() {
                response["description"] = json!(describe(status));
            }
            let is_error = status.starts_with('4') || status.starts_with('5');
            if is_error && response.get("content").is_none() {
                let schema = if status == "429" {
                    "RateLimitError"
                } else {
                    error_schema(form)
                };
                response["content"] = json!({"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}});
            }
        }
    }
    item
}

fn operation_suffix(mount: &Mount) -> String {
    match mount.kind {
        MountKind::Legacy if mount.path == mount.canonical => String::new(),
        // The v1 twin of the canonical path; other v1 paths (of `also_at`
        // paths) are named by their path, like aliases.
        MountKind::V1
            if mount.path == mount.canonical
                || mount.path.replacen("/api/v1/", "/api/", 1) == mount.canonical =>
        {
            "_v1".to_owned()
        }
        MountKind::V2 if mount.path == mount.canonical => String::new(),
        MountKind::V2 => "_v2".to_owned(),
        MountKind::Legacy | MountKind::Alias | MountKind::V1 => {
            let slug: String = mount
                .path
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            format!("_at{slug}")
        }
    }
}

fn wrap_in_envelope(response: &mut Value) {
    let Some(media) = response.pointer_mut("/content/application~1json") else {
        return;
    };
    let data = media.get("schema").cloned().unwrap_or_else(|| json!({}));
    media["schema"] = json!({
        "type": "object",
        "required": ["data", "meta"],
        "properties": {
            "data": data,
            "meta": {"$ref": "#/components/schemas/V2Meta"},
            "links": {"$ref": "#/components/schemas/V2Links"},
        },
    });
}

fn error_schema(form: ErrorForm) -> &'static str {
    match form {
        ErrorForm::General => "Error",
        ErrorForm::V1 => "ErrorV1",
        ErrorForm::V2 => "ErrorV2",
    }
}

fn describe(status: &str) -> &'static str {
    match status {
        "400" => "Malformed request (bad header, query or JSON)",
        "401" => "Missing, malformed, expired or revoked credential",
        "403" => "The caller lacks the permission this route requires",
        "423" => "Account locked; see Retry-After",
        "404" => "Not found",
        "405" => "Method not allowed",
        "413" => "Body too large",
        "415" => "Body is not JSON",
        "422" => "Body or parameters fail validation",
        "429" => "Rate limit exceeded; see Retry-After",
        s if s.starts_with('2') => "Success",
        _ => "Internal error",
    }
}

fn shared_schemas() -> Map<String, Value> {
    let string = json!({"type": "string"});
    let nullable = json!({"type": ["string", "null"]});
    let schemas = json!({
        "Error": {
            "type": "object",
            "required": ["error"],
            "properties": {"error": {
                "type": "object",
                "required": ["code", "message", "details"],
                "properties": {
                    "code": string, "message": string,
                    "details": {"type": "object"}, "trace_id": string,
                },
            }},
        },
        "ErrorV1": {
            "type": "object",
            "required": ["error", "status", "code", "trace_id"],
            "properties": {
                "error": string, "status": {"type": "integer"}, "code": string,
                "details": {"type": "object"}, "trace_id": string,
            },
        },
        "ErrorV2": {
            "type": "object",
            "required": ["error", "code", "trace_id", "support_url"],
            "properties": {
                "error": string, "code": string,
                "resource_type": nullable, "resource_id": nullable,
                "trace_id": string, "support_url": string,
            },
        },
        "RateLimitError": {
            "type": "object",
            "required": ["error", "retry_after", "limit", "remaining"],
            "properties": {
                "error": string, "code": string,
                "retry_after": {"type": "integer", "minimum": 0},
                "limit": {"type": "integer"}, "remaining": {"type": "integer"},
                "trace_id": string,
            },
        },
        "V2Meta": {
            "type": "object",
            "required": ["version", "timestamp", "request_id"],
            "properties": {
                "version": string,
                "timestamp": {"type": "string", "format": "date-time"},
                "request_id": string,
            },
        },
        "V2Links": {
            "type": "object",
            "properties": {"self": string, "next": nullable, "prev": nullable},
        },
    });
    match schemas {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}
