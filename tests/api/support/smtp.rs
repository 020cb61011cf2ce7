//! A fake SMTP server on 127.0.0.1 that speaks the real wire protocol and
//! keeps every mail it accepts, so tests can read what the service sent
//! without a real mail server. It offers no TLS and no AUTH.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One mail as the fake server received it.
#[derive(Debug, Clone)]
pub struct ReceivedMail {
    /// The envelope sender (MAIL FROM), without angle brackets.
    pub from: String,
    /// The envelope recipients (RCPT TO), without angle brackets.
    pub to: Vec<String>,
    /// Headers and body as sent after DATA, dot-stuffing undone, lines
    /// ending in `\r\n`.
    pub data: String,
}

impl ReceivedMail {
    /// The header whose name is `name` (case-insensitive), unfolded; the
    /// first one if there are several.
    pub fn header(&self, name: &str) -> Option<String> {
        let (head, _) = split_head_body(&self.data);
        let mut found: Option<String> = None;
        for line in head.split("\r\n") {
            match found {
                Some(ref mut value) if line.starts_with([' ', '\t']) => {
                    value.push(' ');
                    value.push_str(line.trim());
                }
                Some(_) => break,
                None => {
                    if let Some((key, value)) = line.split_once(':')
                        && key.trim().eq_ignore_ascii_case(name)
                    {
                        found = Some(value.trim().to_owned());
                    }
                }
            }
        }
        found
    }

    /// The body after the first blank line, with its transfer encoding
    /// (quoted-printable or base64) undone, line breaks as `\n`, and the
    /// line break that ends the transmission removed.
    pub fn body(&self) -> String {
        let (_, raw) = split_head_body(&self.data);
        let encoding = self
            .header("Content-Transfer-Encoding")
            .unwrap_or_default()
            .to_ascii_lowercase();
        let decoded = match encoding.as_str() {
            "quoted-printable" => decode_quoted_printable(raw),
            "base64" => {
                let compact: String = raw.chars().filter(|c| !c.is_ascii_whitespace()).collect();
                match base64::engine::general_purpose::STANDARD.decode(compact) {
                    Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                    Err(e) => panic!("the fake SMTP server got a body that is not base64: {e}"),
                }
            }
            // 7bit, 8bit, binary or none: the text is the body.
            _ => raw.strip_suffix("\r\n").unwrap_or(raw).to_owned(),
        };
        decoded.replace("\r\n", "\n")
    }
}

/// Headers and raw body; the body is empty when there is no blank line.
fn split_head_body(data: &str) -> (&str, &str) {
    if let Some(rest) = data.strip_prefix("\r\n") {
        return ("", rest);
    }
    data.split_once("\r\n\r\n").unwrap_or((data, ""))
}

