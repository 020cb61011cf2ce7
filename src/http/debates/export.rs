//! `GET /api/debates/export`: the caller's debate history as one JSON
//! document, as JSON lines, or as CSV (one row per debate).

use axum::extract::State;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use super::read::StatusName;
use super::views::{DebateDetail, DebateSummary};
use crate::auth::Caller;
use crate::debates::Debates;
use crate::http::error::ApiError;
use crate::http::extract::ApiQuery;
use crate::http::paging::Paging;

const PAGE: u32 = 500;

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ExportQuery {
    #[param(inline)]
    pub format: Option<ExportFormat>,
    /// Only debates with this status.
    #[param(inline)]
    pub status: Option<StatusName>,
    /// At most this many debates (default and maximum
    /// SERVICE_MAX_EXPORT_DEBATES, 10000 unless set).
    #[param(minimum = 1, maximum = 10000)]
    pub limit: Option<u32>,
}

/// json (default), ndjson or csv.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExportFormat {
    #[default]
    Json,
    Ndjson,
    Csv,
}

/// Exports the caller's debates (every debate for admins), newest first.
#[utoipa::path(get, path = "/api/debates/export", tag = "debates", params(ExportQuery),
    responses((status = 200, description = "JSON {debates, count}, JSON lines, or CSV",
        content(("application/json"), ("application/x-ndjson"), ("text/csv"))),
        (status = 400, description = "Unknown format or status")))]
pub async fn export_debates(
    State(service): State<Debates>,
    State(paging): State<Paging>,
    caller: Caller,
    ApiQuery(query): ApiQuery<ExportQuery>,
) -> Result<Response, ApiError> {
    let format = query.format.unwrap_or_default();
    let limit = paging.export(query.limit)?;
    let state = query.status.map(StatusName::as_str);
    let mut debates = Vec::new();
    while (debates.len() as u32) < limit {
        let want = PAGE.min(limit - debates.len() as u32);
        let (page, _) = service
            .list(&caller, state, want, debates.len() as u64)
            .await?;
        let last = page.len() < want as usize;
        debates.extend(page);
        if last {
            break;
        }
    }
    let (content_type, extension, body) = match format {
        ExportFormat::Ndjson => (
            "application/x-ndjson",
            "ndjson",
            debates
                .iter()
                .map(|d| serde_json::to_string(&DebateDetail::from(d)).unwrap_or_default() + "\n")
                .collect::<String>(),
        ),
        ExportFormat::Csv => ("text/csv; charset=utf-8", "csv", csv(&debates)),
        ExportFormat::Json => {
            let details: Vec<DebateDetail> = debates.iter().map(DebateDetail::from).collect();
            let body = serde_json::json!({
                "debates": details,
                "count": details.len(),
                "exported_at": service.now(),
            });
            ("application/json", "json", body.to_string())
        }
    };
    let file = format!("attachment; filename=\"debates.{extension}\"");
    Ok((
        [
            (CONTENT_TYPE, content_type.to_owned()),
            (CONTENT_DISPOSITION, file),
        ],
        body,
    )
        .into_response())
}

pub(super) const CSV_HEADER: &str = "id,topic,status,agents,rounds,created_at,completed_at,consensus_status,confidence,agree,agree_with_modifications,disagree,summary,error\n";

fn csv(debates: &[agon_aggregates::debate::Debate]) -> String {
    let mut out = String::from(CSV_HEADER);
    for debate in debates {
        push_row(&mut out, &summary_fields(debate));
    }
    out
}

/// One debate as a row under [`CSV_HEADER`].
pub(super) fn summary_fields(debate: &agon_aggregates::debate::Debate) -> Vec<String> {
    let summary = DebateSummary::from(debate);
    let consensus = debate.consensus.as_ref();
    let votes = consensus.map(|c| c.voting_summary).unwrap_or_default();
    vec![
        summary.id,
        summary.topic,
        summary.status,
        summary.agents.join(";"),
        summary.max_rounds.to_string(),
        rfc3339(summary.created_at),
        rfc3339(summary.completed_at),
        summary.consensus_status.unwrap_or_default(),
        summary
            .confidence
            .map(|c| format!("{c:.4}"))
            .unwrap_or_default(),
        votes.agree.to_string(),
        votes.agree_with_modifications.to_string(),
        votes.disagree.to_string(),
        consensus.map(|c| c.summary.clone()).unwrap_or_default(),
        summary.error.unwrap_or_default(),
    ]
}

pub(super) fn rfc3339(t: Option<chrono::DateTime<chrono::Utc>>) -> String {
    t.map(|t| t.to_rfc3339()).unwrap_or_default()
}

/// Appends `fields` as one quoted CSV line.
pub(super) fn push_row(out: &mut String, fields: &[String]) {
    let row: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
    out.push_str(&row.join(","));
    out.push('\n');
}

/// RFC 4180 quoting; a leading `=`, `+`, `-` or `@` is defused so that a
/// spreadsheet does not run a topic as a formula.
pub(super) fn csv_field(text: &str) -> String {
    let defused = if text.starts_with(['=', '+', '-', '@']) {
        format!("'{text}")
    } else {
        text.to_owned()
    };
    if defused.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", defused.replace('"', "\"\""))
    } else {
        defused
    }
}

#[cfg(test)]
mod tests {
    use super::csv_field;

    #[test]
    fn csv_fields_are_quoted_and_formulas_defused() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("=1+1"), "'=1+1");
        assert_eq!(csv_field("line\nbreak"), "\"line\nbreak\"");
    }
}
