//! An error and its causes as one line, for logs, dead letters and the
//! causes the HTTP layer logs but never sends.

/// `error`, then each `source()` after it, joined by `: `.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn every_cause_follows_its_error() {
        let error = Outer(std::io::Error::other("inner"));
        assert_eq!(super::chain(&error), "outer: inner");
    }
}
