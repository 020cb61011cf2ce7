//! Sends the service's emails (address verification, invitations): over SMTP
//! in production, or as `.eml` files in an outbox folder where no mail server
//! is at hand, so a local user can still open the links they carry.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use thiserror::Error;

/// The sender when `SERVICE_MAIL_FROM` is unset (README's default), also
/// written into outbox files unless [`Mailer::with_from`] names another.
pub const DEFAULT_FROM: &str = "Agon <noreply@agon.localhost>";

/// One plain-text email.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mail {
    pub to: String,
    pub subject: String,
    pub body: String,
}

// No variant carries the SMTP URL itself: it may hold a password.
#[derive(Debug, Error)]
pub enum MailError {
    #[error(
        "invalid SMTP URL (expected smtp://host:port, smtp://host:port?tls=required or smtps://host:port): {0}"
    )]
    BadSmtpUrl(String),
    #[error("invalid email address {address:?}: {reason}")]
    BadAddress { address: String, reason: String },
    #[error("cannot send mail over SMTP: {0}")]
    Send(String),
    #[error("cannot write mail to the outbox {path}: {source}")]
    Outbox {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Where mail goes. Its `Debug` form and `describe` never show credentials.
#[derive(Clone)]
pub struct Mailer(Mode);

#[derive(Clone)]
enum Mode {
    Smtp {
        // Shared so that clones of a mailer stay cheap.
        transport: Arc<AsyncSmtpTransport<Tokio1Executor>>,
        from: Mailbox,
        /// The URL with its user name and password left out, for logs.
        endpoint: String,
    },
    Outbox {
        dir: PathBuf,
        /// A checked mailbox, as written into the `From:` line.
        from: String,
    },
}

impl std::fmt::Debug for Mailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mailer({})", self.describe())
    }
}

impl Mailer {
    /// A mailer that sends through the SMTP server at `url`, as `from`.
    ///
    /// `smtp://host:port` talks plain SMTP, `smtp://host:port?tls=required`
    /// insists on STARTTLS, `smtps://host:port` uses implicit TLS; a
    /// `user:password@` before the host logs in.
    pub fn smtp(url: &str, from: &str) -> Result<Self, MailError> {
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
            .map_err(|e| MailError::BadSmtpUrl(redact(&e.to_string(), url)))?
            .build();
        Ok(Self(Mode::Smtp {
            transport: Arc::new(transport),
            from: parse_mailbox(from)?,
            endpoint: endpoint(url),
        }))
    }

    /// A mailer that writes each mail as a file into `dir`, created on
    /// first use, from [`DEFAULT_FROM`].
    pub fn outbox(dir: PathBuf) -> Self {
        Self(Mode::Outbox {
            dir,
            from: DEFAULT_FROM.to_owned(),
        })
    }

    /// The same mailer sending as `from` (`SERVICE_MAIL_FROM`), so outbox
    /// files show the sender SMTP would use.
    pub fn with_from(self, from: &str) -> Result<Self, MailError> {
        let sender = parse_mailbox(from)?;
        Ok(Self(match self.0 {
            Mode::Smtp {
                transport,
                endpoint,
                ..
            } => Mode::Smtp {
                transport,
                from: sender,
                endpoint,
            },
            Mode::Outbox { dir, .. } => Mode::Outbox {
                dir,
                from: sender.to_string(),
            },
        }))
    }

    /// Where mail goes, fit for a log line: `smtp host:port` or `outbox /path`.
    pub fn describe(&self) -> String {
        match &self.0 {
            Mode::Smtp { endpoint, .. } => endpoint.clone(),
            Mode::Outbox { dir, .. } => format!("outbox {}", dir.display()),
        }
    }

    /// Sends `mail`, or writes it to the outbox.
    pub async fn send(&self, mail: &Mail) -> Result<(), MailError> {
        // Checked in outbox mode too, so a bad address fails in development
        // as it would against a real server.
        let to = parse_mailbox(&mail.to)?;
        match &self.0 {
            Mode::Smtp {
                transport,
                from,
                endpoint,
            } => {
                let message = Message::builder()
                    .from(from.clone())
                    .to(to)
                    .subject(mail.subject.as_str())
                    .header(ContentType::TEXT_PLAIN)
                    .body(mail.body.clone())
                    .map_err(|e| MailError::Send(format!("cannot build the message: {e}")))?;
                transport
                    .send(message)
                    .await
                    .map_err(|e| MailError::Send(e.to_string()))?;
                tracing::info!(to = %mail.to, subject = %mail.subject, via = %endpoint, "mail sent");
                Ok(())
            }
            Mode::Outbox { dir, from } => {
                let path = write_to_outbox(dir, from, &to, mail).await?;
                tracing::info!(
                    to = %mail.to,
                    subject = %mail.subject,
                    path = %path.display(),
                    "mail written to the outbox"
                );
                Ok(())
            }
        }
    }
}

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

