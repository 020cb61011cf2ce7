//! Argon2id password hashing (the policy is `agon_aggregates::account::Password`). Hashing runs on the blocking pool
//! because one Argon2 call burns tens of milliseconds of CPU, and a login for
//! an unknown account is checked against a dummy hash so its timing does not
//! reveal which emails are registered.

use std::sync::Arc;

use argon2::Argon2;
use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher as _, PasswordVerifier as _};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum PasswordError {
    #[error("cannot hash password: {0}")]
    Hash(String),
    #[error("password hashing task did not complete: {0}")]
    Task(String),
}

/// Argon2id with the crate's default parameters; PHC strings carry their own
/// parameters, so hashes made with older settings keep verifying.
#[derive(Clone)]
pub struct PasswordHasher {
    /// Hash of a random password nobody knows, verified against when there is
    /// no real hash so that both paths do the same work.
    dummy_phc: Arc<str>,
}

impl std::fmt::Debug for PasswordHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PasswordHasher(Argon2id)")
    }
}

impl Default for PasswordHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl PasswordHasher {
    /// Computes the dummy hash, which takes one Argon2 run: build this once at
    /// start-up, not per request.
    ///
    /// # Panics
    ///
    /// When the operating system cannot supply random bytes for the dummy
    /// password or its salt; no password could be hashed on such a machine.
    pub fn new() -> Self {
        let mut unknowable = [0u8; 32];
        super::secrets::fill_random(&mut unknowable);
        match hash_blocking(&unknowable) {
            Ok(phc) => Self {
                dummy_phc: phc.into(),
            },
            Err(e) => panic!("cannot prepare the timing-equalising password hash: {e}"),
        }
    }

    /// A PHC string (`$argon2id$v=19$...`) with a fresh random salt.
    pub async fn hash(&self, password: String) -> Result<String, PasswordError> {
        tokio::task::spawn_blocking(move || hash_blocking(password.as_bytes()))
            .await
            .map_err(|e| PasswordError::Task(e.to_string()))?
    }

    /// Whether `password` matches `phc`. With no hash (unknown account) or an
    /// unreadable one, the dummy hash is verified instead and the answer is
    /// false, so the caller's response time does not depend on which it was.
    pub async fn verify(&self, password: String, phc: Option<String>) -> bool {
        let dummy = Arc::clone(&self.dummy_phc);
        tokio::task::spawn_blocking(move || {
            let argon2 = Argon2::default();
            if let Some(Ok(hash)) = phc.as_deref().map(PasswordHash::new) {
                return argon2.verify_password(password.as_bytes(), &hash).is_ok();
            }
            if let Ok(hash) = PasswordHash::new(&dummy) {
                let _ = argon2.verify_password(password.as_bytes(), &hash);
            }
            false
        })
        .await
        .unwrap_or(false)
    }
}

fn hash_blocking(password: &[u8]) -> Result<String, PasswordError> {
    Argon2::default()
        .hash_password(password)
        .map(|hash| hash.to_string())
        .map_err(|e| PasswordError::Hash(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hash_verifies_only_its_password() -> Result<(), PasswordError> {
        let hasher = PasswordHasher::new();
        let phc = hasher.hash("correct horse".to_owned()).await?;
        assert!(phc.starts_with("$argon2id$"), "{phc}");
        assert!(
            hasher
                .verify("correct horse".to_owned(), Some(phc.clone()))
                .await
        );
        assert!(!hasher.verify("correct horsf".to_owned(), Some(phc)).await);
        Ok(())
    }

    #[tokio::test]
    async fn each_hash_gets_a_fresh_salt() -> Result<(), PasswordError> {
        let hasher = PasswordHasher::new();
        let first = hasher.hash("same password".to_owned()).await?;
        let second = hasher.hash("same password".to_owned()).await?;
        assert_ne!(first, second);
        assert!(hasher.verify("same password".to_owned(), Some(first)).await);
        assert!(
            hasher
                .verify("same password".to_owned(), Some(second))
                .await
        );
        Ok(())
    }

    #[tokio::test]
    async fn a_missing_or_unreadable_hash_never_verifies() {
        let hasher = PasswordHasher::new();
        assert!(!hasher.verify("anything".to_owned(), None).await);
        assert!(!hasher.verify(String::new(), None).await);
        for garbage in ["", "not a hash", "$argon2id$v=19$m=1", "$pbkdf2$x$y"] {
            assert!(
                !hasher
                    .verify("anything".to_owned(), Some(garbage.to_owned()))
                    .await,
                "{garbage}"
            );
        }
    }

    #[test]
    fn debug_does_not_show_the_dummy_hash() {
        let hasher = PasswordHasher::new();
        assert!(!format!("{hasher:?}").contains("argon2id$"));
    }
}
