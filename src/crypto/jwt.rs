//! Session tokens: HMAC-signed JWTs for access, refresh and MFA challenges.
//! The algorithm is pinned to the configured one so a token cannot choose how
//! it is checked, and expiry is judged against a clock the caller passes in
//! so that tests and every handler agree on what "now" is.

use std::str::FromStr;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// What a token may be used for; a token is only accepted where its type is expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenType {
    Access,
    Refresh,
    Mfa,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub exp: i64,
    pub iat: i64,
    pub sub: String,
    pub jti: String,
    pub token_type: TokenType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u32>,
    /// The user's organization and role in it, for permission checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub org_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub org_role: Option<String>,
    /// An MFA step token's provider identity, when the first step was a
    /// provider's sign-in rather than the password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<agon_aggregates::account::ProviderIdentity>,
}

/// Only the HMAC family: the service signs and checks its own tokens with
/// one shared secret, so public-key algorithms (and `none`) have no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JwtAlgorithm {
    Hs256,
    Hs384,
    Hs512,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("JWT algorithm must be one of HS256, HS384, HS512")]
pub struct UnsupportedAlgorithm;

impl FromStr for JwtAlgorithm {
    type Err = UnsupportedAlgorithm;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_uppercase().as_str() {
            "HS256" => Ok(Self::Hs256),
            "HS384" => Ok(Self::Hs384),
            "HS512" => Ok(Self::Hs512),
            _ => Err(UnsupportedAlgorithm),
        }
    }
}

impl std::fmt::Display for JwtAlgorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl JwtAlgorithm {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hs256 => "HS256",
            Self::Hs384 => "HS384",
            Self::Hs512 => "HS512",
        }
    }

    fn jsonwebtoken(self) -> Algorithm {
        match self {
            Self::Hs256 => Algorithm::HS256,
            Self::Hs384 => Algorithm::HS384,
            Self::Hs512 => Algorithm::HS512,
        }
    }
}

/// Deliberately coarse: a client learns only whether to refresh or to log in
/// again, never which check a forged token failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum TokenError {
    #[error("Token expired")]
    Expired,
    #[error("Invalid token")]
    Invalid,
}

#[derive(Clone)]
pub struct JwtKeys {
    algorithm: JwtAlgorithm,
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl std::fmt::Debug for JwtKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtKeys")
            .field("algorithm", &self.algorithm)
            .field("secret", &"<redacted>")
            .finish()
    }
}

impl JwtKeys {
    pub fn new(secret: &[u8], algorithm: JwtAlgorithm) -> Self {
        // Only the configured algorithm is listed, so a header naming any
        // other one (or `none`, which the library cannot even parse) fails.
        let mut validation = Validation::new(algorithm.jsonwebtoken());
        // Time and required claims are checked in `verify` against the
        // injected clock; the library would read the system clock instead.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.leeway = 0;
        validation.required_spec_claims.clear();
        Self {
            algorithm,
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            validation,
        }
    }

    pub fn algorithm(&self) -> JwtAlgorithm {
        self.algorithm
    }

    pub fn issue(&self, claims: &Claims) -> Result<String, jsonwebtoken::errors::Error> {
        jsonwebtoken::encode(
            &Header::new(self.algorithm.jsonwebtoken()),
            claims,
            &self.encoding,
        )
    }

