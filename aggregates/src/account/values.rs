//! The values a person types to make an account, parsed once at the edge:
//! an [`Email`], a [`DisplayName`] and a [`Password`] cannot hold what the
//! rules refuse, so nothing behind the edge checks them again. Errors carry
//! the words a caller reads.

use std::fmt;

use thiserror::Error;

/// Longest accepted email address (RFC 5321's path limit).
pub const MAX_EMAIL_CHARS: usize = 254;
/// Longest display name.
pub const MAX_NAME_CHARS: usize = 200;
pub const MIN_PASSWORD_CHARS: usize = 8;
pub const MAX_PASSWORD_CHARS: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ValueError {
    #[error("Email address is not valid")]
    Email,
    #[error("Name must be 1 to {MAX_NAME_CHARS} characters")]
    Name,
    #[error("Password must be at least {MIN_PASSWORD_CHARS} characters")]
    PasswordTooShort,
    #[error("Password must be at most {MAX_PASSWORD_CHARS} characters")]
    PasswordTooLong,
}

/// An address as accounts compare it: trimmed and lower-cased, a local
/// part, one last `@`, a domain, no spaces. (Deliverability is what the
/// verification mail is for.)
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Email(String);

impl Email {
    pub fn parse(text: &str) -> Result<Self, ValueError> {
        let email = normalize_email(text);
        let valid = email.chars().count() <= MAX_EMAIL_CHARS
            && !email.chars().any(|c| c.is_whitespace() || c.is_control())
            && email.rsplit_once('@').is_some_and(|(local, domain)| {
                !local.is_empty()
                    && !domain.is_empty()
                    && !domain.contains('@')
                    && !domain.starts_with('.')
                    && !domain.ends_with('.')
            });
        if valid {
            Ok(Self(email))
        } else {
            Err(ValueError::Email)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Emails compare without case and surrounding space.
pub fn normalize_email(email: &str) -> String {
    email.trim().to_lowercase()
}

/// A person's name as shown: trimmed, 1 to [`MAX_NAME_CHARS`] characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisplayName(String);

impl DisplayName {
    pub fn parse(text: &str) -> Result<Self, ValueError> {
        let name = text.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
            return Err(ValueError::Name);
        }
        Ok(Self(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// A password that meets the policy; never printed. Length is counted in
/// characters, not bytes, so people writing in non-Latin scripts get the
/// same limits as everyone else.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    pub fn parse(text: &str) -> Result<Self, ValueError> {
        let chars = text.chars().count();
        if chars < MIN_PASSWORD_CHARS {
            Err(ValueError::PasswordTooShort)
        } else if chars > MAX_PASSWORD_CHARS {
            Err(ValueError::PasswordTooLong)
        } else {
            Ok(Self(text.to_owned()))
        }
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_normalized_and_plausible() {
        let email = Email::parse("  Ada@Example.COM ").unwrap();
        assert_eq!(email.as_str(), "ada@example.com");
        for bad in ["", "ada", "@x.org", "ada@", "a b@x.org", "a@.x", "a@x."] {
            assert_eq!(Email::parse(bad), Err(ValueError::Email), "{bad:?}");
        }
        let long = format!("{}@x.org", "a".repeat(MAX_EMAIL_CHARS));
        assert_eq!(Email::parse(&long), Err(ValueError::Email));
    }

    #[test]
    fn names_are_trimmed_and_bounded() {
        assert_eq!(DisplayName::parse(" Ada ").unwrap().as_str(), "Ada");
        assert_eq!(DisplayName::parse("  "), Err(ValueError::Name));
        let long = "é".repeat(MAX_NAME_CHARS + 1);
        assert_eq!(DisplayName::parse(&long), Err(ValueError::Name));
    }

    #[test]
    fn passwords_count_characters_and_never_print() {
        assert_eq!(Password::parse("short"), Err(ValueError::PasswordTooShort));
        assert_eq!(
            Password::parse("ééééééé"),
            Err(ValueError::PasswordTooShort)
        );
        assert!(Password::parse("éééééééé").is_ok());
        assert!(Password::parse(&"é".repeat(MAX_PASSWORD_CHARS)).is_ok());
        let long = "a".repeat(MAX_PASSWORD_CHARS + 1);
        assert_eq!(Password::parse(&long), Err(ValueError::PasswordTooLong));
        assert_eq!(
            ValueError::PasswordTooShort.to_string(),
            "Password must be at least 8 characters"
        );
        assert_eq!(
            ValueError::PasswordTooLong.to_string(),
            "Password must be at most 128 characters"
        );
        let secret = Password::parse("correct horse").unwrap();
        assert!(!format!("{secret:?}").contains("horse"));
    }
}
