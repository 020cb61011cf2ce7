//! Built-in demo agents: deterministic, offline debaters so a whole debate
//! can run without provider keys, network, clock or randomness.

use std::fmt::Write as _;

use agon_aggregates::debate::VoteChoice;

use super::prompt::{self, truncate_chars};
use super::turn::{Position, Reply, Task, Turn, Usage};
use text::{
    SCAN_CHARS, body, claims, content_words, hash, pick, quote, sentences, tokens, topic_keywords,
    upper_first,
};
use voices::{VOICES, Voice, detect_focus, detect_stance, stance_index, stance_name};

mod text;
mod voices;

const MAX_LISTED: usize = 12;
const NO_KEYWORD: &str = "the proposal";

/// True for `demo` and `demo-<anything>` (the prefix in any case).
pub fn is_demo(name: &str) -> bool {
    let (prefix, rest) = name.split_at_checked(4).unwrap_or(("", ""));
    prefix.eq_ignore_ascii_case("demo")
        && (rest.is_empty() || (rest.len() > 1 && rest.starts_with('-')))
}

/// A demo agent's reply: the same turn always yields the same bytes.
pub fn respond(turn: &Turn) -> Reply {
    let me = Speaker::new(turn);
    let content = match &turn.task {
        Task::Opening => me.opening(),
        Task::Critique { targets } => me.critique(targets),
        Task::Revision { own, critiques } => me.revision(own, critiques),
        Task::Custom { phase, transcript } => me.custom(phase, transcript),
        Task::Synthesis { positions } => me.synthesis(positions),
        Task::Vote {
            summary,
            key_points,
            own,
        } => me.vote(summary, key_points, own),
    };
    let usage = Usage {
        provider: "demo".to_owned(),
        model: "demo-v1".to_owned(),
        tokens_in: prompt::render(turn).word_count(),
        tokens_out: prompt::word_count(&content),
        latency_ms: 0,
        fallback: false,
    };
    Reply { content, usage }
}

struct Speaker<'t> {
    turn: &'t Turn,
    stance: usize,
    voice: &'static Voice,
    seed: u64,
    keywords: Vec<String>,
}

impl<'t> Speaker<'t> {
    fn new(turn: &'t Turn) -> Self {
        let stance = stance_index(&turn.topic, &turn.agent);
        let seed = hash(&[turn.topic.trim(), &turn.agent]);
        Speaker {
            turn,
            stance,
            voice: &VOICES[stance],
            seed,
            keywords: topic_keywords(&turn.topic),
        }
    }

    /// Fills `{k}` with a topic word chosen per agent and template slot.
    fn fill(&self, template: &str, salt: u32) -> String {
        let salted = self.seed.rotate_left(salt * 7) ^ u64::from(salt);
        let keyword = self.keywords.get(pick(salted, self.keywords.len()));
        template.replace("{k}", keyword.map_or(NO_KEYWORD, String::as_str))
    }

    fn header(&self, what: &str) -> String {
        let (turn, label) = (self.turn, self.voice.label);
        let (agent, topic, round, rounds) =
            (&turn.agent, quote(&turn.topic), turn.round, turn.rounds);
        format!("[demo agent {agent}] {what} on \"{topic}\" (round {round} of {rounds}): {label}.")
    }

    /// The stance's thesis, two of its arguments (picked by hash) and its caveat.
    fn core_claims(&self) -> String {
        let first = pick(self.seed, 4);
        let second = (first + 1 + pick(self.seed >> 8, 3)) % 4;
        let [thesis, one, two] = [
            self.voice.thesis,
            self.voice.arguments[first],
            self.voice.arguments[second],
        ];
        let (thesis, one, two) = (self.fill(thesis, 0), self.fill(one, 1), self.fill(two, 2));
        format!(
            "Thesis: {thesis}\nArgument: {one}\nArgument: {two}\n{}",
            self.fill(self.voice.caveat, 3)
        )
    }

    fn opening(&self) -> String {
        let mut text = format!(
            "{}\n{}",
            self.header("Opening position"),
            self.core_claims()
        );
        if let Some(context) = self
            .turn
            .context
            .as_deref()
            .filter(|c| !c.trim().is_empty())
        {
            let _ = write!(
                text,
                "\nI read this against the stated context: \"{}\".",
                quote(context)
            );
        }
        text
    }

