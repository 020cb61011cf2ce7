//! Where finished backups are kept: the local backup directory, or an
//! S3-compatible bucket. A backup is always written to a local staging
//! directory first (one consistent read of the store, checksummed as it is
//! written) and uploaded from there as it stands, so the bucket never sees
//! a half-written copy; what reads a backup back downloads its objects into
//! a scratch directory and works on files, the same code for both.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as Key;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig, WriteMultipart};
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::archive::{EVENTS, MANIFEST, SEALS, SUBJECT_KEYS};
use super::{BackupError, Backups};
use crate::config::BackupSettings;

/// A request to the bucket that did not succeed.
#[derive(Debug, Error)]
#[error("the backup storage (bucket {bucket}) failed to {action} {key}: {source}")]
pub struct StorageError {
    bucket: String,
    action: &'static str,
    key: String,
    #[source]
    source: Box<object_store::Error>,
}

/// Where backups are kept.
#[derive(Debug)]
pub enum Storage {
    /// Directories in `SERVICE_BACKUP_DIR`.
    Local,
    /// Objects `<prefix>/<backup_id>/<file>` in a bucket.
    S3(Bucket),
}

/// An S3-compatible bucket and the key prefix backups go under.
#[derive(Debug)]
pub struct Bucket {
    store: Arc<dyn ObjectStore>,
    name: String,
    prefix: String,
    part_size: usize,
    parallel_parts: usize,
}

/// A backup's data files; its manifest goes up last, so that a backup
/// whose manifest is in the bucket is whole.
pub const DATA_FILES: [&str; 3] = [EVENTS, SEALS, SUBJECT_KEYS];

/// Whether a downloaded object was there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fetched {
    Copied,
    Missing,
}

impl Storage {
    /// The storage `s3` names, local without one. A bucket whose client
    /// cannot be built (the settings were checked at start, so this is not
    /// expected) fails the start like a bad setting.
    pub fn new(settings: &BackupSettings) -> Result<Self, Box<object_store::Error>> {
        let Some(s3) = &settings.s3 else {
            return Ok(Storage::Local);
        };
        let options = ClientOptions::new()
            .with_allow_http(s3.allow_http)
            .with_timeout(s3.timeout)
            .with_connect_timeout(s3.connect_timeout);
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(&s3.bucket)
            .with_region(&s3.region)
            .with_access_key_id(&s3.access_key_id)
            .with_secret_access_key(s3.secret_access_key.expose())
            .with_allow_http(s3.allow_http)
            .with_virtual_hosted_style_request(false)
            .with_client_options(options)
            .with_retry(RetryConfig {
                backoff: BackoffConfig::default(),
                max_retries: s3.max_retries,
                retry_timeout: s3.timeout,
            });
        if let Some(endpoint) = &s3.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        if let Some(token) = &s3.session_token {
            builder = builder.with_token(token.expose());
        }
        Ok(Storage::S3(Bucket {
            store: Arc::new(builder.build().map_err(Box::new)?),
            name: s3.bucket.clone(),
            prefix: s3.prefix.clone(),
            part_size: s3.part_size,
            parallel_parts: s3.parallel_parts,
        }))
    }

    /// `local` or `s3`, as the backup views show it.
    pub fn name(&self) -> &'static str {
        match self {
            Storage::Local => "local",
            Storage::S3(_) => "s3",
        }
    }
}

impl Bucket {
    fn key(&self, id: &str, name: &str) -> Key {
        Key::from(format!("{}/{id}/{name}", self.prefix))
    }

    fn failed(&self, action: &'static str, key: &Key, source: object_store::Error) -> StorageError {
        StorageError {
            bucket: self.name.clone(),
            action,
            key: key.to_string(),
            source: Box::new(source),
        }
    }