fn parse_mailbox(address: &str) -> Result<Mailbox, MailError> {
    address
        .parse()
        .map_err(|e: lettre::address::AddressError| MailError::BadAddress {
            address: address.to_owned(),
            reason: e.to_string(),
        })
}

/// Writes `mail` as one `.eml` file and returns its path. The file appears
/// whole or not at all, so a reader watching the folder never sees half a mail.
async fn write_to_outbox(
    dir: &Path,
    from: &str,
    to: &Mailbox,
    mail: &Mail,
) -> Result<PathBuf, MailError> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| MailError::Outbox { path, source }
    };
    tokio::fs::create_dir_all(dir).await.map_err(io(dir))?;

    let now = chrono::Utc::now();
    let mut suffix = [0u8; 4];
    getrandom::fill(&mut suffix).map_err(|e| MailError::Outbox {
        path: dir.display().to_string(),
        source: std::io::Error::other(format!("cannot draw random bytes for a file name: {e}")),
    })?;
    let name = format!(
        "{}-{}.eml",
        now.format("%Y%m%dT%H%M%S"),
        hex::encode(suffix)
    );
    let path = dir.join(&name);
    let temp = dir.join(format!(".{name}.tmp"));

    // A line break in the subject would start a header of its own.
    let subject = mail.subject.replace(['\r', '\n'], " ");
    let body = mail.body.replace("\r\n", "\n").replace('\n', "\r\n");
    let text = format!(
        "From: {from}\r\nTo: {to}\r\nSubject: {subject}\r\nDate: {}\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n{body}",
        now.to_rfc2822(),
    );

    tokio::fs::write(&temp, text).await.map_err(io(&temp))?;
    if let Err(source) = tokio::fs::rename(&temp, &path).await {
        // Best effort: a stray temp file is harmless but untidy.
        let _ = tokio::fs::remove_file(&temp).await;
        return Err(io(&path)(source));
    }
    Ok(path)
}

