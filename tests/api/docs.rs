//! The OpenAPI document, the documentation pages and the Prometheus
//! exposition: what is served is documented, what is documented is served,
//! the document passes a standard validator, and the pages need no internet.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::serve::spawn_with;
use crate::support::Kind;

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

#[tokio::test]
async fn the_document_and_the_router_agree_and_pass_a_validator() {
    let spawned = spawn_with(Kind::Sqlite, &[("SERVICE_IP_RATE_LIMIT", "100000")]).await;
    let c = crate::support::client();
    let doc = spawned.get_json(&c, "/api/openapi.json").await;
    for path in ["/api/openapi", "/api/v1/openapi.json"] {
        assert_eq!(spawned.get_json(&c, path).await, doc, "{path}");
    }
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    assert_eq!(
        doc["components"]["securitySchemes"]["bearerAuth"]["scheme"],
        "bearer"
    );

    // Every mount of the router is a documented path.
    let (_, table, _, _) = agon::http::routes().into_parts();
    let mounted: BTreeSet<String> = table.mounts().iter().map(|m| m.path.clone()).collect();
    let documented: BTreeSet<String> = doc["paths"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(mounted, documented);
    for path in [
        "/api/health",
        "/api/v1/health",
        "/api/v2/system/health",
        "/api/v2/system/metrics",
        "/metrics",
        "/api/metrics/health",
        "/api/system/errors",
        "/api/rate-limits/config",
        "/api/rate-limit/status",
        "/api/system/rate-limits",
        "/api/admin/stats",
        "/api/docs",
        "/api/redoc",
        "/api/postman.json",
        "/api/openapi.yaml",
    ] {
        assert!(documented.contains(path), "{path} is not documented");
    }

    // Every documented operation is served: the router never answers it
    // with its unknown-route 404 or a 405. Redirects (sign-in) are answers.
    let c = crate::support::client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in METHODS {
            if item.get(method).is_none() {
                continue;
            }
            let concrete = path.replace("{file}", "swagger-ui.css");
            let response = c
                .request(
                    method.to_uppercase().parse().unwrap(),
                    format!("{}{concrete}", spawned.base),
                )
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            let body = response.text().await.unwrap();
            assert_ne!(status, 405, "{method} {path}");
            assert!(
                !body.contains("no route for"),
                "{method} {path} is not served"
            );
        }
    }

    // v2 successes are documented in the envelope; v1 errors in the v1 form.
    let v2 = &doc["paths"]["/api/v2/system/health"]["get"]["responses"]["200"]["content"]["application/json"]
        ["schema"];
    assert_eq!(v2["required"], serde_json::json!(["data", "meta"]));
    let v1_error = &doc["paths"]["/api/v1/health"]["get"]["responses"]["400"]["content"]["application/json"]
        ["schema"]["$ref"];
    assert_eq!(v1_error, "#/components/schemas/ErrorV1");
    assert_eq!(doc["paths"]["/api/v1/health"]["get"]["deprecated"], true);

    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), doc.to_string()).unwrap();
    let validator = std::process::Command::new("python3")
        .args(["-c", "import json,sys; from openapi_spec_validator import validate; validate(json.load(open(sys.argv[1]))); print('valid')"])
        .arg(file.path())
        .output()
        .unwrap();
    assert!(
        validator.status.success(),
        "openapi-spec-validator (pip install openapi-spec-validator; ops/test.sh does) says: {}",
        String::from_utf8_lossy(&validator.stderr)
    );
    spawned.stop.cancel();
}