    /// The claims of a well-signed token of type `expected` that has not
    /// expired at `now_unix`. Expiry is looked at only after the signature
    /// holds, so `Expired` is never said of a forged token.
    pub fn verify(
        &self,
        token: &str,
        expected: TokenType,
        now_unix: i64,
    ) -> Result<Claims, TokenError> {
        let claims = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map_err(|_| TokenError::Invalid)?
            .claims;
        // A token of the wrong type is refused outright: answering "expired"
        // would invite the client to try refreshing with it.
        if claims.token_type != expected {
            return Err(TokenError::Invalid);
        }
        if claims.exp <= now_unix {
            return Err(TokenError::Expired);
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    const SECRET: &[u8] = b"a test secret that is long enough for HS512 keys";
    const NOW: i64 = 1_700_000_000;

    fn claims(token_type: TokenType) -> Claims {
        Claims {
            exp: NOW + 900,
            iat: NOW,
            sub: "user-1".to_owned(),
            jti: "jti-1".to_owned(),
            token_type,
            email: Some("a@example.com".to_owned()),
            role: Some("admin".to_owned()),
            generation: Some(3),
            org_id: None,
            org_role: None,
            via: None,
        }
    }

    fn keys() -> JwtKeys {
        JwtKeys::new(SECRET, JwtAlgorithm::Hs256)
    }

    #[test]
    fn algorithm_names_parse_case_insensitively_and_only_hmac() {
        assert_eq!("HS256".parse(), Ok(JwtAlgorithm::Hs256));
        assert_eq!("hs384".parse(), Ok(JwtAlgorithm::Hs384));
        assert_eq!("Hs512".parse(), Ok(JwtAlgorithm::Hs512));
        for refused in ["none", "None", "RS256", "ES256", "EdDSA", "", "HS1024"] {
            assert_eq!(
                refused.parse::<JwtAlgorithm>(),
                Err(UnsupportedAlgorithm),
                "{refused}"
            );
        }
        let message = UnsupportedAlgorithm.to_string();
        assert!(
            message.contains("HS256") && message.contains("HS384") && message.contains("HS512")
        );
        for alg in [
            JwtAlgorithm::Hs256,
            JwtAlgorithm::Hs384,
            JwtAlgorithm::Hs512,
        ] {
            assert_eq!(alg.as_str().parse(), Ok(alg));
        }
    }

    #[test]
    fn a_token_round_trips() -> TestResult {
        for alg in [
            JwtAlgorithm::Hs256,
            JwtAlgorithm::Hs384,
            JwtAlgorithm::Hs512,
        ] {
            let keys = JwtKeys::new(SECRET, alg);
            assert_eq!(keys.algorithm(), alg);
            for token_type in [TokenType::Access, TokenType::Refresh, TokenType::Mfa] {
                let original = claims(token_type);
                let token = keys.issue(&original)?;
                assert_eq!(keys.verify(&token, token_type, NOW), Ok(original));
            }
        }
        Ok(())
    }

    #[test]
    fn optional_claims_are_left_out_when_absent() -> TestResult {
        let keys = keys();
        let bare = Claims {
            email: None,
            role: None,
            generation: None,
            ..claims(TokenType::Mfa)
        };
        let token = keys.issue(&bare)?;
        let payload = token.split('.').nth(1).ok_or("no payload")?;
        let json = String::from_utf8(URL_SAFE_NO_PAD.decode(payload)?)?;
        assert!(!json.contains("email") && !json.contains("role"));
        assert!(json.contains(r#""token_type":"mfa""#), "{json}");
        assert_eq!(keys.verify(&token, TokenType::Mfa, NOW), Ok(bare));
        Ok(())
    }

    #[test]
    fn expiry_follows_the_injected_clock() -> TestResult {
        let keys = keys();
        let original = claims(TokenType::Access);
        let token = keys.issue(&original)?;
        assert!(
            keys.verify(&token, TokenType::Access, original.exp - 1)
                .is_ok()
        );
        assert_eq!(
            keys.verify(&token, TokenType::Access, original.exp),
            Err(TokenError::Expired)
        );
        assert_eq!(
            keys.verify(&token, TokenType::Access, original.exp + 3600),
            Err(TokenError::Expired)
        );
        // Long past by the system clock, still valid by the injected one.
        let old = Claims {
            exp: 1_000,
            iat: 100,
            ..claims(TokenType::Access)
        };
        let token = keys.issue(&old)?;
        assert!(keys.verify(&token, TokenType::Access, 999).is_ok());
        Ok(())
    }

    #[test]
    fn a_token_is_refused_where_another_type_is_expected() -> TestResult {
        let keys = keys();
        let refresh = keys.issue(&claims(TokenType::Refresh))?;
        let access = keys.issue(&claims(TokenType::Access))?;
        let mfa = keys.issue(&claims(TokenType::Mfa))?;
        assert_eq!(
            keys.verify(&refresh, TokenType::Access, NOW),
            Err(TokenError::Invalid)
        );
        assert_eq!(
            keys.verify(&access, TokenType::Refresh, NOW),
            Err(TokenError::Invalid)
        );
        assert_eq!(
            keys.verify(&mfa, TokenType::Access, NOW),
            Err(TokenError::Invalid)
        );
        Ok(())
    }

    #[test]
    fn a_token_signed_with_another_secret_is_invalid_even_when_expired() -> TestResult {
        let other = JwtKeys::new(b"some other secret", JwtAlgorithm::Hs256);
        let token = other.issue(&claims(TokenType::Access))?;
        assert_eq!(
            keys().verify(&token, TokenType::Access, NOW),
            Err(TokenError::Invalid)
        );
        assert_eq!(
            keys().verify(&token, TokenType::Access, NOW + 10_000),
            Err(TokenError::Invalid)
        );
        Ok(())
    }

    #[test]
    fn an_unsigned_alg_none_token_is_invalid() -> TestResult {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims(TokenType::Access))?);
        for token in [
            format!("{header}.{payload}."),
            format!("{header}.{payload}"),
        ] {
            assert_eq!(
                keys().verify(&token, TokenType::Access, NOW),
                Err(TokenError::Invalid)
            );
        }
        Ok(())
    }

    #[test]
    fn a_token_with_a_different_hmac_algorithm_is_invalid() -> TestResult {
        let hs512 = JwtKeys::new(SECRET, JwtAlgorithm::Hs512);
        let token = hs512.issue(&claims(TokenType::Access))?;
        assert!(hs512.verify(&token, TokenType::Access, NOW).is_ok());
        assert_eq!(
            keys().verify(&token, TokenType::Access, NOW),
            Err(TokenError::Invalid)
        );
        Ok(())
    }

    #[test]
    fn garbage_is_invalid() {
        let keys = keys();
        for garbage in [
            "",
            ".",
            "..",
            "not a token",
            "a.b.c",
            "eyJhbGciOiJIUzI1NiJ9.e30.",
            "eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl",
        ] {
            assert_eq!(
                keys.verify(garbage, TokenType::Access, NOW),
                Err(TokenError::Invalid),
                "{garbage}"
            );
        }
    }

    #[test]
    fn a_well_signed_token_missing_claims_is_invalid() -> TestResult {
        let keys = keys();
        let token = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &serde_json::json!({ "sub": "user-1", "exp": NOW + 60, "token_type": "access" }),
            &EncodingKey::from_secret(SECRET),
        )?;
        assert_eq!(
            keys.verify(&token, TokenType::Access, NOW),
            Err(TokenError::Invalid)
        );
        Ok(())
    }

    #[test]
    fn a_tampered_payload_is_invalid() -> TestResult {
        let keys = keys();
        let token = keys.issue(&claims(TokenType::Access))?;
        let mut parts: Vec<&str> = token.split('.').collect();
        let mut forged = claims(TokenType::Access);
        forged.role = Some("owner".to_owned());
        let forged_payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged)?);
        parts[1] = &forged_payload;
        assert_eq!(
            keys.verify(&parts.join("."), TokenType::Access, NOW),
            Err(TokenError::Invalid)
        );
        Ok(())
    }

    #[test]
    fn debug_hides_the_secret() {
        let shown = format!("{:?}", keys());
        assert!(shown.contains("Hs256"));
        assert!(!shown.contains("a test secret"));
    }
}