    fn critique(&self, targets: &[Position]) -> String {
        let mut text = self.header("Critique");
        for (index, target) in targets.iter().take(MAX_LISTED).enumerate() {
            let their_claims = claims(&target.content);
            let salt = hash(&[&target.agent]) ^ u64::from(self.turn.round);
            let claim = (their_claims.get(pick(self.seed ^ salt, their_claims.len().min(4))))
                .map_or_else(|| quote(body(&target.content)), |(_, claim)| quote(claim));
            let their_stance = detect_stance(&target.content);
            let complaint = self.fill(self.voice.complaints[pick(salt, 2)], index as u32 + 1);
            let label = self.voice.label;
            let judgement = match their_stance == Some(self.stance) {
                true => format!("We share a {label} stance, yet {complaint}."),
                false => format!(
                    "{}; that is the weak spot from where I stand ({label}).",
                    upper_first(&complaint)
                ),
            };
            let lowered = truncate_chars(&target.content, SCAN_CHARS).to_lowercase();
            let coverage = match self.voice.focus.iter().any(|stem| lowered.contains(stem)) {
                true => format!(
                    "It touches on {}, but only in passing.",
                    self.voice.focus_topic
                ),
                false => format!("Nothing in it addresses {}.", self.voice.focus_topic),
            };
            let cited = match claim.is_empty() {
                true => "you state nothing I can quote".to_owned(),
                false => format!("you write \"{claim}\""),
            };
            let (agent, stance) = (&target.agent, stance_name(their_stance));
            let _ = write!(
                text,
                "\nOn {agent} ({stance}): {cited}. {judgement} {coverage}"
            );
        }
        match targets.len() {
            0 => text.push_str("\nThere is no other position to critique this round."),
            n if n > MAX_LISTED => {
                let _ = write!(text, "\n(I leave {} more positions aside.)", n - MAX_LISTED);
            }
            _ => {}
        }
        text
    }

