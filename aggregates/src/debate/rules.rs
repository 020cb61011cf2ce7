//! The rules a new debate must meet, in one place. The aggregate checks
//! them on every `Create`; the debates service runs the same checks before
//! it builds the command, to name the request field a broken rule is about
//! ([`DebateError::field`], [`DebateError::reason`]).

use super::{
    ConsensusMode, DEFAULT_PHASES, DEFAULT_ROUNDS, DEFAULT_THRESHOLD, DebateError, MAX_AGENTS,
    MAX_ROUNDS, MIN_AGENTS, Protocol,
};

/// Most phases a protocol may name.
pub const MAX_PHASES: usize = 8;
/// Longest phase name.
pub const MAX_PHASE_CHARS: usize = 40;

/// Whether seats `a` and `b` are one agent: names ignore case and the
/// spaces around them (`Claude` and `claude` are one agent; debates keep
/// names as written, since some providers' model ids are case-sensitive).
pub fn same_agent(a: &str, b: &str) -> bool {
    a.trim().to_lowercase() == b.trim().to_lowercase()
}

/// A debate's topic as sent, trimmed: never empty, and never longer than
/// the deployment allows (counted as sent, spaces included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topic(String);

impl Topic {
    pub fn parse(text: &str, max_chars: usize) -> Result<Self, DebateError> {
        if text.chars().count() > max_chars {
            return Err(DebateError::TopicTooLong { max: max_chars });
        }
        match text.trim() {
            "" => Err(DebateError::EmptyTopic),
            topic => Ok(Self(topic.to_owned())),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_inner(self) -> String {
        self.0
    }
}

/// What a request says of a protocol; what it leaves out takes the defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProtocolRequest {
    pub phases: Option<Vec<String>>,
    pub rounds: Option<u32>,
    pub consensus: Option<ConsensusMode>,
    pub threshold: Option<f64>,
    pub judge: Option<String>,
}

impl Protocol {
    /// The protocol `request` asks for over the panel `agents` (a judge
    /// from outside it already seated last), defaults filled in, once it
    /// meets every rule of [`check_protocol`].
    pub fn parse(request: ProtocolRequest, agents: &[String]) -> Result<Self, DebateError> {
        let protocol = Protocol {
            phases: request
                .phases
                .unwrap_or_else(|| DEFAULT_PHASES.map(str::to_owned).to_vec()),
            rounds: request.rounds.unwrap_or(DEFAULT_ROUNDS),
            consensus: request.consensus.unwrap_or_default(),
            threshold: request.threshold.unwrap_or(DEFAULT_THRESHOLD),
            judge: request.judge,
        };
        check_protocol(&protocol, agents)?;
        Ok(protocol)
    }
}

/// Every rule of a new debate (the topic's length is the deployment's to
/// limit before the command is built).
pub fn check_new(topic: &str, agents: &[String], protocol: &Protocol) -> Result<(), DebateError> {
    Topic::parse(topic, usize::MAX)?;
    check_seats(agents, protocol.judge.as_deref())?;
    check_protocol(protocol, agents)
}

/// The panel: between [`MIN_AGENTS`] and [`MAX_AGENTS`] named agents (a
/// judge from outside them sits last, as one more), none blank, none twice.
pub fn check_seats(agents: &[String], judge: Option<&str>) -> Result<(), DebateError> {
    let outside_judge = judge.is_some_and(|judge| {
        agents.last().map(String::as_str) == Some(judge)
            && !agents[..agents.len() - 1].iter().any(|a| a == judge)
    });
    let most = MAX_AGENTS + usize::from(outside_judge);
    if !(MIN_AGENTS..=most).contains(&agents.len()) {
        return Err(DebateError::SeatCount {
            min: MIN_AGENTS,
            max: MAX_AGENTS,
            seats: agents.len(),
        });
    }
    if agents.iter().any(|a| a.trim().is_empty()) {
        return Err(DebateError::EmptyAgentName);
    }
    for (i, agent) in agents.iter().enumerate() {
        if let Some(earlier) = agents[..i].iter().find(|a| same_agent(a, agent)) {
            return Err(DebateError::DuplicateAgent {
                name: agent.clone(),
                earlier: earlier.clone(),
            });
        }
    }
    Ok(())
}

/// Rounds, threshold, phases, and a judge that holds a seat.
pub fn check_protocol(protocol: &Protocol, agents: &[String]) -> Result<(), DebateError> {
    if protocol.rounds == 0 || protocol.rounds > MAX_ROUNDS {
        return Err(DebateError::RoundsOutOfRange { max: MAX_ROUNDS });
    }
    if !(0.0..=1.0).contains(&protocol.threshold) {
        return Err(DebateError::ThresholdOutOfRange);
    }
    let phases = &protocol.phases;
    if phases.is_empty() || phases.len() > MAX_PHASES {
        return Err(DebateError::PhaseCount { max: MAX_PHASES });
    }
    if phases.iter().any(|p| p.trim().is_empty()) {
        return Err(DebateError::EmptyPhase);
    }
    if let Some(bad) = phases.iter().find(|p| !well_formed_phase(p)) {
        return Err(DebateError::MalformedPhase {
            name: bad.clone(),
            max: MAX_PHASE_CHARS,
        });
    }
    for (i, phase) in phases.iter().enumerate() {
        if phases[..i].contains(phase) {
            return Err(DebateError::DuplicatePhase {
                name: phase.clone(),
            });
        }
    }
    if let Some(judge) = &protocol.judge
        && !agents.contains(judge)
    {
        return Err(DebateError::JudgeNotSeated {
            name: judge.clone(),
        });
    }
    Ok(())
}

/// Lower-case letters, digits, `-` and `_`, up to [`MAX_PHASE_CHARS`].
fn well_formed_phase(phase: &str) -> bool {
    !phase.is_empty()
        && phase.len() <= MAX_PHASE_CHARS
        && phase
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn protocol(phases: &[&str], judge: Option<&str>) -> Protocol {
        Protocol {
            phases: names(phases),
            rounds: 2,
            consensus: ConsensusMode::default(),
            threshold: 0.6,
            judge: judge.map(str::to_owned),
        }
    }

    #[test]
    fn an_outside_judge_takes_one_more_seat_and_no_other() {
        let mut full: Vec<String> = (0..MAX_AGENTS).map(|i| format!("a{i}")).collect();
        full.push("judge".to_owned());
        assert_eq!(check_seats(&full, Some("judge")), Ok(()));
        assert!(matches!(
            check_seats(&full, None),
            Err(DebateError::SeatCount { seats, .. }) if seats == MAX_AGENTS + 1
        ));
        let twice = names(&["a", "Claude", "claude "]);
        assert_eq!(
            check_seats(&twice, None),
            Err(DebateError::DuplicateAgent {
                name: "claude ".to_owned(),
                earlier: "Claude".to_owned()
            })
        );
    }

    #[test]
    fn phases_are_few_well_formed_and_distinct() {
        let seats = names(&["a", "b"]);
        let check = |phases: &[&str]| check_protocol(&protocol(phases, None), &seats);
        assert_eq!(check(&DEFAULT_PHASES), Ok(()));
        assert_eq!(check(&[]), Err(DebateError::PhaseCount { max: MAX_PHASES }));
        let nine = ["p"; MAX_PHASES + 1];
        assert_eq!(
            check(&nine),
            Err(DebateError::PhaseCount { max: MAX_PHASES })
        );
        assert!(matches!(
            check(&["Vote"]),
            Err(DebateError::MalformedPhase { .. })
        ));
        assert_eq!(
            check(&["vote", "vote"]),
            Err(DebateError::DuplicatePhase {
                name: "vote".to_owned()
            })
        );
        let judged = check_protocol(&protocol(&DEFAULT_PHASES, Some("c")), &seats);
        assert_eq!(
            judged,
            Err(DebateError::JudgeNotSeated {
                name: "c".to_owned()
            })
        );
    }

    #[test]
    fn each_rule_names_its_field_and_reason() {
        let rule = DebateError::RoundsOutOfRange { max: MAX_ROUNDS };
        assert_eq!(rule.field(), Some("rounds"));
        assert_eq!(rule.reason(), format!("must be between 1 and {MAX_ROUNDS}"));
        assert_eq!(DebateError::VotesMissing.field(), None);
    }
}

#[cfg(test)]
mod parse_tests {
    use super::*;

