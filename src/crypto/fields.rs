//! Field-level encryption for personal data kept in events and projections.
//! Events are never rewritten, so keys rotate by prepending: the first key
//! encrypts new values and every listed key still decrypts old ones, and each
//! value names the key that sealed it.

use std::time::Instant;

use aes_gcm::aead::{Aead, KeyInit, Nonce};
use aes_gcm::{Aes256Gcm, Key};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use thiserror::Error;

pub const ALGORITHM: &str = "AES-256-GCM";
const KEY_BYTES: usize = 32;
const NONCE_BYTES: usize = 12;
const TAG_BYTES: usize = 16;
/// Short enough to keep stored values small, long enough that two configured
/// keys sharing an id is vanishingly unlikely (and harmless: all are tried).
const KEY_ID_HEX_CHARS: usize = 8;

const OPERATIONS: &str = "service_encryption_operations_total";
const LATENCY: &str = "service_encryption_operation_latency_seconds";
const ERRORS: &str = "service_encryption_errors_total";

/// Messages name the position of a bad key, never its text, because the
/// text is the secret.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyError {
    #[error("field encryption key #{position} is empty")]
    Empty { position: usize },
    #[error(
        "field encryption key #{position} must be 64 hexadecimal characters (32 bytes), not {length}"
    )]
    WrongLength { position: usize, length: usize },
    #[error("field encryption key #{position} is not hexadecimal")]
    NotHex { position: usize },
}

/// Messages never include the plaintext, the ciphertext or a key.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FieldError {
    #[error("value is neither a plaintext string nor an encrypted field")]
    NotAField,
    /// Names the part (nonce, ciphertext, plaintext) that is missing or malformed.
    #[error("encrypted field has a missing or malformed {0}")]
    Malformed(&'static str),
    #[error("encrypted field uses an unsupported algorithm")]
    UnsupportedAlgorithm,
    #[error("no configured key decrypts this field (unknown key or altered data)")]
    Undecryptable,
}

#[derive(Clone)]
pub struct FieldCipher {
    keys: Vec<([u8; KEY_BYTES], String)>,
}

impl std::fmt::Debug for FieldCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FieldCipher")
            .field("key_ids", &self.key_ids().collect::<Vec<_>>())
            .finish()
    }
}

impl FieldCipher {
    /// Reads a comma-separated list of hex keys, newest first.
    pub fn parse(value: &str) -> Result<FieldCipher, KeyError> {
        let keys = value
            .split(',')
            .enumerate()
            .map(|(index, item)| parse_key(index + 1, item.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(FieldCipher { keys })
    }

    /// Ids of the configured keys, the encrypting one first.
    pub fn key_ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|(_, id)| id.as_str())
    }

    /// Seals `plaintext` under the first key with a fresh random nonce.
    ///
    /// # Panics
    ///
    /// When the operating system cannot supply random bytes for the nonce,
    /// or the plaintext exceeds AES-GCM's limit of about 64 GiB.
    pub fn encrypt(&self, plaintext: &str) -> Value {
        let started = Instant::now();
        // `parse` never yields an empty list, the only way to build a cipher.
        let Some((key, kid)) = self.keys.first() else {
            panic!("a FieldCipher always holds at least one key");
        };
        let mut nonce = [0u8; NONCE_BYTES];
        super::secrets::fill_random(&mut nonce);
        let sealed =
            match cipher(key).encrypt(&Nonce::<Aes256Gcm>::from(nonce), plaintext.as_bytes()) {
                Ok(sealed) => sealed,
                Err(_) => {
                    metrics::counter!(ERRORS, "operation" => "encrypt").increment(1);
                    panic!("field plaintext is too long for AES-GCM");
                }
            };
        metrics::counter!(OPERATIONS, "operation" => "encrypt").increment(1);
        metrics::histogram!(LATENCY, "operation" => "encrypt")
            .record(started.elapsed().as_secs_f64());
        json!({
            "_encrypted": true,
            "alg": ALGORITHM,
            "kid": kid,
            "nonce": STANDARD.encode(nonce),
            "ciphertext": STANDARD.encode(sealed),
        })
    }