#[tokio::test]
async fn yaml_postman_and_the_pages_are_served_locally() {
    let spawned = spawn_with(Kind::Sqlite, &[]).await;
    let c = crate::support::client();
    let get = |path: &str| c.get(format!("{}{path}", spawned.base)).send();

    let yaml = get("/api/openapi.yaml").await.unwrap();
    assert_eq!(yaml.headers()["content-type"], "application/yaml");
    let yaml = yaml.text().await.unwrap();
    assert!(yaml.contains("openapi: 3.") && yaml.contains("/api/v2/system/health:"));

    let postman: Value = get("/api/postman.json")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        postman["info"]["schema"]
            .as_str()
            .unwrap()
            .contains("v2.1.0")
    );
    let requests: Vec<&Value> = postman["item"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|folder| folder["item"].as_array().unwrap())
        .collect();
    assert!(
        requests
            .iter()
            .any(|r| r["request"]["url"]["raw"] == "{{baseUrl}}/api/v2/system/health")
    );
    assert!(
        requests
            .iter()
            .any(|r| r["request"]["url"]["raw"] == "{{baseUrl}}/api/docs/:file")
    );

    for page in ["/api/docs", "/api/redoc"] {
        let response = get(page).await.unwrap();
        assert_eq!(response.status(), 200);
        let html = response.text().await.unwrap();
        for needle in ["src=\"http", "href=\"http", "cdn.", "unpkg", "jsdelivr"] {
            assert!(
                !html.contains(needle),
                "{page} loads from elsewhere: {needle}"
            );
        }
    }
    let swagger = get("/api/docs").await.unwrap().text().await.unwrap();
    assert!(
        swagger.contains("\"/api/docs/swagger-ui.css\""),
        "{swagger}"
    );
    for asset in [
        "swagger-ui-bundle.js",
        "swagger-ui.css",
        "swagger-initializer.js",
    ] {
        let response = get(&format!("/api/docs/{asset}")).await.unwrap();
        assert_eq!(response.status(), 200, "{asset}");
    }
    let initializer = get("/api/docs/swagger-initializer.js")
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(initializer.contains("/api/openapi.json"));
    let redoc = get("/api/redoc").await.unwrap().text().await.unwrap();
    assert!(redoc.contains("spec-url=\"/api/openapi.json\""));
    let script = get("/api/redoc/redoc.standalone.js").await.unwrap();
    assert!(
        script.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    assert!(script.bytes().await.unwrap().len() > 500_000);
    let missing = get("/api/docs/nothing-here.js").await.unwrap();
    assert_eq!(missing.status(), 404);
    spawned.stop.cancel();
}

/// One sample of the Prometheus text format: name, labels, value.
fn parse_sample(line: &str) -> (String, Vec<(String, String)>, f64) {
    let (series, value) = line.rsplit_once(' ').unwrap();
    let value: f64 = value
        .parse()
        .unwrap_or_else(|_| panic!("bad value in {line:?}"));
    let (name, labels) = match series.split_once('{') {
        None => (series.to_owned(), Vec::new()),
        Some((name, rest)) => {
            let rest = rest.strip_suffix('}').unwrap();
            let labels = rest
                .split("\",")
                .filter(|l| !l.is_empty())
                .map(|pair| {
                    let (k, v) = pair.split_once("=\"").unwrap();
                    (k.to_owned(), v.trim_end_matches('"').to_owned())
                })
                .collect();
            (name.to_owned(), labels)
        }
    };
    assert!(
        name.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
        "bad metric name {name:?}"
    );
    (name, labels, value)
}

#[tokio::test]
async fn prometheus_counts_requests_by_route_and_status() {
    let spawned = spawn_with(Kind::Sqlite, &[]).await;
    let c = crate::support::client();
    for _ in 0..3 {
        spawned.get_json(&c, "/api/v1/rate-limits/config").await;
    }
    spawned.get_json(&c, "/api/v1/no/such/route").await;
    for path in ["/metrics", "/api/metrics"] {
        let response = c
            .get(format!("{}{path}", spawned.base))
            .send()
            .await
            .unwrap();
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/plain")
        );
        let text = response.text().await.unwrap();
        let mut types = BTreeSet::new();
        let mut samples = Vec::new();
        for line in text.lines().filter(|l| !l.is_empty()) {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert!(["counter", "gauge", "histogram", "summary"].contains(&kind));
                types.insert(name.to_owned());
            } else if !line.starts_with('#') {
                samples.push(parse_sample(line));
            }
        }
        assert!(types.contains("service_http_requests_total"));
        assert!(types.contains("service_http_request_duration_seconds"));
        let label = |labels: &[(String, String)], key: &str| {
            labels
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        // Other tests share the process-wide recorder: at least ours.
        let config_hits: f64 = samples
            .iter()
            .filter(|(name, labels, _)| {
                name == "service_http_requests_total"
                    && label(labels, "route").as_deref() == Some("/api/v1/rate-limits/config")
                    && label(labels, "status").as_deref() == Some("200")
            })
            .map(|(_, _, v)| v)
            .sum();
        assert!(config_hits >= 3.0, "{config_hits}");
        assert!(
            samples
                .iter()
                .any(|(name, labels, _)| name == "service_http_requests_total"
                    && label(labels, "route").as_deref() == Some("unmatched")
                    && label(labels, "status").as_deref() == Some("404"))
        );
        assert!(samples.iter().any(|(name, labels, _)| name
            == "service_http_request_duration_seconds_bucket"
            && label(labels, "le").is_some()));
    }
    spawned.stop.cancel();
}
