//! Exports: one trail as JSON, CSV or Markdown; audit entries as JSON or
//! CSV; and the SOC 2 evidence package, one zip archive holding the log's
//! links, the audit entries, every seal, the public key and the verification
//! report (layout in `event-schemas/AUDIT.md`).

use std::io::Write as _;

use serde::Serialize;
use serde_json::json;
use zip::write::SimpleFileOptions;

use super::entries::{Entry, EntryFilter};
use super::trail::{Trail, TrailEntry};
use super::{Audit, AuditError, Viewer};
use crate::store::expect::SavedSeal;
use crate::store::verify::{PositionRange, VerifyReport};
use sha2::{Digest, Sha256};

/// The version tag of the JSON forms (schemas under `event-schemas/audit/`).
pub const TRAIL_EXPORT_FORMAT: &str = "agon.audit-trail.v1";
pub const PACKAGE_FORMAT: &str = "agon.soc2-evidence.v1";

/// What an export is written as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Csv,
    Markdown,
    /// The SOC 2 evidence package (entries exports only).
    Soc2,
}

/// An export's bytes and how to serve them.
#[derive(Debug, Clone)]
pub struct Exported {
    pub content_type: &'static str,
    pub filename: String,
    pub body: Vec<u8>,
}

/// A trail export in JSON (`event-schemas/audit/trail-export.v1.json`).
#[derive(Debug, Serialize)]
struct TrailExport<'a> {
    format: &'static str,
    trail_id: &'a str,
    subject_type: Option<&'a str>,
    subject_id: Option<&'a str>,
    public_key: &'a str,
    entries: &'a [TrailEntry],
    verification: &'a VerifyReport,
}

/// A CSV field: quoted when it must be, and never read as a formula by a
/// spreadsheet (a leading `=`, `+`, `-`, `@` gets a `'`).
fn csv_field(text: &str) -> String {
    let text = match text.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') => format!("'{text}"),
        _ => text.to_owned(),
    };
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

fn csv_line(out: &mut String, fields: &[&str]) {
    let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
    out.push_str(&line.join(","));
    out.push_str("\r\n");
}

/// Markdown table cell text: pipes and line breaks escaped.
fn md_cell(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

fn trail_csv(trail: &Trail) -> String {
    let mut out = String::new();
    csv_line(
        &mut out,
        &[
            "position",
            "sequence",
            "event_type",
            "actor",
            "request_id",
            "recorded_at",
            "changes",
            "redacted",
            "prev_hash",
            "hash",
        ],
    );
    for e in &trail.entries {
        csv_line(
            &mut out,
            &[
                &e.position.to_string(),
                &e.sequence.to_string(),
                &e.event_type,
                e.actor.as_deref().unwrap_or(""),
                e.request_id.as_deref().unwrap_or(""),
                e.recorded_at.as_deref().unwrap_or(""),
                &e.changes.to_string(),
                if e.redacted { "true" } else { "false" },
                &e.prev_hash,
                &e.hash,
            ],
        );
    }
    out
}

fn trail_markdown(trail: &Trail, report: &VerifyReport) -> String {
    let summary = &trail.summary;
    let mut out = format!("# Audit trail `{}`\n\n", md_cell(&summary.trail_id));
    let verdict = match &report.problem {
        None => format!(
            "intact: {} events checked, {} seals checked, {} not sealed yet",
            report.events_checked, report.seals_checked, report.unsealed_events
        ),
        Some(problem) => format!("BROKEN: {}", md_cell(&problem.to_string())),
    };
    out.push_str(&format!("Verification: {verdict}\n\n"));
    out.push_str(
        "| position | sequence | event | actor | request id | recorded at | changes | hash |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|\n");
    for e in &trail.entries {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | `{}` | `{}` |\n",
            e.position,
            e.sequence,
            md_cell(&e.event_type),
            md_cell(e.actor.as_deref().unwrap_or("")),
            md_cell(e.request_id.as_deref().unwrap_or("")),
            md_cell(e.recorded_at.as_deref().unwrap_or("")),
            md_cell(&e.changes.to_string()).replace('`', "'"),
            e.hash
        ));
    }
    out
}

fn entries_csv(entries: &[Entry]) -> String {
    let mut out = String::new();
    csv_line(
        &mut out,
        &[
            "position",
            "trail_id",
            "subject_type",
            "subject_id",
            "sequence",
            "event_type",
            "actor",
            "request_id",
            "recorded_at",
        ],
    );
    for e in entries {
        csv_line(
            &mut out,
            &[
                &e.position.to_string(),
                e.trail_id.as_deref().unwrap_or(""),
                e.subject_type.as_deref().unwrap_or(""),
                e.subject_id.as_deref().unwrap_or(""),
                &e.sequence.map(|s| s.to_string()).unwrap_or_default(),
                e.event_type.as_deref().unwrap_or(""),
                e.actor.as_deref().unwrap_or(""),
                e.request_id.as_deref().unwrap_or(""),
                e.recorded_at.as_deref().unwrap_or(""),
            ],
        );
    }
    out
}

