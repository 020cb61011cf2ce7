//! The API's own description: the OpenAPI 3 document generated from the
//! handlers' `#[utoipa::path]` annotations and the route table, in JSON and
//! YAML, a Postman collection made from it, and the Swagger UI and Redoc
//! pages, whose assets the service serves itself (no CDN, no internet).

mod openapi;
mod postman;

use std::sync::{Arc, LazyLock};

use axum::Extension;
use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};
use utoipa_axum::routes;

pub use self::openapi::document;
use super::error::ApiError;
use super::extract::ApiPath;
use super::routes::{RouteSpec, Routes};

/// The rendered documents, built once when the router is.
#[derive(Debug)]
pub struct ApiDocs {
    pub json: String,
    pub yaml: String,
    pub postman: String,
}

impl ApiDocs {
    pub fn new(document: &serde_json::Value) -> Self {
        Self {
            json: document.to_string(),
            // A JSON value always has a YAML form; should that ever fail,
            // the YAML route serves the JSON text, which is valid YAML too.
            yaml: yaml_serde::to_string(document).unwrap_or_else(|e| {
                tracing::error!(error = %e, "OpenAPI document has no YAML form");
                document.to_string()
            }),
            postman: postman::collection(document).to_string(),
        }
    }
}

/// Public: the documents describe the interface, not anyone's data, and a
/// person must be able to open them in a browser ("try it out" takes a token).
pub fn routes() -> Routes {
    let raw = || RouteSpec::new().raw().public();
    let page = || RouteSpec::unversioned().public();
    Routes::new()
        .add(routes!(openapi_json), raw().also_at("/api/openapi"))
        .add(routes!(openapi_yaml), raw())
        .add(routes!(postman_json), raw())
        .add(routes!(swagger_index), page())
        .add(routes!(swagger_asset), page())
        .add(routes!(redoc_index), page())
        .add(routes!(redoc_script), page())
}

fn typed(content_type: &'static str, body: impl Into<Body>) -> Response {
    let mut response = Response::new(body.into());
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// This document (OpenAPI 3, JSON).
#[utoipa::path(get, path = "/api/openapi.json", tag = "documentation", security(()),
    responses((status = 200, description = "The OpenAPI document", content_type = "application/json", body = Object)))]
async fn openapi_json(Extension(docs): Extension<Arc<ApiDocs>>) -> Response {
    typed("application/json", docs.json.clone())
}

/// This document (OpenAPI 3, YAML).
#[utoipa::path(get, path = "/api/openapi.yaml", tag = "documentation", security(()),
    responses((status = 200, description = "The OpenAPI document", content_type = "application/yaml", body = Object)))]
async fn openapi_yaml(Extension(docs): Extension<Arc<ApiDocs>>) -> Response {
    typed("application/yaml", docs.yaml.clone())
}

/// A Postman collection (v2.1) of every operation.
#[utoipa::path(get, path = "/api/postman.json", tag = "documentation", security(()),
    responses((status = 200, description = "Postman collection v2.1", content_type = "application/json", body = Object)))]
async fn postman_json(Extension(docs): Extension<Arc<ApiDocs>>) -> Response {
    typed("application/json", docs.postman.clone())
}

static SWAGGER_CONFIG: LazyLock<Arc<utoipa_swagger_ui::Config<'static>>> =
    LazyLock::new(|| Arc::new(utoipa_swagger_ui::Config::from("/api/openapi.json")));

fn swagger_file(name: &str) -> Result<Response, ApiError> {
    let file = utoipa_swagger_ui::serve(name, SWAGGER_CONFIG.clone())
        .map_err(|e| ApiError::Internal(e.to_string().into()))?
        .ok_or(ApiError::NotFound {
            resource_type: "documentation asset",
            resource_id: Some(name.to_owned()),
        })?;
    let mut response = Response::new(Body::from(file.bytes.into_owned()));
    if let Ok(value) = HeaderValue::from_str(&file.content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    if file.gzpipped {
        response
            .headers_mut()
            .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    Ok(response)
}

/// Swagger UI.
#[utoipa::path(get, path = "/api/docs", tag = "documentation", security(()),
    responses((status = 200, description = "Interactive documentation", content_type = "text/html", body = String)))]
async fn swagger_index() -> Result<Response, ApiError> {
    let page = swagger_file("index.html")?;
    let (parts, body) = page.into_parts();
    let html = axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|e| ApiError::Internal(e.into()))?;
    // The page links its assets relatively (`./x`); point them under
    // /api/docs/ (a `<base>` element would break the page policy's
    // `base-uri 'none'`).
    let html = String::from_utf8_lossy(&html)
        .replace("\"./", "\"/api/docs/")
        .replace("'./", "'/api/docs/");
    let mut page = Response::from_parts(parts, Body::from(html));
    page.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(DOCS_POLICY),
    );
    Ok(page)
}

/// Swagger UI's own files (scripts, styles, icons).
#[utoipa::path(get, path = "/api/docs/{file}", tag = "documentation", security(()),
    params(("file" = String, Path, description = "Asset name", example = "swagger-ui.css")),
    responses((status = 200, description = "The asset (script, style sheet, image)", content_type = "*/*", body = String),
        (status = 404, description = "No such asset")))]
async fn swagger_asset(ApiPath(file): ApiPath<String>) -> Result<Response, ApiError> {
    swagger_file(&file)
}

const REDOC_SCRIPT: &[u8] = include_bytes!("../../../assets/redoc/redoc.standalone.js");

const REDOC_PAGE: &str = r#"<!DOCTYPE html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>Agon API reference</title>
  </head>
  <body>
    <redoc spec-url="/api/openapi.json"></redoc>
    <script src="/api/redoc/redoc.standalone.js"></script>
  </body>
</html>
"#;

/// Redoc reference page.
#[utoipa::path(get, path = "/api/redoc", tag = "documentation", security(()),
    responses((status = 200, description = "Reference documentation", content_type = "text/html", body = String)))]
async fn redoc_index() -> impl IntoResponse {
    (
        [(header::CONTENT_SECURITY_POLICY, DOCS_POLICY)],
        Html(REDOC_PAGE),
    )
}

/// The policy of the two documentation pages: the page policy, but Swagger
/// UI and Redoc apply inline styles and Redoc may search in a worker made
/// from a blob. Scripts are still only the service's own.
const DOCS_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; worker-src blob:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// Redoc's script (2.5.4, MIT), served locally.
#[utoipa::path(get, path = "/api/redoc/redoc.standalone.js", tag = "documentation", security(()),
    responses((status = 200, description = "Redoc", content_type = "text/javascript", body = String)))]
async fn redoc_script() -> Response {
    typed("text/javascript; charset=utf-8", REDOC_SCRIPT)
}
