//! Crypto-shredding: personal fields in events are sealed under a key of
//! their own subject (a user), kept wrapped by the field cipher in the
//! `subject_keys` table, outside the hash chain. Events are never rewritten;
//! erasing a subject deletes its row, after which its sealed fields can no
//! longer be opened while every hash and seal over them still verifies.
//!
//! A sealed field is a string, `agon:sealed:<subject>:<nonce>:<ciphertext>`
//! (unpadded base64url, AES-256-GCM, the subject as associated data so a
//! value cannot be moved to another subject). Any other string is a value
//! stored before sealing and reads as it is.

use std::collections::HashMap;

use aes_gcm::aead::{Aead, Nonce, Payload};
use aes_gcm::{Aes256Gcm, Key};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;
use sha2::Sha256;
use thiserror::Error;

use super::fields::{FieldCipher, FieldError};
use crate::store::StoreError;
use crate::store::db::{Db, with_pool};

/// The start of every sealed field.
pub const SEALED_PREFIX: &str = "agon:sealed:";
const KEY_BYTES: usize = 32;
const NONCE_BYTES: usize = 12;
/// Subjects per statement of [`SubjectKeys::get_many`] (well under both
/// back ends' limits on bound parameters).
const BULK_SUBJECTS: usize = 500;

/// Why a subject key could not be made, found or used.
#[derive(Debug, Error)]
pub enum SubjectKeyError {
    #[error("subject key store: {0}")]
    Store(#[from] StoreError),
    /// The stored key does not unwrap with the field cipher (wrong
    /// `SERVICE_ENCRYPTION_KEY`, or an altered row).
    #[error("subject key of {subject} does not unwrap")]
    Unwrap {
        subject: String,
        #[source]
        source: FieldError,
    },
    /// Erased by a concurrent request while it was being made.
    #[error("subject key of {subject} was destroyed as it was stored")]
    Vanished { subject: String },
    #[error("sealed field of {subject} does not open with its key (altered data)")]
    Open { subject: String },
}

impl From<sqlx::Error> for SubjectKeyError {
    fn from(e: sqlx::Error) -> Self {
        SubjectKeyError::Store(StoreError::from(e))
    }
}

/// One subject's data key. Never printed.
#[derive(Clone)]
pub struct DataKey([u8; KEY_BYTES]);

impl std::fmt::Debug for DataKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataKey(..)")
    }
}

impl DataKey {
    /// A fresh random key.
    ///
    /// # Panics
    ///
    /// When the operating system cannot supply random bytes.
    pub fn generate() -> Self {
        let mut key = [0u8; KEY_BYTES];
        super::secrets::fill_random(&mut key);
        DataKey(key)
    }

    fn cipher(&self) -> Aes256Gcm {
        Aes256Gcm::new(&Key::<Aes256Gcm>::from(self.0))
    }

    /// Seals `plaintext` as a field of `subject`.
    ///
    /// # Panics
    ///
    /// When the operating system cannot supply random bytes, or the
    /// plaintext exceeds AES-GCM's limit of about 64 GiB.
    pub fn seal(&self, subject: &str, plaintext: &str) -> String {
        let mut nonce = [0u8; NONCE_BYTES];
        super::secrets::fill_random(&mut nonce);
        let payload = Payload {
            msg: plaintext.as_bytes(),
            aad: subject.as_bytes(),
        };
        let Ok(sealed) = self
            .cipher()
            .encrypt(&Nonce::<Aes256Gcm>::from(nonce), payload)
        else {
            panic!("field plaintext is too long for AES-GCM");
        };
        format!(
            "{SEALED_PREFIX}{subject}:{}:{}",
            URL_SAFE_NO_PAD.encode(nonce),
            URL_SAFE_NO_PAD.encode(sealed)
        )
    }

    /// The plaintext of a sealed field of `subject`; `None` if it does not
    /// open (another subject's, malformed or altered).
    fn open(&self, subject: &str, nonce: &[u8], sealed: &[u8]) -> Option<String> {
        let nonce: [u8; NONCE_BYTES] = nonce.try_into().ok()?;
        let payload = Payload {
            msg: sealed,
            aad: subject.as_bytes(),
        };
        let plain = self
            .cipher()
            .decrypt(&Nonce::<Aes256Gcm>::from(nonce), payload)
            .ok()?;
        String::from_utf8(plain).ok()
    }
}

/// A sealed field taken apart.
struct SealedParts<'a> {
    subject: &'a str,
    nonce: Vec<u8>,
    ciphertext: Vec<u8>,
}

fn parts(text: &str) -> Option<SealedParts<'_>> {
    let rest = text.strip_prefix(SEALED_PREFIX)?;
    let (rest, ciphertext) = rest.rsplit_once(':')?;
    let (subject, nonce) = rest.rsplit_once(':')?;
    Some(SealedParts {
        subject,
        nonce: URL_SAFE_NO_PAD.decode(nonce).ok()?,
        ciphertext: URL_SAFE_NO_PAD.decode(ciphertext).ok()?,
    })
}

/// Whether `text` is a sealed field (else a value stored before sealing).
pub fn is_sealed(text: &str) -> bool {
    text.starts_with(SEALED_PREFIX)
}

/// The subject whose key a sealed field needs; `None` for a plain value.
pub fn sealed_subject(text: &str) -> Option<&str> {
    text.strip_prefix(SEALED_PREFIX)
        .and_then(|rest| rest.split(':').next())
}

/// What a stored personal field reads as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revealed {
    /// The plaintext (or a value stored before sealing, as it is).
    Plain(String),
    /// Its subject's key is gone: erased.
    Erased,
}

