//! The HTML mode of `/ws` ([`LiveHtml`]): each event of a debate as the
//! elements of [`super::live`]'s page it changed, rendered by the same
//! templates with `hx-swap-oob`, so htmx's WebSocket extension swaps each
//! into its place by id; plus one line for the polite live region.

use std::collections::HashMap;

use agon_aggregates::debate::{AgentFailure, Debate, DebateEvent};
use agon_projections::Cursor;
use askama::Template;
use serde_json::Value;

use super::live::{
    After, CLOSING_PHASES, ConsensusView, ENDED, Header, LIVE, Slot, SlotState, SynthesisView,
    VoteRow, consensus, slot_id, synthesis, votes,
};
use crate::push::Render;
use crate::push::frames::{DELTA, Frame};

#[derive(Template)]
#[template(path = "live/header.html")]
struct HeaderHtml<'a> {
    header: &'a Header,
    oob: bool,
}

#[derive(Template)]
#[template(path = "live/conn.html")]
struct ConnHtml {
    conn: &'static str,
    oob: bool,
}

#[derive(Template)]
#[template(path = "live/slot.html")]
struct SlotHtml<'a> {
    slot: &'a Slot,
    oob: bool,
}

/// The next piece of a draft the page already shows, added to its text.
#[derive(Template)]
#[template(path = "live/append.html")]
struct AppendHtml<'a> {
    id: &'a str,
    text: &'a str,
}

#[derive(Template)]
#[template(path = "live/failures.html")]
struct FailuresHtml<'a> {
    failures: &'a [AgentFailure],
    oob: bool,
}

#[derive(Template)]
#[template(path = "live/synthesis.html")]
struct SynthesisHtml<'a> {
    synthesis: Option<&'a SynthesisView>,
    oob: bool,
}

#[derive(Template)]
#[template(path = "live/votes.html")]
struct VotesHtml<'a> {
    votes: &'a [VoteRow],
    oob: bool,
}

#[derive(Template)]
#[template(path = "live/consensus.html")]
struct ConsensusHtml<'a> {
    consensus: Option<&'a ConsensusView>,
    oob: bool,
}

#[derive(Template)]
#[template(path = "live/after.html")]
struct AfterHtml<'a> {
    after: &'a After,
    oob: bool,
}

#[derive(Template)]
#[template(path = "live/announce.html")]
struct Announce<'a> {
    text: &'a str,
}

/// The HTML mode of `/ws` for one socket: folds each event into the
/// debate as it stood at `since` and answers the elements it changed.
#[derive(Debug, Default)]
pub struct LiveHtml {
    debate: Debate,
    /// Who watches (the creator may publish the debate once it ends).
    viewer: String,
    /// The event last folded in (frames of one event share it).
    last: Option<Cursor>,
    /// Streamed text per (round, phase, agent).
    drafts: HashMap<(u32, String, String), Draft>,
}

/// A call's text so far: its attempt and its pieces by `seq`.
type Draft = (u64, Vec<(u64, String)>);

/// A fresh renderer, for [`crate::push::Push::render_with`].
pub fn renderer() -> Box<dyn Render> {
    Box::<LiveHtml>::default()
}

fn html(template: &impl Template) -> String {
    template.render().unwrap_or_default()
}

impl LiveHtml {
    fn slot(&self, round: u32, phase: &str, agent: &str) -> String {
        let key = (round, phase.to_owned(), agent.to_owned());
        let draft = self
            .drafts
            .get(&key)
            .map(|(_, pieces)| pieces.iter().map(|(_, t)| t.as_str()).collect());
        let slot = Slot::of(&self.debate, round, phase, agent, draft);
        html(&SlotHtml {
            slot: &slot,
            oob: true,
        })
    }

    fn header(&self) -> String {
        html(&HeaderHtml {
            header: &Header::of(&self.debate),
            oob: true,
        })
    }

    fn delta(&mut self, frame: &Frame) -> Option<String> {
        let wire: Value = serde_json::from_str(&frame.json).ok()?;
        let data = &wire["data"];
        let round = u32::try_from(data["round"].as_u64()?).ok()?;
        let (phase, agent) = (data["phase"].as_str()?, data["agent"].as_str()?);
        let (attempt, seq) = (data["attempt"].as_u64()?, data["seq"].as_u64()?);
        let text = data["text"].as_str()?.to_owned();
        let here = |r: u32, p: &str, a: &str| r == round && p == phase && a == agent;
        let d = &self.debate;
        // A recorded or failed slot shows no draft.
        if d.messages.iter().any(|m| here(m.round, &m.phase, &m.agent))
            || d.failures.iter().any(|f| here(f.round, &f.phase, &f.agent))
            || CLOSING_PHASES.contains(&phase)
        {
            return None;
        }
        let key = (round, phase.to_owned(), agent.to_owned());
        // This socket drew the draft of this attempt already: the page
        // holds every piece so far, in order.
        let shown = self.drafts.get(&key).is_some_and(|(a, _)| *a == attempt);
        let entry = self.drafts.entry(key).or_insert((attempt, Vec::new()));
        if attempt > entry.0 {
            *entry = (attempt, Vec::new());
        } else if attempt < entry.0 {
            return None;
        }
        let at = entry.1.partition_point(|(s, _)| *s < seq);
        entry.1.insert(at, (seq, text));
        if shown && at + 1 == entry.1.len() {
            // The next piece in order (the usual case): only it goes to the
            // page, so a frame's work stays the same as the draft grows.
            return Some(html(&AppendHtml {
                id: &slot_id(round, phase, agent),
                text: &entry.1[at].1,
            }));
        }
        // The first piece, a new attempt, or one that came out of order.
        Some(self.slot(round, phase, agent))
    }

