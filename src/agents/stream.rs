//! Text as it is generated: the [`OnText`] a caller hands to
//! [`Agents::call_streaming`](super::Agents::call_streaming), and the
//! reading of a provider's server-sent events (`text/event-stream`) that
//! feeds it.
//!
//! Streamed text is a preview: the reply a call returns is the truth, and a
//! stream cut off before its end is a failed call (retried or failed over
//! like any other), never a shorter answer.

use std::sync::atomic::{AtomicU32, Ordering};

use super::error::{self, AgentError};
use super::route::Provider;

/// A piece of an agent's text as it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk<'a> {
    /// 1 for the first try of a call; a retry or the fallback starts the
    /// text afresh under the next number.
    pub attempt: u32,
    /// 0-based order of the piece within its attempt.
    pub seq: u32,
    pub text: &'a str,
}

/// Receives a call's text while it is generated. Called on the call's own
/// task: it must not block (drop rather than wait).
pub trait OnText: Send + Sync {
    fn chunk(&self, chunk: Chunk<'_>);
}

/// Ignores the text: calls nobody watches.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl OnText for Silent {
    fn chunk(&self, _chunk: Chunk<'_>) {}
}

/// Numbers the pieces of one call's attempts for its [`OnText`].
pub(super) struct Emitter<'a> {
    on_text: &'a dyn OnText,
    attempt: AtomicU32,
    seq: AtomicU32,
}

impl<'a> Emitter<'a> {
    pub fn new(on_text: &'a dyn OnText) -> Self {
        Self {
            on_text,
            attempt: AtomicU32::new(0),
            seq: AtomicU32::new(0),
        }
    }

    /// Starts the next attempt: its pieces replace the earlier ones.
    pub fn next_attempt(&self) {
        self.attempt.fetch_add(1, Ordering::AcqRel);
        self.seq.store(0, Ordering::Release);
    }

    pub fn text(&self, text: &str) {
        if text.is_empty() {
            return;
        }
        let chunk = Chunk {
            attempt: self.attempt.load(Ordering::Acquire).max(1),
            seq: self.seq.fetch_add(1, Ordering::AcqRel),
            text,
        };
        self.on_text.chunk(chunk);
    }
}

/// `text` cut into at most `count` pieces at white space, in order, which
/// together are `text`: how a demo agent "writes" its answer.
pub fn pieces(text: &str, count: usize) -> Vec<&str> {
    let size = text.len().div_ceil(count.max(1)).max(1);
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        // Cut after the next space, so that words stay whole.
        if let Some(space) = text[end..].find(' ') {
            end += space + 1;
        } else {
            end = text.len();
        }
        pieces.push(&text[start..end]);
        start = end;
    }
    pieces
}

/// The events of a server-sent event stream, one `(event, data)` per blank
/// line, fed with the body as its chunks arrive.
#[derive(Debug, Default)]
pub(super) struct SseReader {
    pending: Vec<u8>,
    event: String,
    data: String,
}

impl SseReader {
    /// Adds `bytes` and returns the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<(String, String)> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !self.data.is_empty() || !self.event.is_empty() {
                    events.push((
                        std::mem::take(&mut self.event),
                        std::mem::take(&mut self.data),
                    ));
                }
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => value.clone_into(&mut self.event),
                "data" => {
                    if !self.data.is_empty() {
                        self.data.push('\n');
                    }
                    self.data.push_str(value);
                }
                // Comments (`: keep-alive`), ids and retry hints.
                _ => {}
            }
        }
        events
    }
}

/// Reads a streamed 2xx `response`, handing each event's data to `on_event`
/// (which answers whether the stream is complete); a body that ends before
/// that, or breaks off, is a network failure.
pub(super) async fn read_events(
    provider: Provider,
    mut response: reqwest::Response,
    mut on_event: impl FnMut(&str, &str) -> Result<bool, AgentError>,
) -> Result<(), AgentError> {
    let mut reader = SseReader::default();
    loop {
        let chunk = response.chunk().await.map_err(|e| AgentError::Network {
            provider,
            detail: error::cap(&format!("the stream broke off: {}", e.without_url())),
        })?;
        let Some(chunk) = chunk else {
            return Err(AgentError::Network {
                provider,
                detail: "the stream ended before the answer was complete".to_owned(),
            });
        };
        for (event, data) in reader.feed(&chunk) {
            if on_event(&event, &data)? {
                return Ok(());
            }
        }
    }
}

/// Whether `response` streams server-sent events (else it is a whole JSON
/// answer: a server that ignored `stream: true`).
pub(super) fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_across_chunk_boundaries() {
        let mut reader = SseReader::default();
        assert!(reader.feed(b"event: content_block_delta\nda").is_empty());
        assert!(reader.feed(b"ta: {\"a\":1}\r\n").is_empty());
        let events = reader.feed(b"\r\n: ping\n\ndata: [DONE]\n\n");
        assert_eq!(
            events,
            vec![
                ("content_block_delta".to_owned(), "{\"a\":1}".to_owned()),
                (String::new(), "[DONE]".to_owned()),
            ]
        );
    }

    #[derive(Default)]
    struct Collect(std::sync::Mutex<Vec<(u32, u32, String)>>);

    impl OnText for Collect {
        fn chunk(&self, c: Chunk<'_>) {
            self.0
                .lock()
                .unwrap()
                .push((c.attempt, c.seq, c.text.to_owned()));
        }
    }

    #[test]
    fn pieces_cover_the_text_at_word_boundaries() {
        let text = "Rust's ownership model makes whole classes of bugs impossible, même ici.";
        let cut = pieces(text, 4);
        assert!(cut.len() > 1 && cut.len() <= 4, "{cut:?}");
        assert_eq!(cut.concat(), text);
        assert!(
            cut[..cut.len() - 1].iter().all(|p| p.ends_with(' ')),
            "{cut:?}"
        );
        assert_eq!(pieces("", 4), Vec::<&str>::new());
        assert_eq!(pieces("one", 4), vec!["one"]);
    }

    #[test]
    fn attempts_restart_the_numbering() {
        let seen = Collect::default();
        let emitter = Emitter::new(&seen);
        emitter.next_attempt();
        emitter.text("a");
        emitter.text("");
        emitter.text("b");
        emitter.next_attempt();
        emitter.text("c");
        assert_eq!(
            *seen.0.lock().unwrap(),
            vec![
                (1, 0, "a".to_owned()),
                (1, 1, "b".to_owned()),
                (2, 0, "c".to_owned())
            ]
        );
    }
}
