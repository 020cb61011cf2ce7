//! Whole numbers in request bodies as JSON Schema counts them: `3.0` is the
//! integer 3 (the documents say `integer`, and clients that hold every
//! number as a float send it so).

use serde::Deserializer;
use serde::de::{self, Visitor};

/// For `#[serde(default, deserialize_with = "whole::optional")]` on an
/// `Option<i64>`: `null` or absent is `None`, `3` and `3.0` are `Some(3)`,
/// `3.5` is refused.
pub fn optional<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    deserializer.deserialize_option(Whole)
}

/// For `#[serde(deserialize_with = "whole::required")]` on an `i64`.
pub fn required<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    deserializer
        .deserialize_any(Whole)?
        .ok_or_else(|| de::Error::invalid_type(de::Unexpected::Unit, &"a whole number"))
}

struct Whole;

/// Largest magnitude an `f64` holds exactly as a whole number.
const EXACT: f64 = 9_007_199_254_740_992.0;

impl<'de> Visitor<'de> for Whole {
    type Value = Option<i64>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a whole number")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        // Beyond i64 is out of every range these fields have; saturate so
        // the range check names the field.
        Ok(Some(i64::try_from(v).unwrap_or(i64::MAX)))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        if v.fract() != 0.0 || !v.is_finite() {
            return Err(E::invalid_value(de::Unexpected::Float(v), &self));
        }
        // Whole floats past the exact range are still whole; clamp them so
        // the range check refuses them by name.
        Ok(Some(v.clamp(-EXACT, EXACT) as i64))
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Body {
        #[serde(default, deserialize_with = "super::optional")]
        n: Option<i64>,
    }

    /// The field as read, `Err` when the body is refused.
    fn n(json: &str) -> Result<Option<i64>, ()> {
        serde_json::from_str::<Body>(json)
            .map(|b| b.n)
            .map_err(drop)
    }

    #[test]
    fn whole_floats_are_integers_and_fractions_are_not() {
        assert_eq!(n(r#"{"n": 3}"#), Ok(Some(3)));
        assert_eq!(n(r#"{"n": 3.0}"#), Ok(Some(3)));
        assert_eq!(n(r#"{"n": -1}"#), Ok(Some(-1)));
        assert_eq!(n(r#"{"n": null}"#), Ok(None));
        assert_eq!(n("{}"), Ok(None));
        assert_eq!(n(r#"{"n": 1e300}"#), Ok(Some(9_007_199_254_740_992)));
        assert_eq!(n(r#"{"n": 3.5}"#), Err(()));
        assert_eq!(n(r#"{"n": "3"}"#), Err(()));
    }
}
