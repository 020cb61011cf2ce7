//! API versions (§9): which version a request asked for, the deprecation
//! headers of v1 and of deprecated aliases, and the v2 response envelope.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue};
use chrono::{DateTime, Days, Months, NaiveDate, Utc};
use serde_json::{Value, json};

use super::error::{ApiError, ErrorForm};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ApiVersion {
    V1,
    V2,
}

impl ApiVersion {
    pub fn number(self) -> &'static str {
        match self {
            ApiVersion::V1 => "1",
            ApiVersion::V2 => "2",
        }
    }
}

/// The version chosen for one request, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    pub version: ApiVersion,
    /// Chosen by prefix or header, not by default.
    pub explicit: bool,
}

impl Negotiated {
    /// The error form of a request to `path`: every `/api` path answers its
    /// version's form, unprefixed ones v1 (§9 rule 4), so `error` is always
    /// a string a client can print; paths outside `/api` have no version
    /// and keep §7's general form.
    pub fn error_form(self, path: &str) -> ErrorForm {
        match self.version {
            ApiVersion::V2 => ErrorForm::V2,
            ApiVersion::V1 if is_api(path) => ErrorForm::V1,
            ApiVersion::V1 => ErrorForm::General,
        }
    }
}

/// Whether `path` is under `/api`.
pub fn is_api(path: &str) -> bool {
    path == "/api" || path.starts_with("/api/")
}

/// Handlers that differ by version take this.
impl<S: Send + Sync> FromRequestParts<S> for ApiVersion {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        match parts.extensions.get::<Negotiated>() {
            Some(negotiated) => Ok(negotiated.version),
            None => negotiate(parts.uri.path(), &parts.headers).map(|n| n.version),
        }
    }
}

/// Prefix, then `X-API-Version`, then `Accept`'s `version` parameter, then v1.
pub fn negotiate(path: &str, headers: &HeaderMap) -> Result<Negotiated, ApiError> {
    let explicit = |version| Negotiated {
        version,
        explicit: true,
    };
    if path == "/api/v1" || path.starts_with("/api/v1/") {
        return Ok(explicit(ApiVersion::V1));
    }
    if path == "/api/v2" || path.starts_with("/api/v2/") {
        return Ok(explicit(ApiVersion::V2));
    }
    if let Some(value) = headers.get("x-api-version") {
        let text = value.to_str().unwrap_or("");
        return parse_version(text).map(explicit).ok_or_else(|| {
            ApiError::bad_request(format!(
                "Unsupported API version in X-API-Version: {:?}; use 1 or 2",
                text
            ))
        });
    }
    for accept in headers.get_all("accept") {
        let Ok(accept) = accept.to_str() else {
            continue;
        };
        for param in accept.split([',', ';']).map(str::trim) {
            if let Some(value) = param.strip_prefix("version=") {
                let value = value.trim_matches('"');
                return parse_version(value).map(explicit).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "Unsupported API version in Accept: {value:?}; use 1 or 2"
                    ))
                });
            }
        }
    }
    Ok(Negotiated {
        version: ApiVersion::V1,
        explicit: false,
    })
}

fn parse_version(text: &str) -> Option<ApiVersion> {
    match text.trim().trim_start_matches(['v', 'V']) {
        "1" | "1.0" => Some(ApiVersion::V1),
        "2" | "2.0" => Some(ApiVersion::V2),
        _ => None,
    }
}

/// How far along a deprecation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeprecationLevel {
    /// Announced, more than six months before the sunset.
    Notice,
    /// Six months or less before the sunset.
    Warning,
    /// The last 30 days.
    Critical,
    /// Past the sunset; still served.
    Sunset,
}

impl DeprecationLevel {
    pub fn name(self) -> &'static str {
        match self {
            DeprecationLevel::Notice => "notice",
            DeprecationLevel::Warning => "warning",
            DeprecationLevel::Critical => "critical",
            DeprecationLevel::Sunset => "sunset",
        }
    }
}

/// When something was deprecated and when it goes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deprecation {
    pub deprecated_at: DateTime<Utc>,
    pub sunset: DateTime<Utc>,
}

fn midnight(y: i32, m: u32, d: u32) -> DateTime<Utc> {
    NaiveDate::from_ymd_opt(y, m, d)
        .and_then(|date| date.and_hms_opt(0, 0, 0))
        .map_or(DateTime::UNIX_EPOCH, |t| t.and_utc())
}

/// v1: released 2024-01-01, deprecated when v2 was released (2025-01-01),
/// sunset 2026-06-01. Deprecated aliases share these dates.
pub fn v1_deprecation() -> Deprecation {
    Deprecation {
        deprecated_at: midnight(2025, 1, 1),
        sunset: midnight(2026, 6, 1),
    }
}

impl Deprecation {
    pub fn level(&self, now: DateTime<Utc>) -> DeprecationLevel {
        let warning_from = self.sunset.checked_sub_months(Months::new(6));
        let critical_from = self.sunset.checked_sub_days(Days::new(30));
        if now >= self.sunset {
            DeprecationLevel::Sunset
        } else if critical_from.is_some_and(|t| now >= t) {
            DeprecationLevel::Critical
        } else if warning_from.is_some_and(|t| now >= t) {
            DeprecationLevel::Warning
        } else {
            DeprecationLevel::Notice
        }
    }

