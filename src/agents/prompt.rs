//! What real LLM providers are told for each [`Turn`], and how their
//! free-text synthesis and vote replies are read back into structured data.

use std::fmt::Write as _;

use agon_aggregates::debate::VoteChoice;

use super::turn::{Position, Task, Turn};

/// Lists in parsed replies are capped so one verbose model cannot bloat the event log.
const MAX_ITEMS: usize = 10;
const MAX_ITEM_CHARS: usize = 500;
const MAX_SUMMARY_CHARS: usize = 4000;
/// Each quoted text is capped so a prompt stays bounded however long the debate ran.
const MAX_QUOTED_CHARS: usize = 6000;

/// The two halves of a chat prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub system: String,
    pub user: String,
}

impl Prompt {
    /// A provider-neutral token estimate (whitespace-separated words).
    pub fn word_count(&self) -> u64 {
        word_count(&self.system) + word_count(&self.user)
    }
}

/// Whitespace-separated words, counted on bytes: `split_whitespace` decodes
/// UTF-8 and dominated the demo agents' run time. Non-ASCII spaces are rare
/// enough in prompts not to matter for an estimate.
pub fn word_count(text: &str) -> u64 {
    let space = |byte: u8| byte == b' ' || byte.wrapping_sub(b'\t') < 5;
    let bytes = text.as_bytes();
    let first = bytes.first().is_some_and(|&byte| !space(byte));
    // Branch-free over zipped byte pairs so the compiler can vectorise it.
    let pairs = bytes.iter().zip(bytes.get(1..).unwrap_or_default());
    let starts: usize = pairs
        .map(|(&a, &b)| usize::from(space(a) & !space(b)))
        .sum();
    (starts + usize::from(first)) as u64
}

/// A drafted consensus as parsed from a synthesis reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synthesis {
    pub summary: String,
    pub key_points: Vec<String>,
}

/// A vote as parsed from a vote reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedVote {
    pub choice: VoteChoice,
    pub confidence: f64,
    pub reasons: Vec<String>,
    pub modifications: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    #[error("synthesis reply has no SUMMARY: line")]
    MissingSummary,
    #[error("synthesis reply has an empty summary")]
    EmptySummary,
    #[error("vote reply has no VOTE: line")]
    MissingVote,
    #[error("vote reply has an unrecognised VOTE: {0:?}")]
    UnknownVote(String),
    #[error("vote reply has no CONFIDENCE: line")]
    MissingConfidence,
    #[error("vote reply has an unreadable CONFIDENCE: {0:?}")]
    InvalidConfidence(String),
}

