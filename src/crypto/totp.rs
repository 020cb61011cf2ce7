//! Time-based one-time passwords for the second login factor, fixed to what
//! every authenticator app supports (RFC 6238: SHA-1, 6 digits, 30 seconds).
//! Checking returns the matched time step so the caller can refuse a code
//! that was already used, which RFC 6238 requires and the library leaves to us.

use thiserror::Error;
use totp_rs::{Algorithm, Builder, Secret, Totp};

pub const STEP_SECONDS: u64 = 30;
const DIGITS: u8 = 6;
/// One step either side absorbs clock drift and the time it takes to type.
const SKEW_STEPS: u16 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TotpError {
    #[error("TOTP secret must be base32 and at least 128 bits long")]
    BadSecret,
    #[error("cannot build an authenticator URI: {0}")]
    Uri(String),
}

/// A new random secret (160 bits, as RFC 4226 recommends) in unpadded base32.
pub fn new_secret() -> String {
    Secret::generate().to_base32()
}

/// The `otpauth://totp/...` URI an authenticator app reads from a QR code.
pub fn otpauth_uri(secret_base32: &str, account: &str, issuer: &str) -> Result<String, TotpError> {
    let secret = decode_secret(secret_base32).ok_or(TotpError::BadSecret)?;
    let issuer = Some(issuer).filter(|issuer| !issuer.is_empty());
    configured(secret)
        .with_account_name(account)
        .with_issuer(issuer)
        .build()
        .and_then(|totp| totp.to_url())
        .map_err(|e| TotpError::Uri(e.to_string()))
}

/// The time step (`unix_time / 30`) whose code `code` is, looking at the
/// current step and one either side; `None` for any other code, a code that
/// is not exactly six ASCII digits, or an unusable secret.
pub fn matching_step(secret_base32: &str, code: &str, unix_time: u64) -> Option<u64> {
    if code.len() != usize::from(DIGITS) || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    totp(secret_base32)?.check(code, unix_time)
}

/// The code an authenticator shows at `unix_time`.
pub fn code_at(secret_base32: &str, unix_time: u64) -> Option<String> {
    Some(totp(secret_base32)?.generate(unix_time).to_string())
}

fn totp(secret_base32: &str) -> Option<Totp> {
    configured(decode_secret(secret_base32)?).build().ok()
}

fn configured(secret: Secret) -> Builder {
    Builder::new()
        .with_algorithm(Algorithm::SHA1)
        .with_digits(DIGITS)
        .with_step_duration(STEP_SECONDS)
        .with_skew(SKEW_STEPS)
        .with_secret(secret)
}

