//! Random credentials (opaque tokens, MFA backup codes, API keys) and the
//! digest and comparison that go with them, so every caller draws from the
//! operating system's generator and compares secrets without early exits.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// Every API key starts with this, so a leaked key is recognisable by secret scanners.
pub const API_KEY_PREFIX: &str = "agon_";

/// I and O are left out so a code read aloud or copied by hand cannot be
/// mistaken for 1 or 0; 32 symbols give 5 bits per character.
const BACKUP_ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
const BACKUP_HALF_CHARS: usize = 5;
const API_KEY_ID_CHARS: usize = 16;
const API_KEY_SECRET_BYTES: usize = 32;
/// Unpadded base64 of 32 bytes.
const API_KEY_SECRET_CHARS: usize = 43;

/// Fills `buf` from the operating system's generator.
///
/// # Panics
///
/// When the operating system cannot supply random bytes. Carrying on would
/// mean handing out guessable credentials, and nothing else in the service
/// can work on such a machine either, so failing loudly is the safe choice.
pub fn fill_random(buf: &mut [u8]) {
    if let Err(e) = getrandom::fill(buf) {
        panic!("the operating system's random number generator failed: {e}");
    }
}

/// `bytes` random bytes as unpadded URL-safe base64, fit for URLs and headers.
pub fn random_token(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    fill_random(&mut buf);
    URL_SAFE_NO_PAD.encode(buf)
}

/// Tokens are stored only as this digest, so a database leak does not hand
/// out working credentials.
pub fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Compares two secrets in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // Keeps the optimiser from turning the fold into a short-circuiting loop.
    std::hint::black_box(difference) == 0
}

/// `count` one-time backup codes shaped `XXXXX-XXXXX` (50 bits each).
pub fn backup_codes(count: usize) -> Vec<String> {
    let mut symbols = SymbolSource::new(BACKUP_ALPHABET);
    (0..count)
        .map(|_| {
            let mut code = String::with_capacity(2 * BACKUP_HALF_CHARS + 1);
            for position in 0..2 * BACKUP_HALF_CHARS {
                if position == BACKUP_HALF_CHARS {
                    code.push('-');
                }
                code.push(symbols.next_symbol());
            }
            code
        })
        .collect()
}

/// Brings a backup code as a person typed it to the stored shape, so case,
/// spaces and a missing or misplaced dash do not make a valid code fail.
pub fn normalize_backup_code(input: &str) -> String {
    let chars: Vec<char> = input
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .flat_map(char::to_uppercase)
        .collect();
    let mut out = String::with_capacity(chars.len() + 1);
    for (position, c) in chars.iter().enumerate() {
        if chars.len() == 2 * BACKUP_HALF_CHARS && position == BACKUP_HALF_CHARS {
            out.push('-');
        }
        out.push(*c);
    }
    out
}

/// The two halves of an API key: the id is stored in clear to find the key,
/// the secret only as a digest.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKeyParts {
    pub key_id: String,
    pub secret: String,
}

impl std::fmt::Debug for ApiKeyParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKeyParts")
            .field("key_id", &self.key_id)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// A new API key `agon_<16 hex>_<43 base64url>` and its parts.
pub fn new_api_key() -> (String, ApiKeyParts) {
    let mut id = [0u8; API_KEY_ID_CHARS / 2];
    fill_random(&mut id);
    let parts = ApiKeyParts {
        key_id: hex::encode(id),
        secret: random_token(API_KEY_SECRET_BYTES),
    };
    let full = format!("{API_KEY_PREFIX}{}_{}", parts.key_id, parts.secret);
    (full, parts)
}

/// Splits a presented API key; anything not shaped exactly like one from
/// [`new_api_key`] is refused before any lookup happens.
pub fn parse_api_key(text: &str) -> Option<ApiKeyParts> {
    let rest = text.strip_prefix(API_KEY_PREFIX)?;
    // The secret may itself contain '_', so split by position, not by separator.
    if rest.len() != API_KEY_ID_CHARS + 1 + API_KEY_SECRET_CHARS {
        return None;
    }
    let (key_id, rest) = rest.split_at_checked(API_KEY_ID_CHARS)?;
    let secret = rest.strip_prefix('_')?;
    let lower_hex = |c: u8| c.is_ascii_digit() || (b'a'..=b'f').contains(&c);
    if !key_id.bytes().all(lower_hex) {
        return None;
    }
    // Strict decoding also refuses non-zero trailing bits, so each key has one spelling.
    let decoded = URL_SAFE_NO_PAD.decode(secret).ok()?;
    if decoded.len() != API_KEY_SECRET_BYTES {
        return None;
    }
    Some(ApiKeyParts {
        key_id: key_id.to_owned(),
        secret: secret.to_owned(),
    })
}