fn file_stem(trail_id: &str) -> String {
    trail_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec_pretty(value).unwrap_or_default()
}

impl Audit {
    /// The trail in `format` (JSON, CSV or Markdown), with its verification.
    pub async fn export_trail(
        &self,
        viewer: &Viewer,
        trail_id: &str,
        format: Format,
    ) -> Result<Exported, AuditError> {
        let trail = self.trail(viewer, trail_id, None).await?;
        let report = self.verify_trail(viewer, trail_id).await?;
        let stem = format!("audit-trail-{}", file_stem(trail_id));
        Ok(match format {
            Format::Csv => Exported {
                content_type: "text/csv; charset=utf-8",
                filename: format!("{stem}.csv"),
                body: trail_csv(&trail).into_bytes(),
            },
            Format::Markdown => Exported {
                content_type: "text/markdown; charset=utf-8",
                filename: format!("{stem}.md"),
                body: trail_markdown(&trail, &report).into_bytes(),
            },
            Format::Json | Format::Soc2 => Exported {
                content_type: "application/json",
                filename: format!("{stem}.json"),
                body: to_json(&TrailExport {
                    format: TRAIL_EXPORT_FORMAT,
                    trail_id,
                    subject_type: trail.summary.subject_type.as_deref(),
                    subject_id: trail.summary.subject_id.as_deref(),
                    public_key: self.public_key(),
                    entries: &trail.entries,
                    verification: &report,
                }),
            },
        })
    }

    /// Audit entries matching `filter` in `format`; JSON and CSV hold at
    /// most `max` entries (JSON names the cursor to continue from). The SOC 2
    /// package is admin only and covers the whole log.
    pub async fn export_entries(
        &self,
        viewer: &Viewer,
        filter: &EntryFilter,
        format: Format,
        max: u32,
    ) -> Result<Exported, AuditError> {
        if format == Format::Soc2 {
            if *viewer != Viewer::Admin {
                return Err(AuditError::AdminOnly(
                    "the SOC 2 package covers every user: admins only",
                ));
            }
            return self.soc2_package(filter, max).await;
        }
        let page = self.entries(viewer, filter, max).await?;
        Ok(match format {
            Format::Csv | Format::Markdown => Exported {
                content_type: "text/csv; charset=utf-8",
                filename: "audit-events.csv".to_owned(),
                body: entries_csv(&page.entries).into_bytes(),
            },
            _ => Exported {
                content_type: "application/json",
                filename: "audit-events.json".to_owned(),
                body: to_json(&json!({
                    "format": "agon.audit-events.v1",
                    "entries": page.entries,
                    "next_cursor": page.next_cursor.map(|c| c.to_string()),
                })),
            },
        })
    }

    async fn soc2_package(&self, filter: &EntryFilter, max: u32) -> Result<Exported, AuditError> {
        let total = self.log().event_count().await?;
        if total > i64::from(max) {
            return Err(AuditError::Invalid(format!(
                "the log holds {total} events, more than the {max} one package may hold \
                 (SERVICE_AUDIT_EXPORT_MAX_EVENTS)"
            )));
        }
        let links = self.log().chain_links(i64::from(max)).await?;
        let seals = self
            .log()
            .seals()
            .await?
            .iter()
            .map(SavedSeal::from_stored)
            .collect::<Result<Vec<_>, _>>()?;
        let entries = self.entries(&Viewer::Admin, filter, max).await?.entries;
        let report = self.verify(PositionRange::ALL, None).await?;
        let mut files: Vec<(&str, Vec<u8>)> = vec![
            ("events.json", to_json(&links)),
            ("audit_entries.json", to_json(&entries)),
            ("seals.json", to_json(&seals)),
            (
                "public_key.txt",
                format!("{}\n", self.public_key()).into_bytes(),
            ),
            ("verification.json", to_json(&report)),
        ];
        let digests: Vec<_> = files
            .iter()
            .map(
                |(name, bytes)| json!({"file": name, "sha256": hex::encode(Sha256::digest(bytes))}),
            )
            .collect();
        files.push((
            "manifest.json",
            to_json(&json!({"format": PACKAGE_FORMAT, "files": digests})),
        ));
        Ok(Exported {
            content_type: "application/zip",
            filename: "agon-soc2-evidence.zip".to_owned(),
            body: zip_files(&files).map_err(AuditError::Export)?,
        })
    }
}

/// A zip archive of `files`, deflated.
fn zip_files(files: &[(&str, Vec<u8>)]) -> Result<Vec<u8>, std::io::Error> {
    let mut archive = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in files {
        archive
            .start_file(*name, options)
            .map_err(std::io::Error::other)?;
        archive.write_all(bytes)?;
    }
    Ok(archive
        .finish()
        .map_err(std::io::Error::other)?
        .into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_and_never_formulas() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("=SUM(A1)"), "'=SUM(A1)");
    }

    #[test]
    fn markdown_cells_cannot_break_the_table() {
        assert_eq!(md_cell("a|b\nc"), "a\\|b c");
    }
}