/// Accepts the secret the way people copy it: any case, spaced or padded.
fn decode_secret(secret_base32: &str) -> Option<Secret> {
    let cleaned: String = secret_base32
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '=')
        .map(|c| c.to_ascii_uppercase())
        .collect();
    if cleaned.is_empty() {
        return None;
    }
    Secret::try_from_base32(cleaned).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6238's SHA-1 test secret, the ASCII bytes "12345678901234567890".
    const RFC_SECRET: &str = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ";
    const T: u64 = 1_700_000_015;

    #[test]
    fn codes_match_the_rfc_6238_vectors() {
        // The RFC lists 8 digits; a 6-digit code is the last six of them.
        for (time, code) in [
            (59, "287082"),
            (1_111_111_109, "081804"),
            (1_111_111_111, "050471"),
            (1_234_567_890, "005924"),
            (2_000_000_000, "279037"),
            (20_000_000_000, "353130"),
        ] {
            assert_eq!(code_at(RFC_SECRET, time).as_deref(), Some(code), "t={time}");
        }
    }

    #[test]
    fn the_current_code_matches_its_step() {
        let code = code_at(RFC_SECRET, T);
        assert_eq!(
            code.and_then(|code| matching_step(RFC_SECRET, &code, T)),
            Some(T / STEP_SECONDS)
        );
        assert_eq!(matching_step(RFC_SECRET, "287082", 59), Some(1));
    }

    #[test]
    fn one_step_either_side_is_accepted() {
        for offset in [-30i64, 30] {
            let then = T.saturating_add_signed(offset);
            let code = code_at(RFC_SECRET, then);
            assert_eq!(
                code.and_then(|code| matching_step(RFC_SECRET, &code, T)),
                Some(then / STEP_SECONDS),
                "offset {offset}"
            );
        }
    }

    #[test]
    fn two_steps_away_is_refused() {
        for offset in [-60i64, 60, -90, 90] {
            let then = T.saturating_add_signed(offset);
            let code = code_at(RFC_SECRET, then);
            assert_eq!(
                code.and_then(|code| matching_step(RFC_SECRET, &code, T)),
                None,
                "offset {offset}"
            );
        }
    }

    #[test]
    fn only_six_ascii_digits_are_considered() -> Result<(), &'static str> {
        let code = code_at(RFC_SECRET, T).ok_or("no code")?;
        assert!(matching_step(RFC_SECRET, &code, T).is_some());
        for malformed in [
            String::new(),
            code[..5].to_owned(),
            format!("{code}0"),
            format!(" {code}"),
            format!("{} {}", &code[..3], &code[3..]),
            format!("{}-{}", &code[..3], &code[3..]),
            "abcdef".to_owned(),
            "١٢٣٤٥٦".to_owned(),
        ] {
            assert_eq!(
                matching_step(RFC_SECRET, &malformed, T),
                None,
                "{malformed:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn a_code_for_another_secret_is_refused() {
        let other = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP";
        let code = code_at(other, T);
        assert!(code.is_some());
        assert_eq!(
            code.as_deref()
                .and_then(|code| matching_step(other, code, T)),
            Some(T / STEP_SECONDS)
        );
        assert_eq!(
            code.and_then(|code| matching_step(RFC_SECRET, &code, T)),
            None
        );
    }

    #[test]
    fn new_secrets_are_160_bit_base32() {
        let secret = new_secret();
        assert_eq!(secret.len(), 32);
        assert!(
            secret
                .bytes()
                .all(|b| b.is_ascii_uppercase() || (b'2'..=b'7').contains(&b))
        );
        assert_ne!(secret, new_secret());
        assert!(code_at(&secret, T).is_some());
    }

    #[test]
    fn secrets_are_read_leniently_but_must_be_valid() {
        let spaced = "gezd gnbv gy3t qojq gezd gnbv gy3t qojq";
        assert_eq!(code_at(spaced, 59).as_deref(), Some("287082"));
        assert_eq!(code_at("", 59), None);
        assert_eq!(code_at("not base32!", 59), None);
        // 80 bits: below the RFC minimum of 128.
        assert_eq!(code_at("GEZDGNBVGY3TQOJQ", 59), None);
        assert_eq!(matching_step("GEZDGNBVGY3TQOJQ", "287082", 59), None);
    }

    #[test]
    fn the_uri_names_issuer_account_and_secret() -> Result<(), TotpError> {
        let uri = otpauth_uri(RFC_SECRET, "alice@example.com", "Agon")?;
        assert!(uri.starts_with("otpauth://totp/Agon:alice"), "{uri}");
        assert!(uri.contains(&format!("secret={RFC_SECRET}")), "{uri}");
        assert!(uri.contains("issuer=Agon"), "{uri}");
        let bare = otpauth_uri(RFC_SECRET, "alice@example.com", "")?;
        assert!(!bare.contains("issuer"), "{bare}");
        assert_eq!(
            otpauth_uri("bad!", "alice@example.com", "Agon"),
            Err(TotpError::BadSecret)
        );
        assert!(matches!(
            otpauth_uri(RFC_SECRET, "alice:admin", "Agon"),
            Err(TotpError::Uri(_))
        ));
        assert!(matches!(
            otpauth_uri(RFC_SECRET, "", "Agon"),
            Err(TotpError::Uri(_))
        ));
        Ok(())
    }
}
