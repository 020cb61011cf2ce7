//! Reading an SMTP URL for people: where it points, fit for logs, and
//! error texts with its password taken out.

/// `smtp host:port` (with the TLS mode) from an SMTP URL, leaving out the
/// user name and password. Only called on URLs lettre has accepted.
pub(super) fn endpoint(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("smtp", url));
    let scheme = scheme.to_ascii_lowercase();
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let tls = rest
        .split_once('?')
        .map(|(_, query)| query.split('#').next().unwrap_or(query))
        .and_then(|query| query.split('&').find_map(|pair| pair.strip_prefix("tls=")));
    let (label, default_port) = match (scheme.as_str(), tls) {
        ("smtps", _) => ("smtps", 465),
        (_, Some("required")) => ("smtp+starttls", 587),
        (_, Some("opportunistic")) => ("smtp+starttls-if-offered", 587),
        _ => ("smtp", 25),
    };
    // A bracketed IPv6 host has colons of its own; only one after `]` is a port.
    let after_host = host_port.rfind(']').map_or(host_port, |i| &host_port[i..]);
    if after_host.contains(':') {
        format!("{label} {host_port}")
    } else {
        format!("{label} {host_port}:{default_port}")
    }
}

/// Removes the URL's password from `message`, should an error ever echo it.
pub(super) fn redact(message: &str, url: &str) -> String {
    let authority = url.split_once("://").map_or(url, |(_, rest)| {
        rest.split(['/', '?', '#']).next().unwrap_or(rest)
    });
    let password = authority
        .rsplit_once('@')
        .and_then(|(userinfo, _)| userinfo.split_once(':'))
        .map(|(_, password)| password)
        .filter(|password| !password.is_empty());
    match password {
        Some(password) => message.replace(password, "***"),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_hides_the_password() {
        assert_eq!(
            redact("failed near secretpw", "smtp://user:secretpw@host:25"),
            "failed near ***"
        );
        assert_eq!(redact("failed", "smtp://host:25"), "failed");
    }
}