    /// Uploads the files `names` of `dir` as backup `id`'s objects, in that
    /// order, each streamed from disk: one request up to a part's size, in
    /// parts beyond it (a failed multipart upload is aborted).
    pub async fn upload(&self, id: &str, dir: &Path, names: &[&str]) -> Result<(), StorageError> {
        for name in names {
            let key = self.key(id, name);
            let mut file = tokio::fs::File::open(dir.join(name))
                .await
                .map_err(|e| self.failed("read the staged file for", &key, io(e)))?;
            let first = self.read_part(&mut file, &key).await?;
            if first.len() < self.part_size {
                self.store
                    .put(&key, first.into())
                    .await
                    .map_err(|e| self.failed("upload", &key, e))?;
                continue;
            }
            let upload = self
                .store
                .put_multipart(&key)
                .await
                .map_err(|e| self.failed("start the upload of", &key, e))?;
            let mut parts = WriteMultipart::new_with_chunk_size(upload, self.part_size);
            let mut part = first;
            let sent = loop {
                if part.is_empty() {
                    break Ok(());
                }
                if let Err(e) = parts.wait_for_capacity(self.parallel_parts).await {
                    break Err(self.failed("upload", &key, e));
                }
                parts.put(part.into());
                part = match self.read_part(&mut file, &key).await {
                    Ok(part) => part,
                    Err(e) => break Err(e),
                };
            };
            match sent {
                Ok(()) => {
                    parts
                        .finish()
                        .await
                        .map_err(|e| self.failed("finish the upload of", &key, e))?;
                }
                Err(e) => {
                    if let Err(abort) = parts.abort().await {
                        tracing::warn!(key = %key, error = %abort, "cannot abort a backup upload");
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Up to one part's size of `file` (less only at its end).
    async fn read_part(
        &self,
        file: &mut tokio::fs::File,
        key: &Key,
    ) -> Result<Vec<u8>, StorageError> {
        let mut part = Vec::with_capacity(self.part_size.min(1 << 20));
        let mut limited = file.take(self.part_size as u64);
        limited
            .read_to_end(&mut part)
            .await
            .map_err(|e| self.failed("read the staged file for", key, io(e)))?;
        Ok(part)
    }

    /// Downloads backup `id`'s object `name` into `dir/name`, streamed.
    pub async fn download(
        &self,
        id: &str,
        name: &str,
        dir: &Path,
    ) -> Result<Fetched, StorageError> {
        let key = self.key(id, name);
        let got = match self.store.get(&key).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(Fetched::Missing),
            Err(e) => return Err(self.failed("download", &key, e)),
        };
        let mut out = tokio::fs::File::create(dir.join(name))
            .await
            .map_err(|e| self.failed("write the download of", &key, io(e)))?;
        let mut chunks = got.into_stream();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| self.failed("download", &key, e))?;
            out.write_all(&chunk)
                .await
                .map_err(|e| self.failed("write the download of", &key, io(e)))?;
        }
        out.flush()
            .await
            .map_err(|e| self.failed("write the download of", &key, io(e)))?;
        Ok(Fetched::Copied)
    }

    /// Downloads backup `id` into `dir`: its manifest, then its data
    /// files (one missing is left for the checksums to report);
    /// [`Fetched::Missing`] when the manifest is not there.
    pub async fn download_backup(&self, id: &str, dir: &Path) -> Result<Fetched, StorageError> {
        if self.download(id, MANIFEST, dir).await? == Fetched::Missing {
            return Ok(Fetched::Missing);
        }
        for name in DATA_FILES {
            self.download(id, name, dir).await?;
        }
        Ok(Fetched::Copied)
    }

    /// Deletes every object of backup `id` (none is not an error).
    pub async fn remove(&self, id: &str) -> Result<(), StorageError> {
        let folder = Key::from(format!("{}/{id}", self.prefix));
        let mut listed = self.store.list(Some(&folder));
        let mut keys = Vec::new();
        while let Some(meta) = listed.next().await {
            keys.push(meta.map_err(|e| self.failed("list", &folder, e))?.location);
        }
        for key in keys {
            match self.store.delete(&key).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(self.failed("delete", &key, e)),
            }
        }
        Ok(())
    }

    /// Writes and deletes a probe object: the bucket answers and takes
    /// objects with these credentials.
    pub async fn probe(&self) -> Result<(), StorageError> {
        let key = Key::from(format!(
            "{}/.probe-{}",
            self.prefix,
            uuid::Uuid::new_v4().simple()
        ));
        self.store
            .put(&key, b"probe".to_vec().into())
            .await
            .map_err(|e| self.failed("write a probe object", &key, e))?;
        self.store
            .delete(&key)
            .await
            .map_err(|e| self.failed("delete the probe object", &key, e))
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl StorageError {
    /// The bucket that failed.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }
}

/// A local file error in the form the storage errors carry.
fn io(e: std::io::Error) -> object_store::Error {
    object_store::Error::Generic {
        store: "local staging",
        source: Box::new(e),
    }
}

/// A backup's files on local disk for reading: its directory in
/// `SERVICE_BACKUP_DIR`, or a scratch copy of its objects that
/// [`Opened::close`] removes.
pub(super) struct Opened {
    pub dir: PathBuf,
    downloaded: bool,
}

impl Opened {
    pub async fn close(self) {
        if self.downloaded
            && let Err(e) = tokio::fs::remove_dir_all(&self.dir).await
        {
            tracing::warn!(dir = %self.dir.display(), error = %e, "cannot remove a downloaded backup");
        }
    }
}

impl Backups {
    /// Keeps the backup staged in `staged` as backup `id`: renamed into the
    /// backup directory, or uploaded to the bucket and the staged copy
    /// removed. A failed upload leaves nothing behind (what went up is
    /// deleted again), so the backup is not recorded at all.
    pub(super) async fn keep_staged(&self, id: &str, staged: &Path) -> Result<(), BackupError> {
        let Storage::S3(bucket) = self.storage() else {
            let kept = tokio::fs::rename(staged, self.dir().join(id)).await;
            if kept.is_err() {
                let _ = tokio::fs::remove_dir_all(staged).await;
            }
            return Ok(kept?);
        };
        let mut uploaded = bucket.upload(id, staged, &DATA_FILES).await;
        if uploaded.is_ok() {
            uploaded = bucket.upload(id, staged, &[MANIFEST]).await;
        }
        if let Err(e) = tokio::fs::remove_dir_all(staged).await {
            tracing::warn!(dir = %staged.display(), error = %e, "cannot remove a staged backup");
        }
        if uploaded.is_err()
            && let Err(e) = bucket.remove(id).await
        {
            tracing::warn!(backup = id, error = %e, "cannot remove a failed upload");
        }
        Ok(uploaded?)
    }

    /// Backup `id`'s files for reading: its directory when it is in the
    /// backup directory (every backup made before a bucket was configured),
    /// else its objects downloaded into a scratch directory.
    pub(super) async fn open(&self, id: &str) -> Result<Opened, BackupError> {
        let local = self.dir().join(id);
        let Storage::S3(bucket) = self.storage() else {
            return Ok(Opened {
                dir: local,
                downloaded: false,
            });
        };
        if tokio::fs::try_exists(local.join(MANIFEST))
            .await
            .unwrap_or(false)
        {
            return Ok(Opened {
                dir: local,
                downloaded: false,
            });
        }
        let dir = scratch_dir(self.dir());
        tokio::fs::create_dir_all(&dir).await?;
        let opened = Opened {
            dir,
            downloaded: true,
        };
        // A missing manifest is for the verification to report.
        match bucket.download_backup(id, &opened.dir).await {
            Ok(_) => Ok(opened),
            Err(e) => {
                opened.close().await;
                Err(e.into())
            }
        }
    }
}

/// A new directory for a downloaded backup, beside the scratch stores.
pub fn scratch_dir(backups: &Path) -> PathBuf {
    backups
        .join(".scratch")
        .join(format!("download-{}", uuid::Uuid::new_v4().simple()))
}
