//! Key material and cryptographic helpers used by the service: seal
//! signing, access tokens, passwords, TOTP, random credentials and
//! field-level encryption, and per-subject keys for erasure.

pub mod fields;
pub mod jwt;
pub mod password;
pub mod secrets;
pub mod signing;
pub mod subject_keys;
pub mod totp;