    /// The plaintext of an encrypted field. A bare JSON string is returned as
    /// it is: it was stored before encryption was turned on.
    pub fn decrypt(&self, value: &Value) -> Result<String, FieldError> {
        if let Value::String(plain) = value {
            return Ok(plain.clone());
        }
        let started = Instant::now();
        let result = self.open(value);
        metrics::counter!(OPERATIONS, "operation" => "decrypt").increment(1);
        metrics::histogram!(LATENCY, "operation" => "decrypt")
            .record(started.elapsed().as_secs_f64());
        if result.is_err() {
            metrics::counter!(ERRORS, "operation" => "decrypt").increment(1);
        }
        result
    }

    fn open(&self, value: &Value) -> Result<String, FieldError> {
        if !is_encrypted(value) {
            return Err(FieldError::NotAField);
        }
        if value.get("alg").and_then(Value::as_str) != Some(ALGORITHM) {
            return Err(FieldError::UnsupportedAlgorithm);
        }
        let nonce: [u8; NONCE_BYTES] = decode_base64(value, "nonce")?
            .try_into()
            .map_err(|_| FieldError::Malformed("nonce"))?;
        let sealed = decode_base64(value, "ciphertext")?;
        if sealed.len() < TAG_BYTES {
            return Err(FieldError::Malformed("ciphertext"));
        }
        let kid = value.get("kid").and_then(Value::as_str);
        // The named key first; the others only matter if the id is missing,
        // unknown (a key id is not a promise) or shared by two keys.
        let (named, others): (Vec<_>, Vec<_>) = self
            .keys
            .iter()
            .partition(|(_, id)| Some(id.as_str()) == kid);
        let nonce = Nonce::<Aes256Gcm>::from(nonce);
        let plain = named
            .into_iter()
            .chain(others)
            .find_map(|(key, _)| cipher(key).decrypt(&nonce, sealed.as_slice()).ok())
            .ok_or(FieldError::Undecryptable)?;
        String::from_utf8(plain).map_err(|_| FieldError::Malformed("plaintext"))
    }
}

/// A fresh key in the form [`FieldCipher::parse`] reads.
///
/// # Panics
///
/// When the operating system cannot supply random bytes.
pub fn generate_key_hex() -> String {
    let mut key = [0u8; KEY_BYTES];
    super::secrets::fill_random(&mut key);
    hex::encode(key)
}

pub fn is_encrypted(value: &Value) -> bool {
    value.get("_encrypted") == Some(&Value::Bool(true))
}

fn parse_key(position: usize, text: &str) -> Result<([u8; KEY_BYTES], String), KeyError> {
    if text.is_empty() {
        return Err(KeyError::Empty { position });
    }
    let length = text.chars().count();
    if length != 2 * KEY_BYTES {
        return Err(KeyError::WrongLength { position, length });
    }
    let mut key = [0u8; KEY_BYTES];
    hex::decode_to_slice(text, &mut key).map_err(|_| KeyError::NotHex { position })?;
    let mut id = hex::encode(Sha256::digest(key));
    id.truncate(KEY_ID_HEX_CHARS);
    Ok((key, id))
}

fn cipher(key: &[u8; KEY_BYTES]) -> Aes256Gcm {
    Aes256Gcm::new(&Key::<Aes256Gcm>::from(*key))
}