/// `smtp host:port` (with the TLS mode) from an SMTP URL, leaving out the
/// user name and password. Only called on URLs lettre has accepted.
fn endpoint(url: &str) -> String {
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
fn redact(message: &str, url: &str) -> String {
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

    fn sample() -> Mail {
        Mail {
            to: "Ada <ada@example.org>".to_owned(),
            subject: "Verify your address".to_owned(),
            body: "Hello Ada,\n\nopen http://localhost:8080/verify?token=abc=&x=1 to go on.\n"
                .to_owned(),
        }
    }

    #[tokio::test]
    async fn outbox_writes_one_readable_file() {
        let dir = std::env::temp_dir().join(format!(
            "agon-mail-test-{}-{}",
            std::process::id(),
            hex::encode(
                chrono::Utc::now()
                    .timestamp_nanos_opt()
                    .unwrap_or(0)
                    .to_be_bytes()
            )
        ));
        let outbox = dir.join("outbox");
        let mailer = Mailer::outbox(outbox.clone());
        mailer.send(&sample()).await.unwrap();

        let entries: Vec<_> = std::fs::read_dir(&outbox)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(
            entries.len(),
            1,
            "exactly one file, no temp left: {entries:?}"
        );
        let path = &entries[0];
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(name.ends_with(".eml"), "{name}");
        let (stamp, rest) = name.split_once('-').unwrap();
        assert_eq!(stamp.len(), 15, "{name}");
        assert_eq!(stamp.as_bytes()[8], b'T', "{name}");
        assert_eq!(rest.len(), "0123abcd.eml".len(), "{name}");

        let text = std::fs::read_to_string(path).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.contains(&format!("From: {DEFAULT_FROM}\r\n")),
            "{head}"
        );
        assert!(head.contains("To: Ada <ada@example.org>\r\n"), "{head}");
        assert!(head.contains("Subject: Verify your address\r\n"), "{head}");
        assert!(head.contains("\r\nDate: "), "{head}");
        assert!(
            head.contains("Content-Type: text/plain; charset=utf-8"),
            "{head}"
        );
        assert_eq!(body.replace("\r\n", "\n"), sample().body);

        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn outbox_refuses_a_bad_recipient() {
        let dir = std::env::temp_dir().join("agon-mail-test-never-created");
        let mailer = Mailer::outbox(dir.clone());
        let mail = Mail {
            to: "not an address".to_owned(),
            ..sample()
        };
        let err = mailer.send(&mail).await.unwrap_err();
        assert!(matches!(err, MailError::BadAddress { .. }), "{err:?}");
        assert!(!dir.exists());
    }

    #[test]
    fn bad_smtp_urls_are_refused() {
        for url in [
            "",
            "not a url",
            "http://mail.example.org:25",
            "smtp://:secretpw@",
            "smtp://host:25?tls=sometimes",
        ] {
            let err = Mailer::smtp(url, "noreply@agon.local").unwrap_err();
            assert!(matches!(err, MailError::BadSmtpUrl(_)), "{url}: {err:?}");
            assert!(!err.to_string().contains("secretpw"), "{err}");
        }
    }

    #[tokio::test]
    async fn the_outbox_writes_the_configured_sender() {
        let dir = std::env::temp_dir().join(format!(
            "agon-mail-from-{}-{}",
            std::process::id(),
            chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
        ));
        let mailer = Mailer::outbox(dir.clone())
            .with_from("Agon Tests <tests@agon.example>")
            .unwrap();
        mailer.send(&sample()).await.unwrap();
        let path = std::fs::read_dir(&dir)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let text = std::fs::read_to_string(path).unwrap();
        assert!(
            text.starts_with("From: \"Agon Tests\" <tests@agon.example>\r\n")
                || text.starts_with("From: Agon Tests <tests@agon.example>\r\n"),
            "{text}"
        );
        assert!(Mailer::outbox(dir.clone()).with_from("nobody").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_default_sender_is_the_documented_one() {
        let readme = include_str!("../README.md");
        let row = readme
            .lines()
            .find(|line| line.starts_with("| `SERVICE_MAIL_FROM`"))
            .unwrap_or_default();
        assert!(row.contains(&format!("`{DEFAULT_FROM}`")), "{row}");
    }

    #[test]
    fn bad_from_address_is_refused() {
        let err = Mailer::smtp("smtp://localhost:25", "nobody").unwrap_err();
        assert!(matches!(err, MailError::BadAddress { .. }), "{err:?}");
    }

    #[test]
    fn credentials_never_show() {
        let mailer = Mailer::smtp("smtp://user:secretpw@host:25", "noreply@agon.local").unwrap();
        let described = mailer.describe();
        let debug = format!("{mailer:?}");
        assert_eq!(described, "smtp host:25");
        assert!(
            !debug.contains("secretpw") && !debug.contains("user"),
            "{debug}"
        );
        assert!(debug.contains("host:25"), "{debug}");
    }

    #[test]
    fn describe_names_the_tls_mode_and_default_port() {
        let cases = [
            ("smtp://mail.example.org", "smtp mail.example.org:25"),
            (
                "smtp://u:p@mail.example.org?tls=required",
                "smtp+starttls mail.example.org:587",
            ),
            ("smtps://u:p@mail.example.org", "smtps mail.example.org:465"),
            (
                "smtps://mail.example.org:2465/",
                "smtps mail.example.org:2465",
            ),
            ("smtp://[::1]:2525", "smtp [::1]:2525"),
            ("smtp://[::1]", "smtp [::1]:25"),
        ];
        for (url, expected) in cases {
            let mailer = Mailer::smtp(url, "noreply@agon.local").unwrap();
            assert_eq!(mailer.describe(), expected, "{url}");
        }
        let outbox = Mailer::outbox(PathBuf::from("/tmp/outbox"));
        assert_eq!(outbox.describe(), "outbox /tmp/outbox");
    }

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

    #[test]
    fn redact_hides_the_password() {
        assert_eq!(
            redact("failed near secretpw", "smtp://user:secretpw@host:25"),
            "failed near ***"
        );
        assert_eq!(redact("failed", "smtp://host:25"), "failed");
    }
}
