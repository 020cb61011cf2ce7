//! `agon verify`, `agon seal` and `agon keys public`: the commands that
//! inspect or seal a log that already exists. They never create a data
//! directory, a database, a table or a key, so a mistyped `SERVICE_DATA_DIR`
//! or `DATABASE_URL` is refused (exit 2) instead of passing for an empty,
//! intact log. `verify` opens the store read-only and, given `--public-key`,
//! needs no key file at all.

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::config::Settings;
use crate::crypto::signing::{KEY_FILE, KeyError, SealKey};
use crate::store::expect::SavedSeal;
use crate::store::verify::{PositionRange, VerifyReport};
use crate::store::{Db, EventLog, StoreError};

/// Why one of these commands could not run (exit 2).
#[derive(Debug, Error)]
pub enum InspectError {
    #[error(
        "no event store at {0}: check SERVICE_DATA_DIR (nothing was created; `agon serve` creates the store)"
    )]
    NoSqliteStore(String),
    #[error(
        "the PostgreSQL database at DATABASE_URL holds no event log (no events and seals tables); nothing was created"
    )]
    NoPostgresLog,
    #[error("cannot open the event store: {0}")]
    Store(#[from] StoreError),
    #[error(
        "no seal key: {0} does not exist and SERVICE_SIGNING_KEY is not set (check SERVICE_DATA_DIR; `agon verify --public-key HEX` needs no key)"
    )]
    NoKey(String),
    #[error("cannot load the seal signing key: {0}")]
    Key(#[from] KeyError),
    #[error("--public-key must be 64 hexadecimal characters (an ed25519 public key)")]
    BadPublicKey,
    #[error("cannot read the saved seal {path}: {source}")]
    SavedSealFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a saved seal (the JSON printed by `agon seal --json`): {reason}")]
    NotASavedSeal { path: String, reason: String },
}

/// What `agon verify` was asked.
#[derive(Debug, Clone, Default)]
pub struct VerifyRequest {
    pub json: bool,
    /// Hex public key to check seals against instead of the local key.
    pub public_key: Option<String>,
    /// A saved seal the log must still hold.
    pub expect_seal: Option<PathBuf>,
    /// Only the events at these positions (and the seals over them).
    pub range: Option<PositionRange>,
}

/// Runs `agon verify`, printing the report; `Ok(true)` when intact.
pub async fn verify(settings: &Settings, request: &VerifyRequest) -> Result<bool, InspectError> {
    let public_key = request
        .public_key
        .as_deref()
        .map(parse_public_key)
        .transpose()?;
    let saved = request
        .expect_seal
        .as_deref()
        .map(read_saved_seal)
        .transpose()?;
    let log = open_existing(settings, true).await?;
    let range = request.range.unwrap_or(PositionRange::ALL);
    let outcome = check(settings, &log, public_key, range, saved.as_ref()).await;
    log.db().close().await;
    let report = outcome?;
    print_report(&report, request.json);
    Ok(report.intact())
}

async fn check(
    settings: &Settings,
    log: &EventLog,
    public_key: Option<String>,
    range: PositionRange,
    saved: Option<&SavedSeal>,
) -> Result<VerifyReport, InspectError> {
    let trusted_key = match public_key {
        Some(key) => key,
        None => existing_key(settings)?.public_hex(),
    };
    Ok(log.verify_with(&trusted_key, range, saved).await?)
}

fn print_report(report: &VerifyReport, json: bool) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(report).unwrap_or_default()
        );
        return;
    }
    if let Some(problem) = &report.problem {
        println!("BROKEN: {problem}");
        return;
    }
    println!(
        "intact: {} events in {} streams, {} seals, {} events not sealed yet",
        report.events_checked, report.streams_checked, report.seals_checked, report.unsealed_events
    );
    if let Some(found) = report.saved_seal {
        println!(
            "saved seal {} is in the log as saved, followed by {} later seals",
            found.seal_number, found.later_seals
        );
    }
}

/// Runs `agon seal`: seals what is new; with `json`, prints the newest seal
/// in the form `--expect-seal` reads.
pub async fn seal(settings: &Settings, json: bool) -> Result<(), InspectError> {
    let log = open_existing(settings, false).await?;
    let outcome = seal_and_report(settings, &log, json).await;
    log.db().close().await;
    outcome
}

async fn seal_and_report(
    settings: &Settings,
    log: &EventLog,
    json: bool,
) -> Result<(), InspectError> {
    let sealed = log.seal_now(&existing_key(settings)?).await?;
    if !json {
        match sealed {
            Some(seal) => println!(
                "seal {} covers {} events",
                seal.seal_number, seal.event_count
            ),
            None => println!("nothing to seal"),
        }
        return Ok(());
    }
    match log.last_seal().await? {
        Some(last) => {
            let saved = SavedSeal::from_stored(&last)?;
            println!(
                "{}",
                serde_json::to_string_pretty(&saved).map_err(StoreError::from)?
            );
        }
        None => eprintln!("agon: nothing to seal: the log is empty"),
    }
    Ok(())
}

/// Runs `agon keys public`: the configured key, or the key file, never a new one.
pub fn keys_public(settings: &Settings) -> Result<(), InspectError> {
    println!("{}", existing_key(settings)?.public_hex());
    Ok(())
}

/// The store the settings name, if it exists; `read_only` for verification.
async fn open_existing(settings: &Settings, read_only: bool) -> Result<EventLog, InspectError> {
    let db = match &settings.database_url {
        Some(url) => Db::connect_postgres_existing(url.expose(), 2)
            .await?
            .ok_or(InspectError::NoPostgresLog)?,
        None => Db::open_sqlite_existing(&settings.data_dir, read_only)
            .await?
            .ok_or_else(|| {
                InspectError::NoSqliteStore(settings.data_dir.join("agon.db").display().to_string())
            })?,
    };
    Ok(EventLog::new(db))
}

/// The configured seal key, or the one in the key file; never a new one.
fn existing_key(settings: &Settings) -> Result<SealKey, InspectError> {
    let configured = settings.signing_key.as_ref().map(|s| s.expose());
    let path = settings.data_dir.join(KEY_FILE);
    if configured.is_none() && !path.is_file() {
        return Err(InspectError::NoKey(path.display().to_string()));
    }
    Ok(SealKey::load_or_create(configured, &settings.data_dir)?)
}

/// A hex ed25519 public key as seals spell it: 64 lower-case hex characters.
fn parse_public_key(text: &str) -> Result<String, InspectError> {
    let text = text.trim().to_ascii_lowercase();
    match hex::decode(&text) {
        Ok(bytes) if bytes.len() == 32 => Ok(text),
        _ => Err(InspectError::BadPublicKey),
    }
}

fn read_saved_seal(path: &Path) -> Result<SavedSeal, InspectError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| InspectError::SavedSealFile {
        path: shown.clone(),
        source,
    })?;
    let not_saved = |reason: String| InspectError::NotASavedSeal {
        path: shown.clone(),
        reason,
    };
    let saved: SavedSeal = serde_json::from_str(&text).map_err(|e| not_saved(e.to_string()))?;
    match saved.self_fault() {
        Ok(None) => Ok(saved),
        Ok(Some(fault)) => Err(not_saved(fault.to_owned())),
        Err(e) => Err(not_saved(e.to_string())),
    }
}

/// The range `--from-position`/`--to-position` name; `None` for the whole log.
pub fn position_range(from: Option<i64>, to: Option<i64>) -> Option<PositionRange> {
    PositionRange::between(from, to)
}