/// The longest prefix of `text` with at most `max_chars` characters.
pub(crate) fn truncate_chars(text: &str, max_chars: usize) -> &str {
    // No char has fewer than one byte, so short texts skip the O(n) walk.
    if text.len() <= max_chars {
        return text;
    }
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

pub fn render(turn: &Turn) -> Prompt {
    let system = format!(
        "You are {}, one of several agents in a structured debate. Argue in your own voice, \
         be concrete and brief (under 300 words), engage with what the other agents actually \
         wrote, and when a reply format is given, follow it exactly.",
        turn.agent
    );
    let mut user = format!("Topic: {}\n", turn.topic.trim());
    if let Some(context) = turn.context.as_deref().filter(|c| !c.trim().is_empty()) {
        let _ = writeln!(
            user,
            "Context: {}",
            truncate_chars(context.trim(), MAX_QUOTED_CHARS)
        );
    }
    let _ = writeln!(
        user,
        "Round {} of {}. Phase: {}.\n",
        turn.round,
        turn.rounds,
        turn.task.phase()
    );
    match &turn.task {
        Task::Opening => user.push_str(
            "State your position on the topic: your stance in one sentence, then two to four \
             concrete arguments, then the main caveat or condition you attach to it.",
        ),
        Task::Critique { targets } => {
            user.push_str("The other agents' latest positions:\n\n");
            push_positions(&mut user, targets);
            user.push_str(
                "Critique each position in turn, under a line naming its agent. Quote or cite the \
                 specific claim you challenge, say what is weak, unsupported or missing from your \
                 point of view, and be fair about what is right.",
            );
        }
        Task::Revision { own, critiques } => {
            let _ = write!(
                user,
                "Your current position:\n{}\n\nCritiques the other agents wrote:\n\n",
                truncate_chars(own, MAX_QUOTED_CHARS)
            );
            push_positions(&mut user, critiques);
            user.push_str(
                "Revise your position. Keep what still holds, concede what the critiques got \
                 right (name who made each point you accept or reject), and state clearly what \
                 you change. Reply with the full revised position.",
            );
        }
        Task::Custom { phase, transcript } => {
            user.push_str("The debate so far:\n\n");
            push_positions(&mut user, transcript);
            let _ = write!(
                user,
                "Contribute to the \"{phase}\" phase: do what that phase calls for, building on \
                 the transcript above rather than repeating it."
            );
        }
        Task::Synthesis { positions } => {
            user.push_str("Every agent's latest position:\n\n");
            push_positions(&mut user, positions);
            user.push_str(
                "Draft a consensus the agents could vote on: a fair summary of where they agree \
                 and what remains disputed, and the key points, attributing them to agents where \
                 useful. Reply exactly in this format:\n\n\
                 SUMMARY: <one paragraph>\n\
                 KEY POINTS:\n- <point>\n- <point>",
            );
        }
        Task::Vote {
            summary,
            key_points,
            own,
        } => {
            let _ = write!(
                user,
                "Proposed consensus:\n{}\n\nKey points:\n",
                truncate_chars(summary, MAX_QUOTED_CHARS)
            );
            for point in key_points.iter().take(MAX_ITEMS * 2) {
                let _ = writeln!(user, "- {}", truncate_chars(point, MAX_ITEM_CHARS));
            }
            let _ = write!(
                user,
                "\nYour latest position:\n{}\n\n",
                truncate_chars(own, MAX_QUOTED_CHARS)
            );
            user.push_str(
                "Vote on the proposed consensus, judging it against your own position. Reply \
                 exactly in this format:\n\n\
                 VOTE: agree | agree_with_modifications | disagree\n\
                 CONFIDENCE: <number between 0 and 1>\n\
                 REASONS:\n- <reason>\n\
                 MODIFICATIONS:\n- <change you require> (only for agree_with_modifications)",
            );
        }
    }
    Prompt { system, user }
}

fn push_positions(user: &mut String, positions: &[Position]) {
    if positions.is_empty() {
        user.push_str("(none)\n\n");
    }
    for position in positions {
        let _ = write!(
            user,
            "### {}\n{}\n\n",
            position.agent,
            truncate_chars(position.content.trim(), MAX_QUOTED_CHARS)
        );
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    Summary,
    KeyPoints,
    Vote,
    Confidence,
    Reasons,
    Modifications,
}

/// Longer spellings come first so `reasons` is not read as `reason` + "s".
const LABELS: &[(&str, Label)] = &[
    ("key points", Label::KeyPoints),
    ("key_points", Label::KeyPoints),
    ("key-points", Label::KeyPoints),
    ("keypoints", Label::KeyPoints),
    ("summary", Label::Summary),
    ("vote", Label::Vote),
    ("confidence", Label::Confidence),
    ("reasons", Label::Reasons),
    ("reason", Label::Reasons),
    ("modifications", Label::Modifications),
    ("modification", Label::Modifications),
];

/// Recognises `LABEL: value`, `**Label:** value`, `## Label` and a bare `LABEL`
/// line; anything else (including prose that merely starts with a label
/// word) is not a label.
fn labelled(line: &str) -> Option<(Label, &str)> {
    let line = line.trim_start_matches('#').trim_start();
    let line = line.trim_start_matches(['*', '_']).trim_start();
    LABELS.iter().find_map(|&(name, label)| {
        let head = line.get(..name.len())?;
        if !head.eq_ignore_ascii_case(name) {
            return None;
        }
        let after = &line[name.len()..];
        if after.chars().next().is_some_and(char::is_alphanumeric) {
            return None;
        }
        let after = after.trim_start_matches(['*', '_', ' ', '\t']);
        if let Some(value) = after.strip_prefix(':') {
            return Some((label, value.trim().trim_matches(['*', '_', '`']).trim()));
        }
        after.trim().is_empty().then_some((label, ""))
    })
}

/// The text of a bullet (`-`, `*`, `•`, `+`, `1.`, `1)`), or None for prose.
fn bullet(line: &str) -> Option<&str> {
    let rest = if let Some(rest) = line.strip_prefix('•') {
        rest
    } else if let Some(rest) = line.strip_prefix(['-', '*', '+', '–']) {
        rest.starts_with(char::is_whitespace).then_some(rest)?
    } else {
        let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 || digits > 3 {
            return None;
        }
        let rest = line[digits..].strip_prefix(['.', ')'])?;
        rest.starts_with(char::is_whitespace).then_some(rest)?
    };
    Some(rest.trim())
}

fn push_item(items: &mut Vec<String>, item: &str) {
    let item = item.trim();
    if !item.is_empty() && items.len() < MAX_ITEMS {
        items.push(truncate_chars(item, MAX_ITEM_CHARS).to_owned());
    }
}

pub fn parse_synthesis(text: &str) -> Result<Synthesis, ParseError> {
    let mut summary: Option<String> = None;
    let mut key_points = Vec::new();
    let mut section = None;
    for line in text.lines().map(str::trim) {
        if let Some((label, value)) = labelled(line) {
            section = match label {
                Label::Summary if summary.is_none() => {
                    summary = Some(value.to_owned());
                    Some(Label::Summary)
                }
                Label::KeyPoints => {
                    push_item(&mut key_points, bullet(value).unwrap_or(value));
                    Some(Label::KeyPoints)
                }
                _ => None,
            };
            continue;
        }
        match (section, summary.as_mut()) {
            (Some(Label::Summary), Some(summary))
                if !line.is_empty() && summary.len() < MAX_SUMMARY_CHARS =>
            {
                if !summary.is_empty() {
                    summary.push(' ');
                }
                summary.push_str(line);
            }
            (Some(Label::KeyPoints), _) => {
                if let Some(item) = bullet(line) {
                    push_item(&mut key_points, item);
                }
            }
            _ => {}
        }
    }
    let summary = summary.ok_or(ParseError::MissingSummary)?;
    let summary = truncate_chars(summary.trim(), MAX_SUMMARY_CHARS).to_owned();
    if summary.is_empty() {
        return Err(ParseError::EmptySummary);
    }
    Ok(Synthesis {
        summary,
        key_points,
    })
}

pub fn parse_vote(text: &str) -> Result<ParsedVote, ParseError> {
    let mut choice = None;
    let mut confidence = None;
    let mut reasons = Vec::new();
    let mut modifications = Vec::new();
    let mut section = None;
    for line in text.lines().map(str::trim) {
        if let Some((label, value)) = labelled(line) {
            section = Some(label);
            match label {
                Label::Vote if choice.is_none() => choice = Some(parse_choice(value)?),
                Label::Confidence if confidence.is_none() => {
                    confidence = Some(parse_confidence(value)?);
                }
                Label::Reasons => push_item(&mut reasons, bullet(value).unwrap_or(value)),
                Label::Modifications => {
                    push_item(&mut modifications, bullet(value).unwrap_or(value));
                }
                _ => {}
            }
            continue;
        }
        let list = match section {
            Some(Label::Reasons) => &mut reasons,
            Some(Label::Modifications) => &mut modifications,
            _ => continue,
        };
        if let Some(item) = bullet(line) {
            push_item(list, item);
        }
    }
    Ok(ParsedVote {
        choice: choice.ok_or(ParseError::MissingVote)?,
        confidence: confidence.ok_or(ParseError::MissingConfidence)?,
        reasons,
        modifications,
    })
}

fn parse_choice(value: &str) -> Result<VoteChoice, ParseError> {
    let words: Vec<String> = value
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(3)
        .map(str::to_ascii_lowercase)
        .collect();
    match words
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["agree", "with", modifications, ..] if modifications.starts_with("modification") => {
            Ok(VoteChoice::AgreeWithModifications)
        }
        ["agree", ..] => Ok(VoteChoice::Agree),
        ["disagree", ..] => Ok(VoteChoice::Disagree),
        _ => Err(ParseError::UnknownVote(
            truncate_chars(value, 80).to_owned(),
        )),
    }
}

fn parse_confidence(value: &str) -> Result<f64, ParseError> {
    let invalid = || ParseError::InvalidConfidence(truncate_chars(value, 80).to_owned());
    let start = value.trim_start_matches(|c: char| !(c.is_ascii_digit() || "+-.".contains(c)));
    let number_len = start
        .find(|c: char| !(c.is_ascii_digit() || "+-.".contains(c)))
        .unwrap_or(start.len());
    let mut number: f64 = start[..number_len].parse().map_err(|_| invalid())?;
    if start[number_len..].trim_start().starts_with('%') {
        number /= 100.0;
    }
    if !number.is_finite() {
        return Err(invalid());
    }
    Ok(number.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests;
