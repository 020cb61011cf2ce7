//! What the admin console and the account page show that only the HTTP
//! face computes (its detailed health report, the rate limiter, recent
//! error responses, the metrics): [`Platform`], which the composition root
//! implements over the API's own handlers, so that the pages show exactly
//! what `/api/health/detailed`, `/api/system/rate-limits`,
//! `/api/rate-limits/config`, `/api/system/errors` and
//! `/api/rate-limit/status` serve, without `web` naming `http`.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use crate::auth::Caller;
use crate::ops::Ops;
use crate::push::Push;
use crate::web::report::{Section, leaf};

pub type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The HTTP face's operations data, each document as the JSON its endpoint
/// serves, asked for one at a time: each console page reads only what it
/// shows.
pub trait Platform: Send + Sync + Debug {
    /// `GET /api/health/detailed`.
    fn health(&self) -> Boxed<'_, Value>;
    /// `GET /api/system/rate-limits` (the live state) and
    /// `GET /api/rate-limits/config`.
    fn rate_limits(&self) -> Boxed<'_, (Value, Value)>;
    /// `GET /api/system/errors`, as many as the console lists.
    fn errors(&self) -> Value;
    /// The metrics' Prometheus text, as `/metrics` serves it.
    fn metrics(&self) -> String;
    /// `GET /api/rate-limit/status` for `caller`.
    fn rate_status<'a>(&'a self, caller: &'a Caller) -> Boxed<'a, Value>;
}

/// The services only the console needs.
#[derive(Debug, Clone)]
pub struct Console {
    pub ops: Ops,
    pub push: Push,
    pub platform: Arc<dyn Platform>,
}

/// One recent error response.
#[derive(Debug, Clone)]
pub struct RecentError {
    pub at: String,
    pub status: String,
    pub code: String,
    pub method: String,
    pub path: String,
    pub trace_id: String,
}

