//! `?as_of=<position|RFC 3339 time>`: the query of every read that can be
//! replayed from the log for an audit (a debate, a trail), declared and
//! checked in one place so that they accept and refuse alike.

use serde::Deserialize;
use utoipa::IntoParams;

use crate::http::error::ApiError;
use crate::projection::replay::AsOf;

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AsOfQuery {
    /// Replay up to this log position (an integer) or time (RFC 3339).
    #[param(schema_with = as_of_schema)]
    pub as_of: Option<String>,
}

impl AsOfQuery {
    /// The point asked for, if any; 400 when it is neither form.
    pub fn parsed(&self) -> Result<Option<AsOf>, ApiError> {
        self.as_of
            .as_deref()
            .map(|text| {
                AsOf::parse(text).ok_or_else(|| {
                    ApiError::bad_request("as_of must be a log position or an RFC 3339 time")
                })
            })
            .transpose()
    }
}

/// A log position or an RFC 3339 time.
fn as_of_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, OneOfBuilder, SchemaFormat, Type};
    OneOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64))),
        )
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime))),
        )
        .build()
        .into()
}