    /// The elements `event` changed, and what to announce.
    fn changed(&mut self, event: &DebateEvent) -> (Vec<String>, Option<String>) {
        let before = Header::of(&self.debate);
        self.debate.apply_event(event.clone());
        let d = &self.debate;
        match event {
            DebateEvent::MessageRecorded {
                round,
                phase,
                agent,
                ..
            } => {
                self.drafts.remove(&(*round, phase.clone(), agent.clone()));
                let mut said = format!("{agent} finished {phase} of round {round}.");
                if before.round != *round || before.phase.as_deref() != Some(phase) {
                    said = format!("Round {round}, {phase}. {said}");
                }
                (
                    vec![self.slot(*round, phase, agent), self.header()],
                    Some(said),
                )
            }
            DebateEvent::AgentFailed {
                round,
                phase,
                agent,
                ..
            } => (
                vec![
                    self.slot(*round, phase, agent),
                    html(&FailuresHtml {
                        failures: &d.failures,
                        oob: true,
                    }),
                ],
                Some(format!("{agent} failed and takes no further part.")),
            ),
            DebateEvent::SynthesisDrafted { agent, .. } => (
                vec![
                    self.header(),
                    html(&SynthesisHtml {
                        synthesis: synthesis(d).as_ref(),
                        oob: true,
                    }),
                ],
                Some(format!("{agent} drafted the synthesis.")),
            ),
            DebateEvent::VoteCast { agent, .. } => {
                let mut fragments = vec![html(&VotesHtml {
                    votes: &votes(d),
                    oob: true,
                })];
                // The first vote moves the header's phase to the vote.
                if d.votes.len() == 1 {
                    fragments.insert(0, self.header());
                }
                (fragments, Some(format!("{agent} voted.")))
            }
            DebateEvent::ConsensusComputed { result, .. } => (
                vec![
                    html(&ConsensusHtml {
                        consensus: consensus(d).as_ref(),
                        oob: true,
                    }),
                    // Its text is now the consensus card's.
                    html(&SynthesisHtml {
                        synthesis: synthesis(d).as_ref(),
                        oob: true,
                    }),
                ],
                Some(format!(
                    "Consensus {}, confidence {:.2}.",
                    if consensus(d).is_some_and(|c| c.reached) {
                        "reached"
                    } else {
                        "not reached"
                    },
                    result.confidence
                )),
            ),
            DebateEvent::DebateCompleted { .. } | DebateEvent::DebateFailed { .. } => (
                vec![
                    self.header(),
                    html(&AfterHtml {
                        after: &After::of(d, &self.viewer),
                        oob: true,
                    }),
                    html(&ConnHtml {
                        conn: ENDED,
                        oob: true,
                    }),
                    // Without its `hx-ws:connect` the element's socket closes.
                    r#"<div id="live" hx-swap-oob="true"></div>"#.to_owned(),
                ],
                Some(format!("The debate has {}.", d.status.as_str())),
            ),
            DebateEvent::DebateStarted { .. }
            | DebateEvent::DebatePaused { .. }
            | DebateEvent::DebateResumed { .. } => (
                vec![self.header()],
                Some(format!("The debate is {}.", d.status.as_str())),
            ),
            DebateEvent::DebateCreated { .. }
            | DebateEvent::CheckpointCreated { .. }
            | DebateEvent::DebatePublished { .. }
            | DebateEvent::DebateUnpublished { .. } => (Vec::new(), None),
        }
    }
}

impl Render for LiveHtml {
    fn start(&mut self, debate: Debate, viewer: &str) {
        self.debate = debate;
        self.viewer = viewer.to_owned();
    }

    fn frame(&mut self, frame: &Frame) -> Option<String> {
        if frame.kind == DELTA {
            return self.delta(frame);
        }
        let event = frame.event.as_ref()?;
        if self.last == Some(frame.cursor) {
            return None;
        }
        self.last = Some(frame.cursor);
        let (mut parts, said) = self.changed(event);
        if let Some(text) = said {
            parts.push(html(&Announce { text: &text }));
        }
        (!parts.is_empty()).then(|| parts.concat())
    }

    fn opened(&mut self) -> Option<String> {
        let conn = if self.debate.status.is_finished() {
            ENDED
        } else {
            LIVE
        };
        Some(html(&ConnHtml { conn, oob: true }))
    }
}