fn decode_quoted_printable(raw: &str) -> String {
    // The CRLF that ends the transmission is not part of the encoded text.
    let raw = raw.strip_suffix("\r\n").unwrap_or(raw);
    let joined = raw.replace("=\r\n", "");
    let bytes = joined.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'='
            && let Some(byte) = bytes
                .get(i + 1..i + 3)
                .and_then(|hex| std::str::from_utf8(hex).ok())
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A running fake SMTP server; it stops accepting connections when dropped.
pub struct FakeSmtp {
    port: u16,
    mails: Arc<Mutex<Vec<ReceivedMail>>>,
    accept: JoinHandle<()>,
}

impl Drop for FakeSmtp {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl FakeSmtp {
    /// Listens on a free port of 127.0.0.1 and serves every connection
    /// concurrently.
    pub async fn start() -> FakeSmtp {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("the fake SMTP server cannot bind 127.0.0.1:0: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("the fake SMTP server has no local address: {e}"))
            .port();
        let mails = Arc::new(Mutex::new(Vec::new()));
        let store = Arc::clone(&mails);
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    // Out of file descriptors and the like: let it pass.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    // A client that hangs up midway is the client's business;
                    // the test sees it as a mail that never arrived.
                    let _ = serve(stream, store).await;
                });
            }
        });
        FakeSmtp {
            port,
            mails,
            accept,
        }
    }

    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// Every mail accepted so far, in order of arrival.
    pub fn received(&self) -> Vec<ReceivedMail> {
        lock(&self.mails).clone()
    }

    /// Waits until at least `count` mails arrived or `timeout` passed, then
    /// returns what arrived.
    pub async fn wait_for(&self, count: usize, timeout: Duration) -> Vec<ReceivedMail> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let mails = self.received();
            if mails.len() >= count || tokio::time::Instant::now() >= deadline {
                return mails;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn lock(mails: &Mutex<Vec<ReceivedMail>>) -> std::sync::MutexGuard<'_, Vec<ReceivedMail>> {
    // A test that panicked while holding the lock left whole mails behind.
    mails
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn reply<W: AsyncWrite + Unpin>(writer: &mut W, text: &str) -> std::io::Result<()> {
    writer.write_all(text.as_bytes()).await?;
    writer.write_all(b"\r\n").await?;
    writer.flush().await
}

/// Reads one line without its line break; `None` when the client hung up.
async fn read_line<R: AsyncBufReadExt + Unpin>(reader: &mut R) -> std::io::Result<Option<String>> {
    let mut buf = Vec::new();
    if reader.read_until(b'\n', &mut buf).await? == 0 {
        return Ok(None);
    }
    if buf.ends_with(b"\n") {
        buf.pop();
    }
    if buf.ends_with(b"\r") {
        buf.pop();
    }
    Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
}

/// The address inside `<…>` after a `MAIL FROM:` or `RCPT TO:`, ignoring
/// parameters such as `SMTPUTF8` or `BODY=8BITMIME`.
fn path_argument(argument: &str) -> String {
    let argument = argument.trim();
    match (argument.find('<'), argument.find('>')) {
        (Some(start), Some(end)) if start < end => argument[start + 1..end].to_owned(),
        _ => argument
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned(),
    }
}

async fn serve(stream: TcpStream, mails: Arc<Mutex<Vec<ReceivedMail>>>) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    reply(&mut write, "220 127.0.0.1 fake SMTP ready").await?;

    let mut from: Option<String> = None;
    let mut to: Vec<String> = Vec::new();
    while let Some(line) = read_line(&mut reader).await? {
        let verb = line
            .split(' ')
            .next()
            .unwrap_or_default()
            .to_ascii_uppercase();
        let upper = line.to_ascii_uppercase();
        match verb.as_str() {
            "EHLO" => {
                from = None;
                to.clear();
                reply(
                    &mut write,
                    "250-127.0.0.1 greets you\r\n250-8BITMIME\r\n250-SMTPUTF8\r\n250 OK",
                )
                .await?;
            }
            "HELO" => {
                from = None;
                to.clear();
                reply(&mut write, "250 127.0.0.1").await?;
            }
            "MAIL" if upper.starts_with("MAIL FROM:") => {
                from = Some(path_argument(&line["MAIL FROM:".len()..]));
                to.clear();
                reply(&mut write, "250 OK").await?;
            }
            "RCPT" if upper.starts_with("RCPT TO:") => {
                if from.is_none() {
                    reply(&mut write, "503 MAIL FROM first").await?;
                } else {
                    to.push(path_argument(&line["RCPT TO:".len()..]));
                    reply(&mut write, "250 OK").await?;
                }
            }
            "DATA" => {
                let Some(sender) = from.take().filter(|_| !to.is_empty()) else {
                    reply(&mut write, "503 MAIL FROM and RCPT TO first").await?;
                    continue;
                };
                reply(&mut write, "354 End data with <CR><LF>.<CR><LF>").await?;
                let mut data = String::new();
                loop {
                    let Some(line) = read_line(&mut reader).await? else {
                        // Hung up before the end of the data: nothing was sent.
                        return Ok(());
                    };
                    if line == "." {
                        break;
                    }
                    data.push_str(line.strip_prefix('.').unwrap_or(&line));
                    data.push_str("\r\n");
                }
                lock(&mails).push(ReceivedMail {
                    from: sender,
                    to: std::mem::take(&mut to),
                    data,
                });
                reply(&mut write, "250 OK: queued").await?;
            }
            "RSET" => {
                from = None;
                to.clear();
                reply(&mut write, "250 OK").await?;
            }
            "NOOP" => reply(&mut write, "250 OK").await?,
            "QUIT" => {
                reply(&mut write, "221 Bye").await?;
                return Ok(());
            }
            _ => reply(&mut write, "502 Command not implemented").await?,
        }
    }
    Ok(())
}