/// Draws symbols uniformly from an alphabet, fetching random bytes in batches.
struct SymbolSource {
    alphabet: &'static [u8],
    /// Bytes at or above this are rejected so every symbol is equally likely
    /// even if the alphabet's size stops dividing 256.
    limit: usize,
    buf: [u8; 64],
    next: usize,
}

impl SymbolSource {
    fn new(alphabet: &'static [u8]) -> Self {
        Self {
            alphabet,
            limit: 256 - 256 % alphabet.len(),
            buf: [0; 64],
            next: 64,
        }
    }

    fn next_symbol(&mut self) -> char {
        loop {
            if self.next == self.buf.len() {
                fill_random(&mut self.buf);
                self.next = 0;
            }
            let byte = usize::from(self.buf[self.next]);
            self.next += 1;
            if byte < self.limit {
                return char::from(self.alphabet[byte % self.alphabet.len()]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn random_tokens_have_the_expected_length_and_differ() {
        let a = random_token(32);
        let b = random_token(32);
        assert_eq!(a.len(), 43);
        assert_ne!(a, b);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        );
        assert_eq!(random_token(0), "");
    }

    #[test]
    fn sha256_matches_the_known_digest() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn constant_time_eq_compares_content_and_length() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret!"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn backup_codes_are_well_formed_and_distinct() {
        let codes = backup_codes(50);
        assert_eq!(codes.len(), 50);
        for code in &codes {
            assert_eq!(code.len(), 11, "{code}");
            assert_eq!(code.as_bytes()[5], b'-');
            assert!(
                code.bytes()
                    .enumerate()
                    .all(|(i, c)| i == 5 || BACKUP_ALPHABET.contains(&c))
            );
            assert_eq!(&normalize_backup_code(code), code);
        }
        let distinct: HashSet<_> = codes.iter().collect();
        assert_eq!(distinct.len(), codes.len());
        assert!(backup_codes(0).is_empty());
    }

    #[test]
    fn every_backup_symbol_turns_up() {
        let seen: HashSet<u8> = backup_codes(200)
            .iter()
            .flat_map(|code| code.bytes())
            .filter(|&c| c != b'-')
            .collect();
        assert_eq!(seen.len(), BACKUP_ALPHABET.len());
    }

    #[test]
    fn typed_backup_codes_are_normalised() {
        assert_eq!(normalize_backup_code("abcde-fghjk"), "ABCDE-FGHJK");
        assert_eq!(normalize_backup_code(" abcde fghjk "), "ABCDE-FGHJK");
        assert_eq!(normalize_backup_code("ABCDEFGHJK"), "ABCDE-FGHJK");
        assert_eq!(normalize_backup_code("ab-cdefg-hjk"), "ABCDE-FGHJK");
        assert_eq!(normalize_backup_code("abc"), "ABC");
        assert_eq!(normalize_backup_code("abcdefghjkl"), "ABCDEFGHJKL");
    }

    #[test]
    fn api_keys_round_trip_through_the_parser() {
        let (full, parts) = new_api_key();
        assert!(full.starts_with(API_KEY_PREFIX));
        assert_eq!(full.len(), 65);
        assert_eq!(parts.key_id.len(), 16);
        assert_eq!(parts.secret.len(), 43);
        assert_eq!(parse_api_key(&full), Some(parts.clone()));
        assert!(!format!("{parts:?}").contains(&parts.secret));
        let (other, _) = new_api_key();
        assert_ne!(full, other);
    }

    #[test]
    fn malformed_api_keys_are_refused() {
        let (full, parts) = new_api_key();
        let secret = &parts.secret;
        let id = &parts.key_id;
        assert_eq!(parse_api_key(""), None);
        assert_eq!(parse_api_key(&full[API_KEY_PREFIX.len()..]), None);
        assert_eq!(parse_api_key(&format!("AGON_{id}_{secret}")), None);
        assert_eq!(parse_api_key(&format!("{full}x")), None);
        assert_eq!(parse_api_key(&full[..full.len() - 1]), None);
        assert_eq!(
            parse_api_key(&format!("agon_{}_{secret}", id.to_uppercase())),
            if id.bytes().any(|c| c.is_ascii_alphabetic()) {
                None
            } else {
                Some(parts.clone())
            }
        );
        assert_eq!(parse_api_key(&format!("agon_{id}-{secret}")), None);
        assert_eq!(
            parse_api_key(&format!("agon_zzzzzzzzzzzzzzzz_{secret}")),
            None
        );
        assert_eq!(
            parse_api_key(&format!("agon_{id}_{}", "+".repeat(43))),
            None
        );
        // Right length and alphabet, but a non-canonical final character.
        assert_eq!(
            parse_api_key(&format!("agon_{id}_{}B", "A".repeat(42))),
            None
        );
        assert!(parse_api_key(&format!("agon_{id}_{}A", "A".repeat(42))).is_some());
    }
}
