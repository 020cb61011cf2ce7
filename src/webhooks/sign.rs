//! Signing per the Standard Webhooks convention, so that receivers can use
//! its libraries: a secret `whsec_<base64 of 24 random bytes>`, and each
//! message signed as `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`
//! keyed by the secret's decoded bytes.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::crypto::secrets::fill_random;

/// What every secret starts with.
pub const SECRET_PREFIX: &str = "whsec_";
/// Random bytes in a secret the service draws.
const SECRET_BYTES: usize = 24;
/// The key lengths Standard Webhooks allows for a secret a client brings.
const KEY_BYTES: std::ops::RangeInclusive<usize> = 24..=64;

/// The JSON Schema `pattern` of a secret a client brings: exactly the
/// texts [`secret_key`] takes (canonical, padded base64 of 24 to 64 bytes:
/// 8 to 21 groups of four characters and the rest of a last group).
pub const SECRET_PATTERN: &str = concat!(
    "^whsec_(?:(?:[A-Za-z0-9+/]{4}){8,20}",
    "(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?",
    "|(?:[A-Za-z0-9+/]{4}){21}(?:[A-Za-z0-9+/][AQgw]==)?)$"
);

/// A fresh secret.
pub fn new_secret() -> String {
    let mut key = [0u8; SECRET_BYTES];
    fill_random(&mut key);
    format!("{SECRET_PREFIX}{}", STANDARD.encode(key))
}

/// The key bytes of `secret`, when it has the `whsec_` form and a key of
/// 24 to 64 bytes.
pub fn secret_key(secret: &str) -> Option<Vec<u8>> {
    let key = STANDARD.decode(secret.strip_prefix(SECRET_PREFIX)?).ok()?;
    KEY_BYTES.contains(&key.len()).then_some(key)
}

/// The `webhook-signature` value of one message.
pub fn signature(key: &[u8], id: &str, timestamp: i64, body: &str) -> String {
    // HMAC takes keys of any length.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        unreachable!("HMAC accepts every key length")
    };
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body.as_bytes());
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification's test vectors.
    #[test]
    fn signs_the_standard_webhooks_example() {
        let key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = r#"{"test": 2432232314}"#;
        assert_eq!(
            signature(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn new_secrets_have_the_standard_form() {
        let secret = new_secret();
        assert_eq!(secret_key(&secret).map(|k| k.len()), Some(SECRET_BYTES));
        assert_ne!(secret, new_secret());
        assert_eq!(secret_key("whsec_c2hvcnQ="), None);
        assert_eq!(secret_key("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), None);
    }

    #[test]
    fn the_pattern_admits_exactly_the_secrets_taken() {
        let pattern = regex::Regex::new(SECRET_PATTERN).unwrap();
        for bytes in 0..=70usize {
            let key: Vec<u8> = (0..bytes).map(|i| (i * 37 + 11) as u8).collect();
            let good = format!("{SECRET_PREFIX}{}", STANDARD.encode(&key));
            let unpadded = good.trim_end_matches('=').to_owned();
            // A last character with bits the padding drops set.
            let mut loose = good.clone().into_bytes();
            if let Some(at) = loose.iter().rposition(|b| *b != b'=')
                && good.ends_with('=')
            {
                loose[at] = if loose[at] == b'/' { b'B' } else { b'/' };
            }
            let loose = String::from_utf8(loose).unwrap();
            for text in [good, unpadded, loose, format!("{SECRET_PREFIX}{bytes}!")] {
                assert_eq!(
                    pattern.is_match(&text),
                    secret_key(&text).is_some(),
                    "{bytes} bytes: {text}"
                );
            }
        }
    }
}
