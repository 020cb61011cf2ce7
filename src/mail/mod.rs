//! Sends the service's emails (address verification, invitations): over SMTP
//! in production, or as `.eml` files in an outbox folder where no mail server
//! is at hand, so a local user can still open the links they carry
//! ([`outbox`]); [`pages`] holds where those links point and what they
//! show, [`smtp_url`] what may be said of an SMTP URL in logs.

mod outbox;
mod pages;
mod smtp_url;

pub use pages::{landing_page, served_url};

use std::path::PathBuf;
use std::sync::Arc;

use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use thiserror::Error;

use outbox::write_to_outbox;
use smtp_url::{endpoint, redact};

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

fn parse_mailbox(address: &str) -> Result<Mailbox, MailError> {
    address
        .parse()
        .map_err(|e: lettre::address::AddressError| MailError::BadAddress {
            address: address.to_owned(),
            reason: e.to_string(),
        })
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
        let readme = include_str!("../../README.md");
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
}
