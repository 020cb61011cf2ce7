//! Plain-string text handling for the demo agents: hashing, content words,
//! claims and quotes, kept allocation-light because every demo reply runs it.

use std::borrow::Cow;
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use super::super::prompt::truncate_chars;

/// Only this much of any input is scanned, so huge inputs cost no more than typical ones.
pub(super) const SCAN_CHARS: usize = 4000;
pub(super) const QUOTE_CHARS: usize = 110;
/// Line labels that mark an agent's own claims in demo texts (the vote compares these).
pub(super) const CLAIM_LABELS: [&str; 5] = [
    "Thesis:",
    "Argument:",
    "Caveat:",
    "Main concern:",
    "Concession:",
];

/// FNV-1a with a final avalanche, because plain FNV's low bits barely move for
/// names that differ in one trailing letter.
pub(super) fn hash(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in parts.iter().flat_map(|part| part.bytes().chain([0xff])) {
        h = (h ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

pub(super) fn pick(seed: u64, len: usize) -> usize {
    (seed % len.max(1) as u64) as usize
}

/// Sorted and at most eight bytes each (see [`STOPWORD_KEYS`]).
pub(super) const STOPWORDS: [&str; 106] = [
    "about", "after", "against", "agent", "all", "also", "and", "any", "are", "argument", "be",
    "because", "been", "before", "being", "both", "but", "can", "caveat", "concern", "could",
    "demo", "did", "do", "does", "each", "either", "every", "for", "from", "get", "had", "has",
    "have", "how", "in", "into", "is", "it", "its", "just", "less", "main", "make", "may", "might",
    "more", "most", "must", "need", "needs", "neither", "nor", "not", "of", "on", "one", "only",
    "onto", "other", "our", "over", "own", "position", "proposal", "rather", "round", "same",
    "shall", "should", "some", "such", "than", "that", "the", "their", "them", "then", "there",
    "these", "thesis", "they", "this", "those", "to", "too", "under", "use", "very", "was", "way",
    "were", "what", "when", "where", "which", "while", "who", "why", "will", "with", "without",
    "would", "yes", "you", "your",
];

/// Stopwords packed big-endian into integers, which keeps their sort order:
/// content-word extraction runs on every token of every reply, and integer
/// compares are several times cheaper than string compares.
pub(super) const STOPWORD_KEYS: [u64; STOPWORDS.len()] = {
    let mut keys = [0; STOPWORDS.len()];
    let mut index = 0;
    while index < keys.len() {
        keys[index] = pack(STOPWORDS[index].as_bytes());
        index += 1;
    }
    keys
};

const fn pack(bytes: &[u8]) -> u64 {
    let (mut key, mut index) = (0, 0);
    while index < 8 {
        key <<= 8;
        if index < bytes.len() {
            key |= bytes[index] as u64;
        }
        index += 1;
    }
    key
}

fn is_stopword(word: &str) -> bool {
    word.len() <= 8 && STOPWORD_KEYS.binary_search(&pack(word.as_bytes())).is_ok()
}

/// Runs of letters and digits. Splitting on ASCII bytes only, instead of
/// decoding every char, halves the cost of the demo agents' text handling;
/// non-ASCII runs are trimmed of punctuation so `“Yes` reads as `Yes`.
pub(super) fn tokens(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < bytes.len() {
            let start = at;
            while bytes
                .get(at)
                .is_some_and(|&b| b.is_ascii_alphanumeric() || !b.is_ascii())
            {
                at += 1;
            }
            // Both ends sit next to ASCII bytes (or the text's ends): char boundaries.
            let token = text.get(start..at).unwrap_or_default();
            at += 1;
            let token = match token.is_ascii() {
                true => token,
                false => token.trim_matches(|c: char| !c.is_alphanumeric()),
            };
            if !token.is_empty() {
                return Some(token);
            }
        }
        None
    })
}

/// Distinct lowercase content words of `text` in order of appearance, skipping `exclude`.
pub(super) fn content_words(
    text: &str,
    min_len: usize,
    exclude: &[String],
    max: usize,
) -> Vec<String> {
    let mut seen: HashSet<Cow<'_, str>, BuildHasherDefault<Fnv>> = HashSet::default();
    let mut words = Vec::new();
    for token in tokens(truncate_chars(text, SCAN_CHARS)) {
        if words.len() >= max {
            break;
        }
        let ascii = token.is_ascii();
        if token.len() < min_len
            || (!ascii && token.chars().count() < min_len)
            || token.bytes().all(|b| b.is_ascii_digit())
        {
            continue;
        }
        // Most tokens are already lowercase; only allocate for the rest.
        let word = match !ascii || token.bytes().any(|b| b.is_ascii_uppercase()) {
            true => Cow::Owned(token.to_lowercase()),
            false => Cow::Borrowed(token),
        };
        if !is_stopword(&word)
            && !exclude.iter().any(|e| e.eq_ignore_ascii_case(&word))
            && !seen.contains(word.as_ref())
        {
            words.push(word.clone().into_owned());
            seen.insert(word);
        }
    }
    words
}

/// FNV-1a for the short-lived word sets: SipHash's flooding resistance buys
/// nothing on text the service produced or already bounded, and costs most of
/// the time.
pub(super) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Up to four topic words in the topic's own casing ("Mars"); three-letter
/// words only when nothing longer exists, since they are mostly verbs ("ban").
pub(super) fn topic_keywords(topic: &str) -> Vec<String> {
    let long = content_words(topic, 4, &[], 4);
    let words = if long.is_empty() {
        content_words(topic, 3, &[], 4)
    } else {
        long
    };
    let original = |word: String| {
        tokens(topic)
            .find(|t| t.to_lowercase() == word)
            .map_or(word, str::to_owned)
    };
    words.into_iter().map(original).collect()
}

/// The text after a leading `[demo agent …]` marker, if any.
pub(super) fn body(text: &str) -> &str {
    let text = text.trim_start();
    let after_marker = text
        .strip_prefix("[demo agent")
        .and_then(|rest| rest.split_once(']'));
    after_marker.map_or(text, |(_, rest)| rest.trim_start())
}

/// An agent's claims as (label, text): the labelled lines of a demo text,
/// otherwise its first sentences.
pub(super) fn claims(text: &str) -> Vec<(&'static str, &str)> {
    let text = truncate_chars(body(text), SCAN_CHARS);
    let labelled: Vec<(&'static str, &str)> = (text.lines())
        .filter_map(|line| {
            CLAIM_LABELS
                .iter()
                .find_map(|&l| Some((l, line.trim().strip_prefix(l)?.trim())))
        })
        .collect();
    if !labelled.is_empty() {
        return labelled;
    }
    sentences(text)
        .take(6)
        .map(|sentence| ("", sentence))
        .collect()
}

pub(super) fn sentences(text: &str) -> impl Iterator<Item = &str> {
    (text
        .lines()
        .flat_map(|line| line.split_inclusive(['.', '!', '?'])))
    .map(|s| s.trim().trim_start_matches(['-', '*', '•', '#', ' ']))
    .filter(|s| s.len() >= 12)
}

/// A short quotable fragment, without trailing punctuation so it sits inside quotes.
pub(super) fn quote(text: &str) -> String {
    let text = text.trim().trim_end_matches(['.', '!', '?', ' ']);
    let clipped = truncate_chars(text, QUOTE_CHARS);
    if clipped.len() < text.len() {
        format!("{clipped}…")
    } else {
        clipped.to_owned()
    }
}

pub(super) fn upper_first(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}
