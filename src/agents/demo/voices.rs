//! The demo agents' stances: what each one argues, objects to and concedes,
//! and how a stance is recognised in text.

use super::super::prompt::truncate_chars;
use super::text::{body, hash};

/// One stance's vocabulary; `{k}` is replaced by a key word of the topic, `{p}` by a phase name.
pub(super) struct Voice {
    pub(super) label: &'static str,
    pub(super) thesis: &'static str,
    pub(super) arguments: [&'static str; 4],
    pub(super) caveat: &'static str,
    pub(super) complaints: [&'static str; 2],
    /// Word stems that show a critique argues from this stance.
    pub(super) focus: [&'static str; 3],
    /// What this stance looks for in others' positions, in words.
    pub(super) focus_topic: &'static str,
    pub(super) concession: &'static str,
    pub(super) rebuttal: &'static str,
    pub(super) custom: &'static str,
    /// Vote thresholds on the share of the agent's claims the draft reflects.
    pub(super) agree_at: f64,
    pub(super) modify_at: f64,
    /// Whether a draft missing the agent's main concern gets a disagree regardless.
    pub(super) concern_decides: bool,
}

pub(super) const VOICES: [Voice; 5] = [
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

/// The topic's hash shifted by the byte sum of the name: names differing in one
/// nearby letter (`demo-a`, `demo-b`, `demo-c`) always land on different
/// stances, while the topic still decides which ones.
pub(super) fn stance_index(topic: &str, agent: &str) -> usize {
    let shift: u64 = agent.bytes().map(u64::from).sum();
    ((hash(&[topic.trim()]) % 5 + shift % 5) % 5) as usize
}

/// The stance a text declares (demo texts name it in their first line).
pub(super) fn detect_stance(text: &str) -> Option<usize> {
    let head = truncate_chars(body(text), 300).to_lowercase();
    let found = VOICES
        .iter()
        .enumerate()
        .filter_map(|(i, voice)| Some((head.find(voice.label)?, i)));
    found.min().map(|(_, index)| index)
}

/// The stance whose focus stems a critique uses most.
pub(super) fn detect_focus(text: &str) -> Option<usize> {
    let text = text.to_lowercase();
    let hits = |voice: &Voice| {
        voice
            .focus
            .iter()
            .filter(|stem| text.contains(*stem))
            .count()
    };
    let (index, best) =
        (VOICES.iter().map(hits).enumerate()).max_by_key(|&(i, hits)| (hits, usize::MAX - i))?;
    (best > 0).then_some(index)
}

pub(super) fn stance_name(stance: Option<usize>) -> &'static str {
    stance.map_or("unclassified", |index| VOICES[index].label)
}