    /// What a critic said about this agent: the sentences after our name that do
    /// not quote us (the quote is our own text, not their point).
    fn said_about_me<'c>(&self, critique: &'c str) -> Vec<&'c str> {
        let text = truncate_chars(body(critique), SCAN_CHARS);
        let about_me = (text
            .lines()
            .find_map(|line| line.find(&self.turn.agent).map(|at| &line[at..])))
        .unwrap_or(text);
        let all: Vec<&str> = sentences(about_me).take(6).collect();
        let theirs: Vec<&str> = all
            .iter()
            .copied()
            .filter(|s| !s.contains(['"', '“']))
            .collect();
        if theirs.is_empty() {
            all.into_iter().take(1).collect()
        } else {
            theirs
        }
    }

    /// Keeps the stance, concedes to the first critic (in hash order) arguing from
    /// another stance, rebuts the rest, and carries earlier concessions forward.
    fn revision(&self, own: &str, critiques: &[Position]) -> String {
        let mut text = format!(
            "{}\n{}",
            self.header("Revised position"),
            self.core_claims()
        );
        let mut conceded: Option<String> = None;
        let start = pick(self.seed ^ u64::from(self.turn.round), critiques.len());
        for offset in 0..critiques.len().min(MAX_LISTED) {
            let critique = &critiques[(start + offset) % critiques.len()];
            let said = self.said_about_me(&critique.content);
            let Some(first) = said.first() else { continue };
            let focus = detect_focus(&said.join(" "));
            let reply = if conceded.is_none() && focus != Some(self.stance) {
                let change = match focus {
                    Some(index) => self.fill(VOICES[index].concession, 4),
                    None => self.fill("I will state my assumptions on {k} explicitly.", 4),
                };
                let reply = format!("Fair point, and I change my position: {change}");
                conceded = Some(change);
                reply
            } else {
                self.fill(self.voice.rebuttal, 5)
            };
            // The clause before a semicolon is the claim itself; the rest is commentary.
            let claim = quote(first.split(';').next().unwrap_or(first));
            let _ = write!(
                text,
                "\nResponse to {}: they wrote \"{claim}\". {reply}",
                critique.agent
            );
        }
        match &conceded {
            Some(change) => {
                let _ = write!(text, "\nConcession: {change}");
            }
            None if critiques.is_empty() => {
                text.push_str("\nNo critiques reached me this round; my position stands.")
            }
            None => {}
        }
        let earlier = claims(own)
            .into_iter()
            .filter(|&(label, claim)| label == "Concession:" && conceded.as_deref() != Some(claim));
        for (_, claim) in earlier.take(2) {
            let _ = write!(text, "\nConcession: {claim}");
        }
        text
    }

    fn custom(&self, phase: &str, transcript: &[Position]) -> String {
        let phase = quote(phase);
        let mut text = self.header(&format!("Contribution to the \"{phase}\" phase"));
        match transcript.last() {
            Some(latest) => {
                let claim = claims(&latest.content)
                    .first()
                    .map_or(String::new(), |(_, claim)| quote(claim));
                let (count, agent) = (transcript.len(), &latest.agent);
                let _ = write!(
                    text,
                    "\nThe transcript has {count} entries; the latest, from {agent}, says \"{claim}\"."
                );
            }
            None => text.push_str("\nThe transcript is empty so far."),
        }
        let _ = write!(
            text,
            "\n{}",
            self.fill(&self.voice.custom.replace("{p}", &phase), 6)
        );
        text
    }

    /// Every agent's thesis plus a hash-picked share of its other claims (ten key
    /// points at most), and a summary grouping agents by stance with the words
    /// their claims share.
    fn synthesis(&self, positions: &[Position]) -> String {
        let positions = &positions[..positions.len().min(10)];
        let per_position = (10 / positions.len().max(1)).clamp(1, 3);
        let mut groups: [Vec<String>; 3] = Default::default();
        let mut key_points = String::new();
        let mut all_words: Vec<(String, usize)> = Vec::new();
        for position in positions {
            let (agent, stance) = (&position.agent, detect_stance(&position.content));
            let group = match stance {
                Some(0 | 1) => 0,
                Some(2) | None => 1,
                Some(_) => 2,
            };
            groups[group].push(format!("{agent} ({})", stance_name(stance)));
            let found = claims(&position.content);
            let Some(((_, thesis), rest)) = found.split_first() else {
                continue;
            };
            let _ = write!(
                key_points,
                "\n- {agent} ({}): {}",
                stance_name(stance),
                quote(thesis)
            );
            let start = pick(
                hash(&[&self.turn.topic, &self.turn.agent, agent]),
                rest.len(),
            );
            for offset in 0..rest.len().min(per_position - 1) {
                let _ = write!(
                    key_points,
                    "\n- {agent}: {}",
                    quote(rest[(start + offset) % rest.len()].1)
                );
            }
            let claim_text = found
                .iter()
                .map(|(_, claim)| *claim)
                .collect::<Vec<_>>()
                .join(" ");
            let words = content_words(&claim_text, 4, &self.keywords, 60);
            let offset = all_words.len();
            all_words.extend(
                words
                    .into_iter()
                    .enumerate()
                    .map(|(at, word)| (word, offset + at)),
            );
        }
        // Words in at least two positions, most widespread first, ties by first use.
        all_words.sort_unstable();
        let mut shared: Vec<(usize, usize, &str)> = Vec::new();
        for same in all_words
            .chunk_by(|a, b| a.0 == b.0)
            .filter(|same| same.len() >= 2)
        {
            shared.push((usize::MAX - same.len(), same[0].1, &same[0].0));
        }
        shared.sort_unstable();
        let shared: Vec<&str> = shared.iter().take(4).map(|&(_, _, word)| word).collect();
        let shared = if shared.is_empty() {
            "little beyond the topic".to_owned()
        } else {
            shared.join(", ")
        };
        let [favour, middle, critical] = groups.map(|g| {
            if g.is_empty() {
                "none".to_owned()
            } else {
                g.join(", ")
            }
        });
        let (agent, count, topic) = (&self.turn.agent, positions.len(), quote(&self.turn.topic));
        format!(
            "[demo agent {agent}] Draft consensus assembled from {count} positions.\n\
             SUMMARY: {count} agents debated \"{topic}\". Leaning in favour: {favour}. Middle ground: {middle}. \
             Sceptical or risk-focused: {critical}. Shared ground: {shared}. The draft keeps every agent's thesis \
             and up to {} of its other points; anything left out can be raised in the vote.\nKEY POINTS:{key_points}",
            per_position - 1
        )
    }

    /// A claim of the agent's own position counts as reflected when at least half
    /// of its distinctive words appear in the draft; the share reflected, read
    /// through the stance's thresholds, decides the vote.
    fn vote(&self, summary: &str, key_points: &[String], own: &str) -> String {
        // One lowercased copy of the draft and a sorted list of its words: far
        // cheaper than a set of owned strings, which dominated the vote's cost.
        let mut draft = truncate_chars(summary, SCAN_CHARS).to_lowercase();
        for point in key_points.iter().take(20) {
            draft.push('\n');
            draft.push_str(&truncate_chars(point, 600).to_lowercase());
        }
        let mut draft_words: Vec<&str> = tokens(&draft).filter(|word| word.len() >= 4).collect();
        draft_words.sort_unstable();
        draft_words.dedup();
        let (mut reflected, mut missing, mut concern_reflected) = (Vec::new(), Vec::new(), None);
        for (label, claim) in claims(own) {
            let words = content_words(claim, 4, &self.keywords, 20);
            let hits = (words.iter())
                .filter(|w| draft_words.binary_search(&w.as_str()).is_ok())
                .count();
            if words.is_empty() {
                continue;
            }
            let is_reflected = hits * 2 >= words.len();
            if label == "Main concern:" {
                concern_reflected = Some(is_reflected);
            }
            if is_reflected {
                reflected.push(claim)
            } else {
                missing.push(claim)
            }
        }
        let total = reflected.len() + missing.len();
        let coverage = if total == 0 {
            0.0
        } else {
            reflected.len() as f64 / total as f64
        };
        let critical = self.voice.concern_decides;
        let concern_reflected = concern_reflected.unwrap_or(coverage >= 0.5);
        let (choice, confidence) = if critical && !concern_reflected {
            (VoteChoice::Disagree, 0.55 + 0.35 * (1.0 - coverage))
        } else if coverage >= self.voice.agree_at || missing.is_empty() {
            (VoteChoice::Agree, 0.6 + 0.35 * coverage)
        } else if coverage >= self.voice.modify_at {
            (VoteChoice::AgreeWithModifications, 0.45 + 0.35 * coverage)
        } else {
            (VoteChoice::Disagree, 0.55 + 0.35 * (1.0 - coverage))
        };
        let choice_word = match choice {
            VoteChoice::Agree => "agree",
            VoteChoice::AgreeWithModifications => "agree_with_modifications",
            VoteChoice::Disagree => "disagree",
        };
        let (agent, label, percent) = (&self.turn.agent, self.voice.label, coverage * 100.0);
        let mut text = format!(
            "[demo agent {agent}] Vote on the draft consensus, from a {label} standpoint.\nVOTE: {choice_word}\n\
             CONFIDENCE: {confidence:.2}\nREASONS:\n- {} of my {total} points are reflected in the draft ({percent:.0}% coverage).",
            reflected.len()
        );
        for (what, claim) in [
            ("Reflected", reflected.first()),
            ("Missing", missing.first()),
        ] {
            if let Some(claim) = claim {
                let _ = write!(text, "\n- {what}: \"{}\".", quote(claim));
            }
        }
        if critical {
            let verdict = if concern_reflected {
                "is reflected"
            } else {
                "is missing, and that decides my vote"
            };
            let _ = write!(text, "\n- As a {label} agent, my main concern {verdict}.");
        }
        if choice == VoteChoice::AgreeWithModifications {
            text.push_str("\nMODIFICATIONS:");
            for claim in missing.iter().take(3) {
                let _ = write!(text, "\n- Add: \"{}\".", quote(claim));
            }
        }
        text
    }
}

#[cfg(test)]
mod tests;
