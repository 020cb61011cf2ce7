//! Built-in demo agents: deterministic, offline debaters so a whole debate
//! can run without provider keys, network, clock or randomness.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt::Write as _;

use agon_aggregates::debate::VoteChoice;

use super::prompt::{self, truncate_chars};
use super::turn::{Position, Reply, Task, Turn, Usage};

/// Only this much of any input is scanned, so huge inputs cost no more than typical ones.
const SCAN_CHARS: usize = 4000;
const QUOTE_CHARS: usize = 110;
const MAX_LISTED: usize = 12;
const NO_KEYWORD: &str = "the proposal";
/// Line labels that mark an agent's own claims in demo texts (the vote compares these).
const CLAIM_LABELS: [&str; 5] = [
    "Thesis:",
    "Argument:",
    "Caveat:",
    "Main concern:",
    "Concession:",
];

/// One stance's vocabulary; `{k}` is replaced by a key word of the topic, `{p}` by a phase name.
struct Voice {
    label: &'static str,
    thesis: &'static str,
    arguments: [&'static str; 4],
    caveat: &'static str,
    complaints: [&'static str; 2],
    /// Word stems that show a critique argues from this stance.
    focus: [&'static str; 3],
    /// What this stance looks for in others' positions, in words.
    focus_topic: &'static str,
    concession: &'static str,
    rebuttal: &'static str,
    custom: &'static str,
    /// Vote thresholds on the share of the agent's claims the draft reflects.
    agree_at: f64,
    modify_at: f64,
    /// Whether a draft missing the agent's main concern gets a disagree regardless.
    concern_decides: bool,
}

const VOICES: [Voice; 5] = [
    Voice {
        label: "strongly in favour",
        thesis: "Yes on {k}: the gains are large and every year of waiting has a price.",
        arguments: [
            "Momentum matters: each year of delay on {k} keeps costs a decision would remove.",
            "Where comparable changes on {k} were made, the benefits showed quickly and support grew afterwards.",
            "The status quo on {k} is itself a choice, with costs that are simply less visible.",
            "A clear commitment on {k} lets people and businesses plan, which half-measures never do.",
        ],
        caveat: "Caveat: support on {k} erodes if the first months go badly, so communicate early.",
        complaints: [
            "it is too hesitant, and hedging on {k} only delays gains that are already visible",
            "it waits for a certainty on {k} that will never come, and delay has a cost of its own",
        ],
        focus: ["hesita", "delay", "hedg"],
        focus_topic: "the cost of delay",
        concession: "I accept that waiting on {k} has a cost too, so I will name what would change my mind instead of waiting indefinitely.",
        rebuttal: "That does not move me: the cost of waiting on {k} is larger than the cost of acting.",
        custom: "For {p}, I would push to settle the question on {k} now rather than reopen it.",
        agree_at: 0.4,
        modify_at: 0.15,
        concern_decides: false,
    },
    Voice {
        label: "cautiously in favour",
        thesis: "Yes on {k}, on balance, but phased in with a pilot and a review point.",
        arguments: [
            "A pilot on {k} would show the real effects before anything is locked in.",
            "Phasing the change on {k} gives those most affected time to adapt.",
            "A review point after a fixed period keeps the decision on {k} reversible if results disappoint.",
            "The benefits on {k} look real, but they depend on getting the details right.",
        ],
        caveat: "Caveat: without a review point on {k}, I would withdraw my support.",
        complaints: [
            "it skips how to test this, with no pilot or review point on {k}",
            "it jumps straight to full scale on {k} without phasing",
        ],
        focus: ["pilot", "phas", "review"],
        focus_topic: "a pilot or a review point",
        concession: "I accept a pilot and a review point on {k} before any full rollout.",
        rebuttal: "A phased approach on {k} already answers most of that.",
        custom: "For {p}, the useful next step is to agree a pilot on {k} and what would count as success.",
        agree_at: 0.7,
        modify_at: 0.3,
        concern_decides: false,
    },
    Voice {
        label: "pragmatic middle ground",
        thesis: "Neither a flat yes nor a no on {k}: keep the parts that work and trade off the rest.",
        arguments: [
            "The cost of the change on {k} should be weighed against what it buys, case by case.",
            "A compromise on {k} (exemptions, partial scope) captures most of the gain for a fraction of the friction.",
            "What works on {k} in one place may not transfer; local trade-offs should decide the scope.",
            "Measure outcomes on {k} and adjust, rather than settling the question in principle.",
        ],
        caveat: "Caveat: a compromise on {k} must not become an excuse for doing nothing.",
        complaints: [
            "it treats {k} as all-or-nothing and ignores the cost trade-offs",
            "it leaves no room for a compromise on {k}",
        ],
        focus: ["trade-off", "cost", "compromise"],
        focus_topic: "the cost trade-offs",
        concession: "I accept exemptions wherever the cost on {k} clearly outweighs the gain.",
        rebuttal: "The trade-off on {k} still favours a middle course.",
        custom: "For {p}, let us list the trade-offs on {k} and keep the options with the best ratio.",
        agree_at: 0.6,
        modify_at: 0.25,
        concern_decides: false,
    },
    Voice {
        label: "sceptical",
        thesis: "I am not convinced on {k}: the case rests on assumptions nobody has tested.",
        arguments: [
            "The evidence on {k} is thinner than advocates claim; most of it comes from unusual cases.",
            "Promised gains on {k} tend to be overstated, while the costs land on people with the least voice.",
            "Nobody has shown data that the change on {k} beats simpler alternatives.",
            "Claims about {k} rely on assumptions that have not been tested at this scale.",
        ],
        caveat: "Main concern: nobody has produced evidence on {k} strong enough to justify the change.",
        complaints: [
            "it asserts rather than shows, with no evidence on {k}",
            "it rests on an untested assumption about {k}",
        ],
        focus: ["evidence", "data", "assum"],
        focus_topic: "the evidence",
        concession: "I accept that the evidence on {k} should be published and checked before the decision is final.",
        rebuttal: "That still does not supply the missing evidence on {k}.",
        custom: "For {p}, I would ask each side for its best evidence on {k} before moving on.",
        agree_at: 0.85,
        modify_at: 0.0,
        concern_decides: true,
    },
    Voice {
        label: "risk-focused",
        thesis: "Before deciding on {k}, the failure modes matter more than the upside.",
        arguments: [
            "The main risk on {k} is unintended consequences that appear only after rollout.",
            "If the change on {k} fails, reversing it will be slow and costly, so the downside needs a safeguard.",
            "Vulnerable groups carry most of the risk on {k} and need explicit protection.",
            "A failure on {k} would undermine trust in the next reform as well.",
        ],
        caveat: "Main concern: there is no safeguard on {k} if things go wrong.",
        complaints: [
            "it says little about what happens on {k} if this goes wrong",
            "it names no safeguard on {k} against the obvious risk",
        ],
        focus: ["risk", "wrong", "safeguard"],
        focus_topic: "a safeguard if things go wrong",
        concession: "I add a safeguard on {k}: a clear trigger to pause if harms appear.",
        rebuttal: "The downside on {k} remains the deciding factor for me.",
        custom: "For {p}, I would list what could go wrong on {k} and who would be hurt.",
        agree_at: 0.85,
        modify_at: 0.0,
        concern_decides: true,
    },
];

/// True for `demo` and `demo-<anything>` (the prefix in any case).
pub fn is_demo(name: &str) -> bool {
    let (prefix, rest) = name.split_at_checked(4).unwrap_or(("", ""));
    prefix.eq_ignore_ascii_case("demo") && (rest.is_empty() || (rest.len() > 1 && rest.starts_with('-')))
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
        Task::Vote { summary, key_points, own } => me.vote(summary, key_points, own),
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

/// FNV-1a with a final avalanche, because plain FNV's low bits barely move for
/// names that differ in one trailing letter.
fn hash(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in parts.iter().flat_map(|part| part.bytes().chain([0xff])) {
        h = (h ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

fn pick(seed: u64, len: usize) -> usize {
    (seed % len.max(1) as u64) as usize
}

/// The topic's hash shifted by the byte sum of the name: names differing in one
/// nearby letter (`demo-a`, `demo-b`, `demo-c`) always land on different
/// stances, while the topic still decides which ones.
fn stance_index(topic: &str, agent: &str) -> usize {
    let shift: u64 = agent.bytes().map(u64::from).sum();
    ((hash(&[topic.trim()]) % 5 + shift % 5) % 5) as usize
}

/// Sorted, for binary search: content-word extraction runs on every reply.
const STOPWORDS: [&str; 106] = [
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

/// Distinct lowercase content words of `text` in order of appearance, skipping `exclude`.
fn content_words(text: &str, min_len: usize, exclude: &[String], max: usize) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for token in truncate_chars(text, SCAN_CHARS).split(|c: char| !c.is_alphanumeric()) {
        if words.len() >= max {
            break;
        }
        if token.chars().count() < min_len || token.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // Most tokens are already lowercase; only allocate for the rest.
        let word = match token.bytes().any(|b| b.is_ascii_uppercase() || !b.is_ascii()) {
            true => Cow::Owned(token.to_lowercase()),
            false => Cow::Borrowed(token),
        };
        if STOPWORDS.binary_search(&word.as_ref()).is_err()
            && !exclude.iter().any(|e| e.eq_ignore_ascii_case(&word))
            && !words.iter().any(|w| *w == *word)
        {
            words.push(word.into_owned());
        }
    }
    words
}

/// Up to four topic words in the topic's own casing ("Mars"); three-letter
/// words only when nothing longer exists, since they are mostly verbs ("ban").
fn topic_keywords(topic: &str) -> Vec<String> {
    let long = content_words(topic, 4, &[], 4);
    let words = if long.is_empty() { content_words(topic, 3, &[], 4) } else { long };
    let tokens = topic.split(|c: char| !c.is_alphanumeric());
    let original = |word: String| tokens.clone().find(|t| t.to_lowercase() == word).map_or(word, str::to_owned);
    words.into_iter().map(original).collect()
}

/// The text after a leading `[demo agent …]` marker, if any.
fn body(text: &str) -> &str {
    let text = text.trim_start();
    let after_marker = text.strip_prefix("[demo agent").and_then(|rest| rest.split_once(']'));
    after_marker.map_or(text, |(_, rest)| rest.trim_start())
}

/// An agent's claims as (label, text): the labelled lines of a demo text,
/// otherwise its first sentences.
fn claims(text: &str) -> Vec<(&'static str, &str)> {
    let text = truncate_chars(body(text), SCAN_CHARS);
    let labelled: Vec<(&'static str, &str)> = (text.lines())
        .filter_map(|line| CLAIM_LABELS.iter().find_map(|&l| Some((l, line.trim().strip_prefix(l)?.trim()))))
        .collect();
    if !labelled.is_empty() {
        return labelled;
    }
    sentences(text).take(6).map(|sentence| ("", sentence)).collect()
}

fn sentences(text: &str) -> impl Iterator<Item = &str> {
    (text.lines().flat_map(|line| line.split_inclusive(['.', '!', '?'])))
        .map(|s| s.trim().trim_start_matches(['-', '*', '•', '#', ' ']))
        .filter(|s| s.len() >= 12)
}

/// A short quotable fragment, without trailing punctuation so it sits inside quotes.
fn quote(text: &str) -> String {
    let text = text.trim().trim_end_matches(['.', '!', '?', ' ']);
    let clipped = truncate_chars(text, QUOTE_CHARS);
    if clipped.len() < text.len() { format!("{clipped}…") } else { clipped.to_owned() }
}

fn upper_first(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| first.to_uppercase().chain(chars).collect())
}

/// The stance a text declares (demo texts name it in their first line).
fn detect_stance(text: &str) -> Option<usize> {
    let head = truncate_chars(body(text), 300).to_lowercase();
    let found = VOICES.iter().enumerate().filter_map(|(i, voice)| Some((head.find(voice.label)?, i)));
    found.min().map(|(_, index)| index)
}

/// The stance whose focus stems a critique uses most.
fn detect_focus(text: &str) -> Option<usize> {
    let text = text.to_lowercase();
    let hits = |voice: &Voice| voice.focus.iter().filter(|stem| text.contains(*stem)).count();
    let (index, best) = (VOICES.iter().map(hits).enumerate()).max_by_key(|&(i, hits)| (hits, usize::MAX - i))?;
    (best > 0).then_some(index)
}

fn stance_name(stance: Option<usize>) -> &'static str {
    stance.map_or("unclassified", |index| VOICES[index].label)
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
        Speaker { turn, stance, voice: &VOICES[stance], seed, keywords: topic_keywords(&turn.topic) }
    }

    /// A topic word for the template slot `salt`, varied per agent.
    fn fill(&self, template: &str, salt: u32) -> String {
        let index = pick(self.seed.rotate_left(salt * 7) ^ u64::from(salt), self.keywords.len());
        template.replace("{k}", self.keywords.get(index).map_or(NO_KEYWORD, String::as_str))
    }

    fn header(&self, what: &str) -> String {
        let Turn { agent, topic, round, rounds, .. } = self.turn;
        let topic = quote(topic);
        format!("[demo agent {agent}] {what} on \"{topic}\" (round {round} of {rounds}): {}.", self.voice.label)
    }

    /// The stance's thesis, two of its arguments (picked by hash) and its caveat.
    fn core_claims(&self) -> String {
        let first = pick(self.seed, 4);
        let second = (first + 1 + pick(self.seed >> 8, 3)) % 4;
        let [thesis, one, two] = [self.voice.thesis, self.voice.arguments[first], self.voice.arguments[second]];
        let (thesis, one, two) = (self.fill(thesis, 0), self.fill(one, 1), self.fill(two, 2));
        format!("Thesis: {thesis}\nArgument: {one}\nArgument: {two}\n{}", self.fill(self.voice.caveat, 3))
    }

    fn opening(&self) -> String {
        let mut text = format!("{}\n{}", self.header("Opening position"), self.core_claims());
        if let Some(context) = self.turn.context.as_deref().filter(|c| !c.trim().is_empty()) {
            let _ = write!(text, "\nI read this against the stated context: \"{}\".", quote(context));
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
                false => format!("{}; that is the weak spot from where I stand ({label}).", upper_first(&complaint)),
            };
            let lowered = truncate_chars(&target.content, SCAN_CHARS).to_lowercase();
            let coverage = match self.voice.focus.iter().any(|stem| lowered.contains(stem)) {
                true => format!("It touches on {}, but only in passing.", self.voice.focus_topic),
                false => format!("Nothing in it addresses {}.", self.voice.focus_topic),
            };
            let (agent, stance) = (&target.agent, stance_name(their_stance));
            let _ = write!(text, "\nOn {agent} ({stance}): you write \"{claim}\". {judgement} {coverage}");
        }
        match targets.len() {
            0 => text.push_str("\nThere is no other position to critique this round."),
            n if n > MAX_LISTED => { let _ = write!(text, "\n(I leave {} more positions aside.)", n - MAX_LISTED); }
            _ => {}
        }
        text
    }

    /// What a critic said about this agent: the sentences after our name that do
    /// not quote us (the quote is our own text, not their point).
    fn said_about_me<'c>(&self, critique: &'c str) -> Vec<&'c str> {
        let text = truncate_chars(body(critique), SCAN_CHARS);
        let about_me = (text.lines().find_map(|line| line.find(&self.turn.agent).map(|at| &line[at..]))).unwrap_or(text);
        let all: Vec<&str> = sentences(about_me).take(6).collect();
        let theirs: Vec<&str> = all.iter().copied().filter(|s| !s.contains(['"', '“'])).collect();
        if theirs.is_empty() { all.into_iter().take(1).collect() } else { theirs }
    }

    /// Keeps the stance, concedes to the first critic (in hash order) arguing from
    /// another stance, rebuts the rest, and carries earlier concessions forward.
    fn revision(&self, own: &str, critiques: &[Position]) -> String {
        let mut text = format!("{}\n{}", self.header("Revised position"), self.core_claims());
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
            let _ = write!(text, "\nResponse to {}: they wrote \"{claim}\". {reply}", critique.agent);
        }
        match &conceded {
            Some(change) => { let _ = write!(text, "\nConcession: {change}"); }
            None if critiques.is_empty() => text.push_str("\nNo critiques reached me this round; my position stands."),
            None => {}
        }
        let earlier = claims(own).into_iter().filter(|&(label, claim)| label == "Concession:" && conceded.as_deref() != Some(claim));
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
                let claim = claims(&latest.content).first().map_or(String::new(), |(_, claim)| quote(claim));
                let (count, agent) = (transcript.len(), &latest.agent);
                let _ = write!(text, "\nThe transcript has {count} entries; the latest, from {agent}, says \"{claim}\".");
            }
            None => text.push_str("\nThe transcript is empty so far."),
        }
        let _ = write!(text, "\n{}", self.fill(&self.voice.custom.replace("{p}", &phase), 6));
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
        let mut word_counts: Vec<(String, usize)> = Vec::new();
        for position in positions {
            let (agent, stance) = (&position.agent, detect_stance(&position.content));
            let group = match stance { Some(0 | 1) => 0, Some(2) | None => 1, Some(_) => 2 };
            groups[group].push(format!("{agent} ({})", stance_name(stance)));
            let found = claims(&position.content);
            let Some(((_, thesis), rest)) = found.split_first() else { continue };
            let _ = write!(key_points, "\n- {agent} ({}): {}", stance_name(stance), quote(thesis));
            let start = pick(hash(&[&self.turn.topic, &self.turn.agent, agent]), rest.len());
            for offset in 0..rest.len().min(per_position - 1) {
                let _ = write!(key_points, "\n- {agent}: {}", quote(rest[(start + offset) % rest.len()].1));
            }
            let claim_text = found.iter().map(|(_, claim)| *claim).collect::<Vec<_>>().join(" ");
            for word in content_words(&claim_text, 4, &self.keywords, 60) {
                match word_counts.iter_mut().find(|(w, _)| *w == word) {
                    Some((_, count)) => *count += 1,
                    None => word_counts.push((word, 1)),
                }
            }
        }
        word_counts.retain(|&(_, count)| count >= 2);
        word_counts.sort_by(|a, b| b.1.cmp(&a.1));
        let shared: Vec<&str> = word_counts.iter().take(4).map(|(w, _)| w.as_str()).collect();
        let shared = if shared.is_empty() { "little beyond the topic".to_owned() } else { shared.join(", ") };
        let [favour, middle, critical] = groups.map(|g| if g.is_empty() { "none".to_owned() } else { g.join(", ") });
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
        let draft = std::iter::once(summary).chain(key_points.iter().map(String::as_str));
        let draft_words: HashSet<String> = draft.flat_map(|text| content_words(text, 4, &[], 400)).collect();
        let (mut reflected, mut missing, mut concern_reflected) = (Vec::new(), Vec::new(), None);
        for (label, claim) in claims(own) {
            let words = content_words(claim, 4, &self.keywords, 20);
            let hits = words.iter().filter(|w| draft_words.contains(*w)).count();
            if words.is_empty() {
                continue;
            }
            let is_reflected = hits * 2 >= words.len();
            if label == "Main concern:" {
                concern_reflected = Some(is_reflected);
            }
            if is_reflected { reflected.push(claim) } else { missing.push(claim) }
        }
        let total = reflected.len() + missing.len();
        let coverage = if total == 0 { 0.0 } else { reflected.len() as f64 / total as f64 };
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
        for (what, claim) in [("Reflected", reflected.first()), ("Missing", missing.first())] {
            if let Some(claim) = claim {
                let _ = write!(text, "\n- {what}: \"{}\".", quote(claim));
            }
        }
        if critical {
            let verdict = if concern_reflected { "is reflected" } else { "is missing, and that decides my vote" };
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
