//! What links in mails point at: the service's own address when no public
//! URL is configured, and the small HTML page such a link lands on.

/// Where links in mails point when `SERVICE_PUBLIC_URL` is unset: the
/// address `agon serve` listens on (`localhost` for the wildcard addresses,
/// which name no host a reader could open).
pub fn served_url(host: &str, port: u16) -> String {
    let host = host.trim_matches(['[', ']']);
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) if ip.is_unspecified() => format!("http://localhost:{port}"),
        Ok(std::net::IpAddr::V6(ip)) => format!("http://[{ip}]:{port}"),
        _ => format!("http://{host}:{port}"),
    }
}

/// The small HTML page a link in a mail lands on when a browser opens it:
/// a title and a few paragraphs, escaped.
pub fn landing_page(title: &str, paragraphs: &[String]) -> String {
    let mut body = String::new();
    for paragraph in paragraphs {
        body.push_str("<p>");
        body.push_str(&escape_html(paragraph));
        body.push_str("</p>\n");
    }
    let title = escape_html(title);
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title} - Agon</title></head>\n<body style=\"font-family: sans-serif; \
         max-width: 36em; margin: 3em auto; padding: 0 1em\">\n<h1>{title}</h1>\n{body}</body>\n</html>\n"
    )
}

fn escape_html(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_public_url_is_the_served_address() {
        assert_eq!(served_url("127.0.0.1", 9000), "http://127.0.0.1:9000");
        assert_eq!(served_url("0.0.0.0", 8080), "http://localhost:8080");
        assert_eq!(served_url("::", 8080), "http://localhost:8080");
        assert_eq!(served_url("::1", 81), "http://[::1]:81");
        assert_eq!(served_url("agon.internal", 81), "http://agon.internal:81");
    }

    #[test]
    fn landing_pages_escape_what_they_show() {
        let page = landing_page("Invited <b>", &["Ada & \"Bob\" <x@y>".to_owned()]);
        assert!(page.starts_with("<!doctype html>"), "{page}");
        assert!(page.contains("<h1>Invited &lt;b&gt;</h1>"), "{page}");
        assert!(
            page.contains("<p>Ada &amp; &quot;Bob&quot; &lt;x@y&gt;</p>"),
            "{page}"
        );
    }
}
