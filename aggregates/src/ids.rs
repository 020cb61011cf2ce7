//! Ids as types: a user id cannot be passed where a debate id is meant.
//! Each is the text the log and the API carry (serialized as a plain
//! string), parsed once where it enters: non-empty, at most
//! [`MAX_ID_BYTES`] bytes, no control characters.

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Longest id accepted anywhere.
pub const MAX_ID_BYTES: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{kind} must be 1 to {MAX_ID_BYTES} bytes without control characters")]
pub struct IdError {
    pub kind: &'static str,
}

macro_rules! id {
    ($($(#[$doc:meta])* $name:ident: $kind:literal;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn parse(text: &str) -> Result<Self, IdError> {
                let fits = !text.is_empty()
                    && text.len() <= MAX_ID_BYTES
                    && !text.chars().any(char::is_control);
                if fits {
                    Ok(Self(text.to_owned()))
                } else {
                    Err(IdError { kind: $kind })
                }
            }

            /// An id the service made itself (a fresh UUID, a stored one).
            pub fn from_trusted(text: impl Into<String>) -> Self {
                Self(text.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    )*};
}

id! {
    /// A user: an account's id, or a caller a trusted service names.
    UserId: "user id";
    /// A debate.
    DebateId: "debate id";
    /// An organization.
    OrgId: "organization id";
    /// A sign-in session (the access and refresh tokens' `jti`).
    SessionId: "session id";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_plain_strings_on_the_wire_and_parsed_once() {
        let id = UserId::parse("u-1").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"u-1\"");
        let back: DebateId = serde_json::from_str("\"d-9\"").unwrap();
        assert_eq!(back, "d-9");
        assert_eq!(&*id, "u-1");
        for bad in ["", "a\nb", &"x".repeat(MAX_ID_BYTES + 1)] {
            assert_eq!(
                OrgId::parse(bad),
                Err(IdError {
                    kind: "organization id"
                })
            );
        }
    }
}