/// The rows of a `GET /api/system/errors` body.
pub fn recent_errors(body: &Value) -> Vec<RecentError> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    body["errors"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|e| RecentError {
                    at: text(&e["timestamp"]),
                    status: text(&e["status"]),
                    code: text(&e["code"]),
                    method: text(&e["method"]),
                    path: text(&e["path"]),
                    trace_id: text(&e["trace_id"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The metrics' sums as the console's one table.
pub fn metric_sections(prometheus: &str) -> Vec<Section> {
    vec![Section::facts(metric_sums(prometheus))]
}

/// The detailed health report in a few lines, as the console's overview
/// shows it (the whole report is its own page): the overall status, the
/// database, the bus, Redis, how many projections are caught up (naming
/// those that are not) and the last seal.
pub fn health_summary(health: &Value) -> Vec<(String, String)> {
    let db = &health["database"];
    let mut database = leaf(&db["status"]);
    if let Some(backend) = db["backend"].as_str() {
        let latency = db["latency_ms"]
            .as_f64()
            .map(|ms| format!(", {ms:.1} ms"))
            .unwrap_or_default();
        database = format!(
            "{database} ({backend}{latency}, head at {})",
            leaf(&db["head_position"])
        );
    }
    let bus = &health["event_bus"];
    let bus = match bus["kind"].as_str() {
        Some(kind) => format!("{} ({kind})", leaf(&bus["status"])),
        None => leaf(&bus["status"]),
    };
    let projections = health["projections"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let is_stalled = |p: &&Value| !p["stalled"].is_null() && p["stalled"] != Value::Bool(false);
    let is_behind = |p: &&Value| p["behind"] == Value::Bool(true);
    let names = |pick: fn(&&Value) -> bool| -> Vec<String> {
        projections
            .iter()
            .filter(pick)
            .map(|p| leaf(&p["name"]))
            .collect()
    };
    let (stalled, behind) = (names(is_stalled), names(is_behind));
    let caught_up = projections
        .iter()
        .filter(|p| !is_stalled(p) && !is_behind(p))
        .count();
    let mut lag = format!("{caught_up} of {} caught up", projections.len());
    if !behind.is_empty() {
        lag.push_str(&format!("; behind: {}", behind.join(", ")));
    }
    if !stalled.is_empty() {
        lag.push_str(&format!("; stalled: {}", stalled.join(", ")));
    }
    let seals = &health["seals"];
    let seal = match seals["last_seal_number"].as_u64() {
        Some(n) => format!(
            "number {n}, through position {}",
            leaf(&seals["sealed_through_position"])
        ),
        None => "none yet".to_owned(),
    };
    let seal = match seals["interval_seconds"].as_u64() {
        Some(every) => format!("{seal} (every {every} seconds)"),
        None => seal,
    };
    vec![
        ("Status".to_owned(), leaf(&health["status"])),
        ("Database".to_owned(), database),
        ("Event bus".to_owned(), bus),
        (
            "Redis".to_owned(),
            leaf(&health["checks"]["redis"]["status"]),
        ),
        ("Projections".to_owned(), lag),
        ("Last seal".to_owned(), seal),
    ]
}

/// Each metric family of a Prometheus text with the sum of its samples
/// (histogram buckets left out: their count and sum lines say enough).
pub fn metric_sums(text: &str) -> Vec<(String, String)> {
    let mut sums: std::collections::BTreeMap<&str, f64> = std::collections::BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let name = &line[..name_end];
        if name.ends_with("_bucket") {
            continue;
        }
        let Some(value) = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) else {
            continue;
        };
        *sums.entry(name).or_default() += value;
    }
    sums.into_iter()
        .map(|(name, sum)| {
            (
                name.to_owned(),
                format!("{}", (sum * 1000.0).round() / 1000.0),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_sums_up_in_a_few_lines_naming_what_lags() {
        let health = serde_json::json!({
            "status": "degraded",
            "checks": {"redis": {"status": "not_configured"}},
            "database": {"status": "healthy", "backend": "postgres", "latency_ms": 1.5, "head_position": 42},
            "event_bus": {"status": "healthy", "kind": "nats"},
            "projections": [
                {"name": "debates", "behind": false, "stalled": null},
                {"name": "leaderboard", "behind": true, "stalled": null},
                {"name": "accounts", "behind": true, "stalled": "12 s"},
            ],
            "seals": {"last_seal_number": 3, "sealed_through_position": 40, "interval_seconds": 60},
        });
        let rows: Vec<String> = health_summary(&health)
            .into_iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        assert_eq!(
            rows,
            [
                "Status: degraded",
                "Database: healthy (postgres, 1.5 ms, head at 42)",
                "Event bus: healthy (nats)",
                "Redis: not_configured",
                "Projections: 1 of 3 caught up; behind: leaderboard, accounts; stalled: accounts",
                "Last seal: number 3, through position 40 (every 60 seconds)",
            ]
        );
        let fresh = serde_json::json!({"status": "healthy", "projections": [], "seals": {"last_seal_number": null, "interval_seconds": 60}});
        assert_eq!(health_summary(&fresh)[5].1, "none yet (every 60 seconds)");
    }

    #[test]
    fn metric_families_are_summed_without_buckets() {
        let text =
            "# TYPE a counter\na{x=\"1\"} 2\na{x=\"2\"} 3\nh_bucket{le=\"1\"} 9\nh_count 4\n";
        assert_eq!(
            metric_sums(text),
            [
                ("a".to_owned(), "5".to_owned()),
                ("h_count".to_owned(), "4".to_owned())
            ]
        );
    }

    #[test]
    fn recent_errors_read_every_field_as_text() {
        let body = serde_json::json!({"errors": [
            {"timestamp": "2026-11-29T19:00:00Z", "status": 422, "code": "validation_error",
             "method": "POST", "path": "/api/debates", "trace_id": null},
        ], "total": 1});
        let rows = recent_errors(&body);
        assert_eq!(rows.len(), 1);
        let e = &rows[0];
        assert_eq!(
            [&e.at, &e.status, &e.code, &e.method, &e.path, &e.trace_id],
            [
                "2026-11-29T19:00:00Z",
                "422",
                "validation_error",
                "POST",
                "/api/debates",
                ""
            ]
        );
        assert!(recent_errors(&serde_json::json!({})).is_empty());
    }
}
