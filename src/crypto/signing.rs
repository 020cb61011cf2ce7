//! The ed25519 key that signs seals: from `SERVICE_SIGNING_KEY`, or generated
//! once into the data directory (file mode 0600) and reused after that.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use thiserror::Error;

/// File name of the generated key inside the data directory.
pub const KEY_FILE: &str = "seal-signing.key";

#[derive(Debug, Error)]
pub enum KeyError {
    #[error("SERVICE_SIGNING_KEY must be 64 hexadecimal characters (a 32-byte ed25519 seed)")]
    BadConfiguredKey,
    #[error("signing key file {path} must hold 64 hexadecimal characters")]
    BadKeyFile { path: String },
    #[error("cannot read or write signing key file {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot draw random bytes for a new signing key: {0}")]
    Random(String),
}

/// The seal-signing key. Its `Debug` form never shows the secret.
#[derive(Clone)]
pub struct SealKey(SigningKey);

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SealKey(public {})", self.public_hex())
    }
}

impl SealKey {
    /// The configured key if any, else the one in `data_dir`, else a new one saved there.
    pub fn load_or_create(configured: Option<&str>, data_dir: &Path) -> Result<Self, KeyError> {
        if let Some(hex_seed) = configured {
            return parse_seed(hex_seed)
                .map(Self)
                .ok_or(KeyError::BadConfiguredKey);
        }
        let path = data_dir.join(KEY_FILE);
        let text = key_file(&path)?;
        parse_seed(&text)
            .map(Self)
            .ok_or_else(|| KeyError::BadKeyFile {
                path: display(&path),
            })
    }

    pub fn public_key(&self) -> [u8; 32] {
        self.0.verifying_key().to_bytes()
    }

    pub fn public_hex(&self) -> String {
        hex::encode(self.public_key())
    }

    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.0.sign(message).to_bytes()
    }
}

/// The 32-byte hex key stored at `path`, created (mode 0600) when absent.
pub fn key_file(path: &Path) -> Result<String, KeyError> {
    let io = |source| KeyError::Io {
        path: display(path),
        source,
    };
    match std::fs::read_to_string(path) {
        Ok(text) => return Ok(text.trim().to_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(io(source)),
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| KeyError::Random(e.to_string()))?;
    let text = hex::encode(seed);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io)?;
    file.write_all(text.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)?;
    Ok(text)
}

/// Checks an ed25519 signature; false for a malformed key or signature.
pub fn verify_signature(public_key: &[u8], message: &[u8], signature: &[u8]) -> bool {
    let (Ok(key), Ok(signature)) = (
        <[u8; 32]>::try_from(public_key),
        <[u8; 64]>::try_from(signature),
    ) else {
        return false;
    };
    VerifyingKey::from_bytes(&key).is_ok_and(|key| {
        key.verify(message, &Signature::from_bytes(&signature))
            .is_ok()
    })
}

fn parse_seed(text: &str) -> Option<SigningKey> {
    let bytes = hex::decode(text.trim()).ok()?;
    let seed: [u8; 32] = bytes.try_into().ok()?;
    Some(SigningKey::from_bytes(&seed))
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_generated_key_is_saved_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let first = SealKey::load_or_create(None, dir.path()).unwrap();
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let second = SealKey::load_or_create(None, dir.path()).unwrap();
        assert_eq!(first.public_key(), second.public_key());
    }

    #[test]
    fn a_configured_key_wins_and_a_bad_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let seed = "11".repeat(32);
        let key = SealKey::load_or_create(Some(&seed), dir.path()).unwrap();
        assert!(!dir.path().join(KEY_FILE).exists());
        let again = SealKey::load_or_create(Some(&seed), dir.path()).unwrap();
        assert_eq!(key.public_key(), again.public_key());
        assert!(matches!(
            SealKey::load_or_create(Some("xyz"), dir.path()),
            Err(KeyError::BadConfiguredKey)
        ));
    }

    #[test]
    fn signatures_verify_only_for_the_signed_message() {
        let dir = tempfile::tempdir().unwrap();
        let key = SealKey::load_or_create(None, dir.path()).unwrap();
        let signature = key.sign(b"seal");
        assert!(verify_signature(&key.public_key(), b"seal", &signature));
        assert!(!verify_signature(&key.public_key(), b"seal!", &signature));
        assert!(!verify_signature(
            &key.public_key(),
            b"seal",
            &signature[..10]
        ));
    }
}