fn decode_base64(value: &Value, field: &'static str) -> Result<Vec<u8>, FieldError> {
    value
        .get(field)
        .and_then(Value::as_str)
        .and_then(|text| STANDARD.decode(text).ok())
        .ok_or(FieldError::Malformed(field))
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    const KEY_A: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    const KEY_B: &str = "1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100";

    #[test]
    fn a_value_round_trips_and_hides_its_plaintext() -> TestResult {
        let cipher = FieldCipher::parse(KEY_A)?;
        for plaintext in ["alice@example.com", "", "ünïcødé ✓"] {
            let sealed = cipher.encrypt(plaintext);
            assert!(is_encrypted(&sealed));
            assert_eq!(sealed["alg"], ALGORITHM);
            assert_eq!(sealed["kid"].as_str().map(str::len), Some(8));
            if !plaintext.is_empty() {
                assert!(!sealed.to_string().contains(plaintext));
            }
            assert_eq!(cipher.decrypt(&sealed)?, plaintext);
        }
        Ok(())
    }

    #[test]
    fn each_encryption_uses_a_fresh_nonce() -> TestResult {
        let cipher = FieldCipher::parse(KEY_A)?;
        let first = cipher.encrypt("same");
        let second = cipher.encrypt("same");
        assert_ne!(first["nonce"], second["nonce"]);
        assert_ne!(first["ciphertext"], second["ciphertext"]);
        let nonce = STANDARD.decode(first["nonce"].as_str().ok_or("no nonce")?)?;
        assert_eq!(nonce.len(), NONCE_BYTES);
        Ok(())
    }

    #[test]
    fn the_key_id_is_the_start_of_the_keys_sha256() -> TestResult {
        let cipher = FieldCipher::parse(KEY_A)?;
        let expected = &hex::encode(Sha256::digest(hex::decode(KEY_A)?))[..8];
        assert_eq!(cipher.key_ids().collect::<Vec<_>>(), vec![expected]);
        assert_eq!(cipher.encrypt("x")["kid"], expected);
        Ok(())
    }

    #[test]
    fn rotation_keeps_old_values_readable_and_seals_with_the_new_key() -> TestResult {
        let old = FieldCipher::parse(KEY_A)?;
        let sealed_with_a = old.encrypt("before rotation");
        let rotated = FieldCipher::parse(&format!(" {KEY_B} , {KEY_A} "))?;
        assert_eq!(rotated.decrypt(&sealed_with_a)?, "before rotation");

        let sealed_with_b = rotated.encrypt("after rotation");
        let b_id = FieldCipher::parse(KEY_B)?.key_ids().collect::<String>();
        assert_eq!(sealed_with_b["kid"], b_id.as_str());
        assert_eq!(rotated.decrypt(&sealed_with_b)?, "after rotation");
        assert_eq!(old.decrypt(&sealed_with_b), Err(FieldError::Undecryptable));
        Ok(())
    }

    #[test]
    fn a_missing_or_wrong_key_id_still_finds_the_key() -> TestResult {
        let cipher = FieldCipher::parse(&format!("{KEY_B},{KEY_A}"))?;
        let mut sealed = FieldCipher::parse(KEY_A)?.encrypt("x");
        sealed["kid"] = Value::from("deadbeef");
        assert_eq!(cipher.decrypt(&sealed)?, "x");
        if let Some(object) = sealed.as_object_mut() {
            object.remove("kid");
        }
        assert_eq!(cipher.decrypt(&sealed)?, "x");
        Ok(())
    }

    #[test]
    fn plaintext_strings_pass_through() -> TestResult {
        let cipher = FieldCipher::parse(KEY_A)?;
        let legacy = Value::from("stored before encryption");
        assert!(!is_encrypted(&legacy));
        assert_eq!(cipher.decrypt(&legacy)?, "stored before encryption");
        Ok(())
    }

    #[test]
    fn other_values_are_refused() -> TestResult {
        let cipher = FieldCipher::parse(KEY_A)?;
        for value in [
            Value::Null,
            Value::from(5),
            json!(["a"]),
            json!({ "ciphertext": "AAAA" }),
            json!({ "_encrypted": "true" }),
            json!({ "_encrypted": false, "alg": ALGORITHM }),
        ] {
            assert_eq!(
                cipher.decrypt(&value),
                Err(FieldError::NotAField),
                "{value}"
            );
        }
        let mut sealed = cipher.encrypt("x");
        sealed["alg"] = Value::from("AES-128-CBC");
        assert_eq!(
            cipher.decrypt(&sealed),
            Err(FieldError::UnsupportedAlgorithm)
        );
        let mut sealed = cipher.encrypt("x");
        sealed["nonce"] = Value::from(STANDARD.encode([0u8; 8]));
        assert!(matches!(
            cipher.decrypt(&sealed),
            Err(FieldError::Malformed(_))
        ));
        let mut sealed = cipher.encrypt("x");
        sealed["ciphertext"] = Value::from("not base64!");
        assert!(matches!(
            cipher.decrypt(&sealed),
            Err(FieldError::Malformed(_))
        ));
        Ok(())
    }

    #[test]
    fn tampered_ciphertext_fails() -> TestResult {
        let cipher = FieldCipher::parse(KEY_A)?;
        let mut sealed = cipher.encrypt("pay 10 to bob");
        let mut bytes = STANDARD.decode(sealed["ciphertext"].as_str().ok_or("no ciphertext")?)?;
        bytes[0] ^= 1;
        sealed["ciphertext"] = Value::from(STANDARD.encode(&bytes));
        assert_eq!(cipher.decrypt(&sealed), Err(FieldError::Undecryptable));

        let mut sealed = cipher.encrypt("pay 10 to bob");
        let mut nonce = STANDARD.decode(sealed["nonce"].as_str().ok_or("no nonce")?)?;
        nonce[0] ^= 1;
        sealed["nonce"] = Value::from(STANDARD.encode(&nonce));
        assert_eq!(cipher.decrypt(&sealed), Err(FieldError::Undecryptable));
        Ok(())
    }

    #[test]
    fn a_value_sealed_under_an_unknown_key_fails() -> TestResult {
        let sealed = FieldCipher::parse(KEY_A)?.encrypt("secret");
        let other = FieldCipher::parse(&generate_key_hex())?;
        let error = other.decrypt(&sealed).err().ok_or("decrypted")?;
        assert_eq!(error, FieldError::Undecryptable);
        assert!(!error.to_string().contains("secret"));
        Ok(())
    }

    #[test]
    fn bad_key_lists_are_refused_without_echoing_keys() {
        let short = &KEY_A[..62];
        let non_hex = format!("{}zz", &KEY_A[..62]);
        let cases = [
            (String::new(), KeyError::Empty { position: 1 }),
            (format!("{KEY_A},"), KeyError::Empty { position: 2 }),
            (format!("{KEY_A},,{KEY_B}"), KeyError::Empty { position: 2 }),
            (
                format!("{KEY_A}, ,{KEY_B}"),
                KeyError::Empty { position: 2 },
            ),
            (
                short.to_owned(),
                KeyError::WrongLength {
                    position: 1,
                    length: 62,
                },
            ),
            (
                format!("{KEY_A}00"),
                KeyError::WrongLength {
                    position: 1,
                    length: 66,
                },
            ),
            (non_hex.clone(), KeyError::NotHex { position: 1 }),
            (
                format!("{KEY_A},{}", "é".repeat(64)),
                KeyError::NotHex { position: 2 },
            ),
        ];
        for (input, expected) in cases {
            let error = FieldCipher::parse(&input).err();
            assert_eq!(error.as_ref(), Some(&expected), "{input}");
            let message = expected.to_string();
            assert!(!message.contains(short) && !message.contains(&non_hex[60..]));
        }
    }

    #[test]
    fn generated_keys_parse_and_differ() -> TestResult {
        let first = generate_key_hex();
        let second = generate_key_hex();
        assert_eq!(first.len(), 64);
        assert_ne!(first, second);
        FieldCipher::parse(&format!("{first},{second}"))?;
        Ok(())
    }

    #[test]
    fn debug_shows_key_ids_only() -> TestResult {
        let cipher = FieldCipher::parse(&format!("{KEY_A},{KEY_B}"))?;
        let shown = format!("{cipher:?}");
        assert!(!shown.contains(KEY_A) && !shown.contains(KEY_B));
        for id in cipher.key_ids() {
            assert!(shown.contains(id));
        }
        Ok(())
    }
}
