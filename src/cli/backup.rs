//! `agon backup` and `agon restore`, for operators: a backup of the store
//! the settings name, made without the service running; and a restore of
//! one into an empty store, its read models rebuilt and its log verified,
//! so a service started on it serves at once, from the backup directory or
//! the bucket the settings name.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::backup::{Backups, Storage, archive, restore, storage};
use crate::clock::Clock;
use crate::config::Settings;
use crate::crypto::signing::SealKey;
use crate::store::EventLog;

/// What `agon restore` restores: a backup directory, the name of one in
/// `SERVICE_BACKUP_DIR`, or the name of one in the bucket (downloaded into
/// a scratch directory, the second of the pair, to remove afterwards).
async fn backup_dir(settings: &Settings, from: &str) -> Result<(PathBuf, bool), String> {
    let path = PathBuf::from(from);
    if path.is_dir() {
        return Ok((path, false));
    }
    let local = settings.backup.dir.join(from);
    if local.is_dir() || !crate::backup::is_backup_name(from) {
        return Ok((local, false));
    }
    let Storage::S3(bucket) = Storage::new(&settings.backup).map_err(|e| e.to_string())? else {
        return Ok((local, false));
    };
    let dir = storage::scratch_dir(&settings.backup.dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    match bucket.download_backup(from, &dir).await {
        Ok(storage::Fetched::Copied) => Ok((dir, true)),
        fetched => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(match fetched {
                Err(e) => e.to_string(),
                _ => format!("no backup {from} in the bucket {}", bucket.name()),
            })
        }
    }
}

fn trusted_key(settings: &Settings) -> Result<String, String> {
    SealKey::load_or_create(
        settings.signing_key.as_ref().map(|s| s.expose()),
        &settings.data_dir,
    )
    .map(|k| k.public_hex())
    .map_err(|e| format!("cannot load the seal signing key: {e}"))
}

/// Makes a backup of `log` and prints what it holds as JSON.
pub async fn backup(
    settings: &Settings,
    log: &EventLog,
    backup_type: &str,
    description: Option<String>,
) -> Result<(), String> {
    let backups = Backups::offline(
        log.clone(),
        settings.backup.clone(),
        settings
            .database_url
            .as_ref()
            .map(|u| u.expose().to_owned()),
        trusted_key(settings)?,
        Clock::default(),
    )
    .map_err(|e| e.to_string())?;
    let doc = backups
        .create(backup_type, description, "cli")
        .await
        .map_err(|e| e.to_string())?;
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    println!("{text}");
    Ok(())
}

/// Restores the backup `from` into `log` (which must hold no events),
/// rebuilds every read model and verifies the restored log, printing a
/// JSON report; an error when any step fails or the log does not verify.
pub async fn restore(settings: &Settings, log: &EventLog, from: &str) -> Result<(), String> {
    let (dir, downloaded) = backup_dir(settings, from).await?;
    let restored = restore_from(settings, log, &dir).await;
    if downloaded {
        let _ = std::fs::remove_dir_all(&dir);
    }
    restored
}

/// [`restore`] from the backup's files in `dir`.
async fn restore_from(settings: &Settings, log: &EventLog, dir: &Path) -> Result<(), String> {
    let text = std::fs::read(dir.join(archive::MANIFEST))
        .map_err(|e| format!("no backup at {}: {e}", dir.display()))?;
    let manifest: archive::Manifest =
        serde_json::from_slice(&text).map_err(|e| format!("the manifest is not valid: {e}"))?;
    if let Some(problem) = archive::check_files(dir, &manifest)
        .await
        .map_err(|e| e.to_string())?
    {
        return Err(problem);
    }
    let started = std::time::Instant::now();
    let loaded = restore::load(log.db(), dir, settings.backup.batch_rows)
        .await
        .map_err(|e| e.to_string())?;
    let replayed = restore::replay(log).await.map_err(|e| e.to_string())?;
    let report = log
        .verify(&trusted_key(settings)?)
        .await
        .map_err(|e| e.to_string())?;
    let out = json!({
        "backup_id": manifest.backup_id,
        "events_restored": loaded.events,
        "seals_restored": loaded.seals,
        "events_replayed": replayed,
        "events_checked": report.events_checked,
        "seals_checked": report.seals_checked,
        "problem": report.problem.as_ref().map(ToString::to_string),
        "elapsed_ms": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    });
    println!("{out:#}");
    if report.events_checked != manifest.events || report.seals_checked != manifest.seals {
        return Err("the restored log does not hold what the manifest says".to_owned());
    }
    match report.problem {
        Some(problem) => Err(format!("the restored log does not verify: {problem}")),
        None => Ok(()),
    }
}