/// Opens `text` with `key`, the key of its subject if there still is one.
pub fn reveal(text: &str, key: Option<&DataKey>) -> Result<Revealed, SubjectKeyError> {
    if !text.starts_with(SEALED_PREFIX) {
        return Ok(Revealed::Plain(text.to_owned()));
    }
    let subject = sealed_subject(text).unwrap_or_default().to_owned();
    let Some(key) = key else {
        return Ok(Revealed::Erased);
    };
    parts(text)
        .and_then(|p| key.open(p.subject, &p.nonce, &p.ciphertext))
        .map(Revealed::Plain)
        .ok_or(SubjectKeyError::Open { subject })
}

/// The keyed blind index of a (normalized) email: equal addresses give equal
/// indexes, and without the key the index says nothing about the address.
#[derive(Clone)]
pub struct BlindIndex([u8; KEY_BYTES]);

impl std::fmt::Debug for BlindIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BlindIndex(..)")
    }
}

impl BlindIndex {
    /// From 64 hexadecimal characters; `None` otherwise.
    pub fn parse(hex_key: &str) -> Option<Self> {
        let mut key = [0u8; KEY_BYTES];
        hex::decode_to_slice(hex_key.trim(), &mut key).ok()?;
        Some(BlindIndex(key))
    }

    /// The index of `normalized`, as hex.
    pub fn of(&self, normalized: &str) -> String {
        // HMAC takes a key of any length; 32 bytes never fail.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.0) else {
            unreachable!("HMAC accepts every key length")
        };
        mac.update(normalized.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }
}

/// The `subject_keys` table (migration 0013): one wrapped key per subject.
#[derive(Debug, Clone)]
pub struct SubjectKeys {
    db: Db,
    wrap: FieldCipher,
}

impl SubjectKeys {
    pub fn new(db: Db, wrap: FieldCipher) -> Self {
        Self { db, wrap }
    }

    /// Stores a fresh key for `subject` and returns it. A subject that has
    /// one keeps it (the insert is ignored), and that key is returned.
    pub async fn create(&self, subject: &str, now: &str) -> Result<DataKey, SubjectKeyError> {
        let key = DataKey::generate();
        let wrapped = self.wrap.encrypt(&hex::encode(key.0)).to_string();
        with_pool!(self.db.writer(), pool => {
            sqlx::query(
                "INSERT INTO subject_keys (subject, wrapped_key, created_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (subject) DO NOTHING",
            )
            .bind(subject)
            .bind(&wrapped)
            .bind(now)
            .execute(pool)
            .await?;
        });
        match self.get(subject).await? {
            Some(key) => Ok(key),
            None => Err(SubjectKeyError::Vanished {
                subject: subject.to_owned(),
            }),
        }
    }

    /// The key of `subject`; `None` once erased (or never made).
    pub async fn get(&self, subject: &str) -> Result<Option<DataKey>, SubjectKeyError> {
        let wrapped: Option<String> = with_pool!(self.db.reader(), pool => {
            sqlx::query_scalar("SELECT wrapped_key FROM subject_keys WHERE subject = $1")
                .bind(subject)
                .fetch_optional(pool)
                .await?
        });
        wrapped.map(|w| self.unwrap(subject, &w)).transpose()
    }

    /// The keys of those of `subjects` that still have one, a few hundred
    /// subjects per statement.
    pub async fn get_many(
        &self,
        subjects: &[&str],
    ) -> Result<HashMap<String, DataKey>, SubjectKeyError> {
        let mut wanted: Vec<&str> = subjects.to_vec();
        wanted.sort_unstable();
        wanted.dedup();
        let mut keys = HashMap::new();
        for chunk in wanted.chunks(BULK_SUBJECTS) {
            let placeholders: Vec<String> = (1..=chunk.len()).map(|n| format!("${n}")).collect();
            let sql = format!(
                "SELECT subject, wrapped_key FROM subject_keys WHERE subject IN ({})",
                placeholders.join(", ")
            );
            let rows: Vec<(String, String)> = with_pool!(self.db.reader(), pool => {
                let mut query = sqlx::query_as(&sql);
                for subject in chunk {
                    query = query.bind(*subject);
                }
                query.fetch_all(pool).await?
            });
            for (subject, wrapped) in rows {
                let key = self.unwrap(&subject, &wrapped)?;
                keys.insert(subject, key);
            }
        }
        Ok(keys)
    }

    /// Destroys the key of `subject`: whether there was one.
    pub async fn destroy(&self, subject: &str) -> Result<bool, SubjectKeyError> {
        let done = with_pool!(self.db.writer(), pool => {
            sqlx::query("DELETE FROM subject_keys WHERE subject = $1")
                .bind(subject)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(done > 0)
    }

    /// Reads one personal field of events or read models.
    pub async fn reveal(&self, text: &str) -> Result<Revealed, SubjectKeyError> {
        let key = match sealed_subject(text) {
            Some(subject) => self.get(subject).await?,
            None => None,
        };
        reveal(text, key.as_ref())
    }

    fn unwrap(&self, subject: &str, wrapped: &str) -> Result<DataKey, SubjectKeyError> {
        let failed = |source| SubjectKeyError::Unwrap {
            subject: subject.to_owned(),
            source,
        };
        let envelope: Value =
            serde_json::from_str(wrapped).map_err(|_| failed(FieldError::NotAField))?;
        let text = self.wrap.decrypt(&envelope).map_err(failed)?;
        let mut key = [0u8; KEY_BYTES];
        hex::decode_to_slice(text, &mut key).map_err(|_| failed(FieldError::Malformed("key")))?;
        Ok(DataKey(key))
    }
}

#[cfg(test)]
mod tests;
