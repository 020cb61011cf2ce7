//! A topic search on the debates list (`q`), checked once at the edge:
//! the list's read model matches it case-insensitively and literally.

use thiserror::Error;

/// Text the debates list looks for in topics: not blank, at most the
/// configured length (`SERVICE_DEBATE_SEARCH_MAX_CHARS`), no NUL (which
/// PostgreSQL text cannot hold).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSearch(String);

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SearchError {
    #[error("q must be at most {max} characters")]
    TooLong { max: usize },
    #[error("q must not contain NUL characters")]
    Nul,
}

impl TopicSearch {
    /// The search `text` asks for; `None` when it is blank (no search).
    /// Surrounding whitespace is not part of it.
    pub fn parse(text: &str, max_chars: usize) -> Result<Option<Self>, SearchError> {
        if text.chars().count() > max_chars {
            return Err(SearchError::TooLong { max: max_chars });
        }
        if text.contains('\0') {
            return Err(SearchError::Nul);
        }
        let text = text.trim();
        Ok((!text.is_empty()).then(|| Self(text.to_owned())))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_is_no_search_and_length_counts_characters() {
        assert_eq!(TopicSearch::parse("  ", 3), Ok(None));
        let found = TopicSearch::parse(" Äpfel ", 7).unwrap().unwrap();
        assert_eq!(found.as_str(), "Äpfel");
        assert_eq!(TopicSearch::parse("ÄÄÄ", 3).map(|s| s.is_some()), Ok(true));
        assert_eq!(
            TopicSearch::parse("ÄÄÄÄ", 3),
            Err(SearchError::TooLong { max: 3 })
        );
        assert_eq!(TopicSearch::parse("a\0b", 3), Err(SearchError::Nul));
    }
}
