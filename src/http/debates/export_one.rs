//! `GET /api/debates/{id}/export/{format}`: one debate as a file to keep or
//! share — the detail as JSON, a table of it as CSV, or a Markdown report.

use agon_aggregates::debate::{Debate, VoteChoice};
use axum::extract::State;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use super::export::{CSV_HEADER, push_row, rfc3339, summary_fields};
use super::read::find;
use super::views::DebateDetail;
use crate::auth::Caller;
use crate::debates::Debates;
use crate::http::error::ApiError;
use crate::http::extract::{ApiPath, ApiQuery};

/// json (the detail), csv (a table) or md (a report).
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OneFormat {
    Json,
    Csv,
    Md,
}

/// Which table a CSV export holds.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Table {
    /// One row: the debate and its outcome (the columns of the bulk export).
    #[default]
    Summary,
    /// One row per message.
    Messages,
    /// One row per vote.
    Votes,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct OneQuery {
    /// The CSV table (default summary); JSON and Markdown hold everything.
    #[param(inline)]
    pub table: Option<Table>,
}

/// Exports one debate the caller may read.
#[utoipa::path(get, path = "/api/debates/{id}/export/{format}", tag = "debates",
    params(("id" = String, Path), ("format" = inline(OneFormat), Path), OneQuery),
    responses((status = 200, description = "The detail as JSON, a CSV table or a Markdown report",
        content(("application/json"), ("text/csv"), ("text/markdown"))),
        (status = 400, description = "Unknown format or table"),
        (status = 404, description = "No such debate")))]
pub async fn export_debate(
    State(debates): State<Debates>,
    caller: Caller,
    ApiPath((id, format)): ApiPath<(String, OneFormat)>,
    ApiQuery(query): ApiQuery<OneQuery>,
) -> Result<Response, ApiError> {
    let debate = find(&debates, &caller, &id).await?;
    let (content_type, extension, body) = match format {
        OneFormat::Json => (
            "application/json",
            "json",
            serde_json::to_string(&DebateDetail::from(&debate)).unwrap_or_default(),
        ),
        OneFormat::Csv => (
            "text/csv; charset=utf-8",
            "csv",
            table(&debate, query.table.unwrap_or_default()),
        ),
        OneFormat::Md => (
            "text/markdown; charset=utf-8",
            "md",
            crate::views::report::markdown(&debate),
        ),
    };
    let file = format!("attachment; filename=\"debate-{}.{extension}\"", debate.id);
    Ok((
        [
            (CONTENT_TYPE, content_type.to_owned()),
            (CONTENT_DISPOSITION, file),
        ],
        body,
    )
        .into_response())
}

fn table(debate: &Debate, table: Table) -> String {
    match table {
        Table::Summary => {
            let mut out = String::from(CSV_HEADER);
            push_row(&mut out, &summary_fields(debate));
            out
        }
        Table::Messages => {
            let mut out = String::from("index,round,phase,agent,targets,content,created_at\n");
            for (index, m) in debate.messages.iter().enumerate() {
                let fields = [
                    index.to_string(),
                    m.round.to_string(),
                    m.phase.clone(),
                    m.agent.clone(),
                    m.targets.join(";"),
                    m.content.clone(),
                    rfc3339(Some(m.at)),
                ];
                push_row(&mut out, &fields);
            }
            out
        }
        Table::Votes => {
            let mut out = String::from("agent,choice,confidence,reasons,modifications\n");
            for vote in &debate.votes {
                let fields = [
                    vote.agent.clone(),
                    choice(vote.choice).to_owned(),
                    format!("{:.4}", vote.confidence),
                    vote.reasons.join("; "),
                    vote.modifications.join("; "),
                ];
                push_row(&mut out, &fields);
            }
            out
        }
    }
}

fn choice(choice: VoteChoice) -> &'static str {
    match choice {
        VoteChoice::Agree => "agree",
        VoteChoice::AgreeWithModifications => "agree_with_modifications",
        VoteChoice::Disagree => "disagree",
    }
}