    #[test]
    fn a_topic_is_trimmed_not_empty_and_within_its_limit_as_sent() {
        assert_eq!(Topic::parse("  Tabs?  ", 9).unwrap().as_str(), "Tabs?");
        assert_eq!(
            Topic::parse("  Tabs?  ", 8),
            Err(DebateError::TopicTooLong { max: 8 })
        );
        assert_eq!(Topic::parse(" \t", 10), Err(DebateError::EmptyTopic));
        assert_eq!(
            Topic::parse("é".repeat(3).as_str(), 3)
                .unwrap()
                .into_inner(),
            "ééé"
        );
    }

    #[test]
    fn a_protocol_takes_the_defaults_and_every_rule() {
        let agents = vec!["a".to_owned(), "b".to_owned()];
        let protocol = Protocol::parse(ProtocolRequest::default(), &agents).unwrap();
        assert_eq!(protocol.rounds, DEFAULT_ROUNDS);
        assert_eq!(protocol.phases, DEFAULT_PHASES.map(str::to_owned).to_vec());
        assert_eq!(protocol.threshold, DEFAULT_THRESHOLD);
        let request = |judge: &str| ProtocolRequest {
            judge: Some(judge.to_owned()),
            ..ProtocolRequest::default()
        };
        assert_eq!(
            Protocol::parse(request("c"), &agents),
            Err(DebateError::JudgeNotSeated {
                name: "c".to_owned()
            })
        );
        assert_eq!(
            Protocol::parse(request("b"), &agents)
                .unwrap()
                .judge
                .as_deref(),
            Some("b")
        );
        let zero = ProtocolRequest {
            rounds: Some(0),
            ..ProtocolRequest::default()
        };
        assert_eq!(
            Protocol::parse(zero, &agents),
            Err(DebateError::RoundsOutOfRange { max: MAX_ROUNDS })
        );
    }
}
