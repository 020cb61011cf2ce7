//! The outbox: each mail written whole as one `.eml` file into a folder,
//! for where no mail server is at hand.

use std::path::{Path, PathBuf};

use lettre::message::Mailbox;

use super::{Mail, MailError};

/// Writes `mail` as one `.eml` file and returns its path. The file appears
/// whole or not at all, so a reader watching the folder never sees half a mail.
pub(super) async fn write_to_outbox(
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