    /// Adds `Deprecation`, `Sunset`, `Link`, `X-Deprecation-Level` and
    /// `X-API-Deprecated`.
    pub fn apply(&self, headers: &mut HeaderMap, successor: Option<&str>, now: DateTime<Utc>) {
        let mut set = |name: &'static str, value: String| {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(name, value);
            }
        };
        set(
            "deprecation",
            format!("@{}", self.deprecated_at.timestamp()),
        );
        // RFC 8594 requires an HTTP-date.
        set(
            "sunset",
            self.sunset.format("%a, %d %b %Y %H:%M:%S GMT").to_string(),
        );
        if let Some(successor) = successor {
            set("link", format!("<{successor}>; rel=\"successor-version\""));
        }
        set("x-deprecation-level", self.level(now).name().to_owned());
        set("x-api-deprecated", "true".to_owned());
    }
}

/// Links a list handler reports so the v2 envelope can carry them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListLinks {
    pub next: Option<String>,
    pub prev: Option<String>,
}

impl ListLinks {
    /// The links of a list body that reports its own paging (`total`, and
    /// `limit` and `offset` when paged), so every v2 list carries `links`
    /// without each handler building them. `None` for bodies that are not
    /// lists.
    pub fn from_page(data: &Value, self_link: &str) -> Option<Self> {
        let total = data.get("total")?.as_u64()?;
        let (Some(limit), Some(offset)) = (
            data.get("limit").and_then(Value::as_u64),
            data.get("offset").and_then(Value::as_u64),
        ) else {
            return Some(Self::default());
        };
        let at = |offset: u64| with_query(self_link, "offset", &offset.to_string());
        Some(Self {
            next: (limit > 0 && offset + limit < total).then(|| at(offset + limit)),
            prev: (offset > 0).then(|| at(offset.saturating_sub(limit))),
        })
    }
}

/// `link` with `name=value` in its query, replacing an earlier value.
fn with_query(link: &str, name: &str, value: &str) -> String {
    let (path, query) = link.split_once('?').unwrap_or((link, ""));
    let mut pairs: Vec<String> = query
        .split('&')
        .filter(|pair| !pair.is_empty() && pair.split('=').next() != Some(name))
        .map(str::to_owned)
        .collect();
    pairs.push(format!("{name}={value}"));
    format!("{path}?{}", pairs.join("&"))
}

/// `{data, meta: {version, timestamp, request_id}, links?}`.
pub fn envelope(
    data: Value,
    request_id: &str,
    now: DateTime<Utc>,
    links: Option<(&str, &ListLinks)>,
) -> Value {
    let mut body = json!({
        "data": data,
        "meta": {
            "version": "2",
            "timestamp": now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "request_id": request_id,
        },
    });
    if let Some((self_link, links)) = links {
        body["links"] = json!({"self": self_link, "next": links.next, "prev": links.prev});
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_link_to_their_neighbours() {
        let page = json!({"debates": [], "total": 45, "limit": 20, "offset": 20});
        let links = ListLinks::from_page(&page, "/api/v2/debates?status=completed&offset=20")
            .unwrap_or_default();
        assert_eq!(
            links.next.as_deref(),
            Some("/api/v2/debates?status=completed&offset=40")
        );
        assert_eq!(
            links.prev.as_deref(),
            Some("/api/v2/debates?status=completed&offset=0")
        );
        let last = json!({"total": 45, "limit": 20, "offset": 40});
        assert_eq!(
            ListLinks::from_page(&last, "/x").map(|l| l.next),
            Some(None)
        );
        assert!(ListLinks::from_page(&json!({"status": "healthy"}), "/x").is_none());
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn prefix_beats_header_beats_accept_beats_default() {
        let both = headers(&[
            ("x-api-version", "1"),
            ("accept", "application/json; version=2"),
        ]);
        assert_eq!(
            negotiate("/api/v2/x", &both).unwrap().version,
            ApiVersion::V2
        );
        assert_eq!(negotiate("/api/x", &both).unwrap().version, ApiVersion::V1);
        let accept = headers(&[("accept", "application/json; version=2")]);
        assert_eq!(
            negotiate("/api/x", &accept).unwrap().version,
            ApiVersion::V2
        );
        let none = negotiate("/api/x", &HeaderMap::new()).unwrap();
        assert_eq!((none.version, none.explicit), (ApiVersion::V1, false));
        assert_eq!(none.error_form("/api/x"), ErrorForm::V1);
        assert_eq!(none.error_form("/metrics"), ErrorForm::General);
        assert_eq!(none.error_form("/apix"), ErrorForm::General);
        assert!(negotiate("/api/x", &headers(&[("x-api-version", "7")])).is_err());
    }

    #[test]
    fn levels_follow_the_dates() {
        let d = v1_deprecation();
        assert_eq!(d.level(midnight(2025, 6, 1)), DeprecationLevel::Notice);
        assert_eq!(d.level(midnight(2025, 12, 1)), DeprecationLevel::Warning);
        assert_eq!(d.level(midnight(2026, 5, 10)), DeprecationLevel::Critical);
        assert_eq!(d.level(midnight(2026, 6, 1)), DeprecationLevel::Sunset);
    }

    #[test]
    fn headers_are_rfc_8594_shaped() {
        let mut h = HeaderMap::new();
        v1_deprecation().apply(
            &mut h,
            Some("/api/v2/system/health"),
            midnight(2026, 11, 21),
        );
        assert_eq!(h["deprecation"], "@1735689600");
        assert_eq!(h["sunset"], "Mon, 01 Jun 2026 00:00:00 GMT");
        assert_eq!(
            h["link"],
            "</api/v2/system/health>; rel=\"successor-version\""
        );
        assert_eq!(h["x-deprecation-level"], "sunset");
        assert_eq!(h["x-api-deprecated"], "true");
    }
}
