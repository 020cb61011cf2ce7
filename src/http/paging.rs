//! How much one request may ask for at once: a list page's `limit` and
//! `offset`, a batch fetch's ids, an export's debates. The most is the
//! deployment's (`SERVICE_MAX_PAGE_SIZE`, `SERVICE_MAX_BATCH_IDS`,
//! `SERVICE_MAX_EXPORT_DEBATES`); the published document states it, so a
//! client reading the schema asks for what is served.

use axum::extract::FromRef;
use serde_json::{Value, json};

use super::error::ApiError;
use super::state::ApiState;
use crate::config::PageSettings;

/// The deployment's page limits, handed to the handlers that page.
#[derive(Debug, Clone, Copy)]
pub struct Paging(PageSettings);

impl FromRef<ApiState> for Paging {
    fn from_ref(app: &ApiState) -> Self {
        Self(app.settings.http.pages)
    }
}

impl Paging {
    pub fn new(settings: PageSettings) -> Self {
        Self(settings)
    }

    /// The page size a query asks for (§8.2's 20 when it names none),
    /// checked against `SERVICE_MAX_PAGE_SIZE`.
    pub fn limit(&self, asked: Option<u32>) -> Result<u32, ApiError> {
        within(
            "limit",
            asked.unwrap_or(PageSettings::DEFAULT_PAGE),
            self.0.max_page,
        )
    }

    /// The offset a query asks for, checked.
    pub fn offset(asked: Option<i32>) -> Result<u32, ApiError> {
        u32::try_from(asked.unwrap_or(0))
            .map_err(|_| ApiError::bad_request("offset must not be negative"))
    }

    /// How many debates an export holds: the most when it names none.
    pub fn export(&self, asked: Option<u32>) -> Result<u32, ApiError> {
        within(
            "limit",
            asked.unwrap_or(self.0.max_export),
            self.0.max_export,
        )
    }

    /// Refuses a batch fetch of more ids than `SERVICE_MAX_BATCH_IDS`: a
    /// 422 naming the field, like a wrong type of it would be.
    pub fn batch(&self, field: &str, ids: usize) -> Result<(), ApiError> {
        let max = self.0.max_batch as usize;
        if ids <= max {
            return Ok(());
        }
        let reason = format!("holds at most {max} ids, not {ids}");
        Err(ApiError::validation(
            format!("{field}: {reason}"),
            json!({"field": field, "reason": reason, "max": max}),
        ))
    }

    /// The variables a `limit` parameter's description may name, with
    /// their values.
    pub fn stated(&self) -> [(&'static str, u64); 2] {
        [
            ("SERVICE_MAX_PAGE_SIZE", self.0.max_page.into()),
            ("SERVICE_MAX_EXPORT_DEBATES", self.0.max_export.into()),
        ]
    }

    /// States the batch body's `maxItems` in the published document.
    pub fn fit_batch(&self, doc: &mut Value) {
        let ids = "/components/schemas/BatchBody/properties/debate_ids";
        if let Some(ids) = doc.pointer_mut(ids).and_then(Value::as_object_mut) {
            ids.insert("maxItems".to_owned(), json!(self.0.max_batch));
        }
    }
}

/// States the deployment's values in the published document: every query
/// parameter `limit` whose description names one of `stated`'s variables
/// gets its value as the maximum.
pub fn fit_limits(doc: &mut Value, stated: &[(&str, u64)]) {
    let operations = doc
        .get_mut("paths")
        .and_then(Value::as_object_mut)
        .into_iter()
        .flat_map(|paths| paths.values_mut())
        .filter_map(Value::as_object_mut)
        .flat_map(|path| path.values_mut());
    for operation in operations {
        let Some(parameters) = operation
            .get_mut("parameters")
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for parameter in parameters {
            if parameter["name"] != "limit" || parameter["in"] != "query" {
                continue;
            }
            let description = parameter["description"].as_str().unwrap_or_default();
            let Some((_, max)) = stated.iter().find(|(v, _)| description.contains(v)) else {
                continue;
            };
            if let Some(schema) = parameter.get_mut("schema").and_then(Value::as_object_mut) {
                schema.insert("maximum".to_owned(), json!(max));
            }
        }
    }
}

fn within(field: &str, asked: u32, max: u32) -> Result<u32, ApiError> {
    if (1..=max).contains(&asked) {
        Ok(asked)
    } else {
        Err(ApiError::bad_request(format!(
            "{field} must be between 1 and {max}"
        )))
    }
}
