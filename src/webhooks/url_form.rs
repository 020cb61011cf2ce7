//! What a webhook URL may look like before anyone asks where it points: an
//! absolute RFC 3986 URI, `http://` or `https://`, with a host and no user
//! information, at most `SERVICE_WEBHOOK_URL_MAX_CHARS` characters. Stated
//! once here for both the check and the OpenAPI schema, so that the schema
//! admits exactly the URLs the check lets on to the SSRF guard.

use super::guard::TargetError;

/// The JSON Schema `pattern` of a webhook URL (beside `format: uri`):
/// the scheme, then a host that neither is empty nor carries user
/// information.
pub const PATTERN: &str = "^https?://[^@/?#:][^@/?#]*([/?#]|$)";

/// The shortest URL [`PATTERN`] admits (`http://a`).
pub const MIN_CHARS: usize = 8;

/// Checks `url`'s form (not its host's addresses: the guard's part).
pub fn check(url: &str, max_chars: usize) -> Result<(), TargetError> {
    // JSON Schema lengths count characters, not bytes.
    if url.chars().count() > max_chars {
        return Err(TargetError::TooLong { max: max_chars });
    }
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or(TargetError::Scheme)?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if !tail_is_rfc3986(rest) {
        return Err(TargetError::Unparsable);
    }
    if authority.contains('@') {
        return Err(TargetError::Credentials);
    }
    if authority.is_empty() || authority.starts_with(':') {
        return Err(TargetError::NoHost);
    }
    Ok(())
}

/// Whether every character of `text` is unreserved, a sub-delimiter, one of
/// `extra`, or a `%` with two hex digits (RFC 3986 §2).
fn made_of(text: &str, extra: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = |at: usize| bytes.get(at).is_some_and(u8::is_ascii_hexdigit);
            if !(hex(i + 1) && hex(i + 2)) {
                return false;
            }
            i += 3;
            continue;
        }
        let unreserved = b.is_ascii_alphanumeric() || b"-._~".contains(&b);
        let sub_delim = b"!$&'()*+,;=".contains(&b);
        if !(unreserved || sub_delim || extra.as_bytes().contains(&b)) {
            return false;
        }
        i += 1;
    }
    true
}

/// `authority path-abempty [ "?" query ] [ "#" fragment ]`: what follows
/// `scheme "://"` in an absolute URI (RFC 3986 §3).
fn tail_is_rfc3986(rest: &str) -> bool {
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    made_of(fragment, ":@/?") && made_of(query, ":@/?") && made_of(path, ":@/") && {
        authority_is_rfc3986(authority)
    }
}

/// `[ userinfo "@" ] host [ ":" port ]` (RFC 3986 §3.2).
fn authority_is_rfc3986(authority: &str) -> bool {
    let (userinfo, host_port) = authority.split_once('@').unwrap_or(("", authority));
    if !made_of(userinfo, ":") {
        return false;
    }
    let (host_ok, port) = match host_port.strip_prefix('[') {
        Some(literal) => match literal.split_once(']') {
            Some((inside, after)) => (ip_literal(inside), after),
            None => return false,
        },
        None => {
            let end = host_port.find(':').unwrap_or(host_port.len());
            let (name, port) = host_port.split_at(end);
            (made_of(name, ""), port)
        }
    };
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|digits| digits.bytes().all(|b| b.is_ascii_digit()));
    host_ok && port_ok
}

/// `IPv6address / IPvFuture` inside brackets (RFC 3986 §3.2.2).
fn ip_literal(inside: &str) -> bool {
    if let Some(future) = inside.strip_prefix(['v', 'V']) {
        return future.split_once('.').is_some_and(|(version, rest)| {
            !version.is_empty()
                && version.bytes().all(|b| b.is_ascii_hexdigit())
                && !rest.is_empty()
                && !rest.contains('%')
                && made_of(rest, ":")
        });
    }
    inside.parse::<std::net::Ipv6Addr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_http_uris_with_a_host_pass() {
        for url in [
            "http://a",
            "https://example.com",
            "http://127.0.0.1:8080/hook?x=1&y=%2F#top",
            "https://[::ffff:127.0.0.1]/a:b@c/",
            "http://a:/",
            "http://[v1.x:y]/",
            "https://a.b/~user/!$&'()*+,;=",
        ] {
            assert!(check(url, 100).is_ok(), "{url}");
        }
    }

    #[test]
    fn anything_else_is_refused_with_its_reason() {
        let refused = |url: &str| check(url, 40).err().map(|e| e.to_string());
        let cases = [
            ("", "url must use http or https"),
            ("HTTP://a", "url must use http or https"),
            (" http://a", "url must use http or https"),
            ("ftp://a", "url must use http or https"),
            ("http://a b", "url is not a valid absolute URL"),
            ("http://a/{x}", "url is not a valid absolute URL"),
            ("http://a/#b#c", "url is not a valid absolute URL"),
            ("http://a/%zz", "url is not a valid absolute URL"),
            ("http://é.com", "url is not a valid absolute URL"),
            ("http://[::1/", "url is not a valid absolute URL"),
            (
                "http://[fe80::1%25eth0]/",
                "url is not a valid absolute URL",
            ),
            ("http://a:8o/", "url is not a valid absolute URL"),
            (
                "http://u:p@a/",
                "url must not carry a user name or password",
            ),
            ("http://", "url has no host"),
            ("http://:80/", "url has no host"),
            (
                "http://example.com/a-path-that-is-too-long",
                "url is longer than 40 characters",
            ),
        ];
        for (url, reason) in cases {
            assert_eq!(refused(url).as_deref(), Some(reason), "{url:?}");
        }
    }

    #[test]
    fn the_pattern_admits_exactly_the_scheme_and_host_the_check_wants() {
        let pattern = regex::Regex::new(PATTERN).unwrap();
        for url in ["http://a", "https://a:1/", "http://[::1]", "http://a?@"] {
            assert!(pattern.is_match(url), "{url}");
        }
        for url in [
            "http://",
            "http://:1",
            "http://u@a",
            "HTTP://a",
            " http://a",
        ] {
            assert!(!pattern.is_match(url), "{url}");
        }
        assert_eq!("http://a".chars().count(), MIN_CHARS);
    }
}
