//! The rules a new debate must meet, in one place. The aggregate checks
//! them on every `Create`; the debates service runs the same checks before
//! it builds the command, to name the request field a broken rule is about
//! ([`DebateError::field`], [`DebateError::reason`]).

use super::{
    ConsensusMode, DEFAULT_PHASES, DEFAULT_ROUNDS, DEFAULT_THRESHOLD, DebateError, MIN_AGENTS,
    Protocol,
};

/// How big a debate may be: the deployment's choice (`SERVICE_MAX_AGENTS`,
/// `SERVICE_MAX_ROUNDS`, `SERVICE_MAX_PHASES`, `SERVICE_MAX_PHASE_CHARS`),
/// handed to every check and carried by the create command, so that the
/// aggregate refuses what the service would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most agents one debate seats (a judge from outside them is one more).
    pub agents: usize,
    /// Most rounds a debate may ask for.
    pub rounds: u32,
    /// Most phases a protocol may name.
    pub phases: usize,
    /// Longest phase name, in characters.
    pub phase_chars: usize,
}

impl Limits {
    /// The limits of a deployment that sets none.
    pub const DEFAULT: Limits = Limits {
        agents: 12,
        rounds: 12,
        phases: 8,
        phase_chars: 40,
    };
    /// The smallest limits a deployment may set: what a request that names
    /// nothing gets must fit (three agents picked by `auto_select`, the
    /// default phases, each name of them).
    pub const LEAST: Limits = Limits {
        agents: 3,
        rounds: 1,
        phases: DEFAULT_PHASES.len(),
        phase_chars: 8,
    };

    /// The rounds a request naming none gets: the default, or the limit
    /// when that is lower.
    pub fn default_rounds(&self) -> u32 {
        DEFAULT_ROUNDS.min(self.rounds)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

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
    /// from outside it already seated last), defaults filled in (no more
    /// rounds than `limits` allow), once it meets every rule of
    /// [`check_protocol`].
    pub fn parse(
        request: ProtocolRequest,
        agents: &[String],
        limits: &Limits,
    ) -> Result<Self, DebateError> {
        let protocol = Protocol {
            phases: request
                .phases
                .unwrap_or_else(|| DEFAULT_PHASES.map(str::to_owned).to_vec()),
            rounds: request.rounds.unwrap_or_else(|| limits.default_rounds()),
            consensus: request.consensus.unwrap_or_default(),
            threshold: request.threshold.unwrap_or(DEFAULT_THRESHOLD),
            judge: request.judge,
        };
        check_protocol(&protocol, agents, limits)?;
        Ok(protocol)
    }
}

/// Every rule of a new debate (the topic's length is the deployment's to
/// limit before the command is built).
pub fn check_new(
    topic: &str,
    agents: &[String],
    protocol: &Protocol,
    limits: &Limits,
) -> Result<(), DebateError> {
    Topic::parse(topic, usize::MAX)?;
    check_seats(agents, protocol.judge.as_deref(), limits)?;
    check_protocol(protocol, agents, limits)
}

/// The panel: between [`MIN_AGENTS`] and `limits.agents` named agents (a
/// judge from outside them sits last, as one more), none blank, none twice.
pub fn check_seats(
    agents: &[String],
    judge: Option<&str>,
    limits: &Limits,
) -> Result<(), DebateError> {
    let outside_judge = judge.is_some_and(|judge| {
        agents.last().map(String::as_str) == Some(judge)
            && !agents[..agents.len() - 1].iter().any(|a| a == judge)
    });
    let most = limits.agents + usize::from(outside_judge);
    if !(MIN_AGENTS..=most).contains(&agents.len()) {
        return Err(DebateError::SeatCount {
            min: MIN_AGENTS,
            max: limits.agents,
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
pub fn check_protocol(
    protocol: &Protocol,
    agents: &[String],
    limits: &Limits,
) -> Result<(), DebateError> {
    if protocol.rounds == 0 || protocol.rounds > limits.rounds {
        return Err(DebateError::RoundsOutOfRange { max: limits.rounds });
    }
    if !(0.0..=1.0).contains(&protocol.threshold) {
        return Err(DebateError::ThresholdOutOfRange);
    }
    let phases = &protocol.phases;
    if phases.is_empty() || phases.len() > limits.phases {
        return Err(DebateError::PhaseCount { max: limits.phases });
    }
    if phases.iter().any(|p| p.trim().is_empty()) {
        return Err(DebateError::EmptyPhase);
    }
    if let Some(bad) = phases
        .iter()
        .find(|p| !well_formed_phase(p, limits.phase_chars))
    {
        return Err(DebateError::MalformedPhase {
            name: bad.clone(),
            max: limits.phase_chars,
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

/// Lower-case letters, digits, `-` and `_`, up to `max_chars`.
fn well_formed_phase(phase: &str, max_chars: usize) -> bool {
    !phase.is_empty()
        && phase.len() <= max_chars
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
        let limits = Limits::DEFAULT;
        let mut full: Vec<String> = (0..limits.agents).map(|i| format!("a{i}")).collect();
        full.push("judge".to_owned());
        assert_eq!(check_seats(&full, Some("judge"), &limits), Ok(()));
        assert!(matches!(
            check_seats(&full, None, &limits),
            Err(DebateError::SeatCount { seats, .. }) if seats == limits.agents + 1
        ));
        let twice = names(&["a", "Claude", "claude "]);
        assert_eq!(
            check_seats(&twice, None, &limits),
            Err(DebateError::DuplicateAgent {
                name: "claude ".to_owned(),
                earlier: "Claude".to_owned()
            })
        );
    }

    #[test]
    fn phases_are_few_well_formed_and_distinct() {
        let seats = names(&["a", "b"]);
        let limits = Limits::DEFAULT;
        let check = |phases: &[&str]| check_protocol(&protocol(phases, None), &seats, &limits);
        assert_eq!(check(&DEFAULT_PHASES), Ok(()));
        assert_eq!(check(&[]), Err(DebateError::PhaseCount { max: 8 }));
        let nine = ["p"; 9];
        assert_eq!(check(&nine), Err(DebateError::PhaseCount { max: 8 }));
        let long = "p".repeat(41);
        assert_eq!(
            check(&[long.as_str()]),
            Err(DebateError::MalformedPhase {
                name: long.clone(),
                max: 40
            })
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
        let judged = check_protocol(&protocol(&DEFAULT_PHASES, Some("c")), &seats, &limits);
        assert_eq!(
            judged,
            Err(DebateError::JudgeNotSeated {
                name: "c".to_owned()
            })
        );
    }

    #[test]
    fn each_rule_names_its_field_and_reason() {
        let rule = DebateError::RoundsOutOfRange { max: 12 };
        assert_eq!(rule.field(), Some("rounds"));
        assert_eq!(rule.reason(), "must be between 1 and 12");
        assert_eq!(DebateError::VotesMissing.field(), None);
    }

    #[test]
    fn a_deployment_s_limits_move_every_bound() {
        let wide = Limits {
            agents: 20,
            rounds: 30,
            phases: 10,
            phase_chars: 60,
        };
        let panel: Vec<String> = (0..20).map(|i| format!("a{i}")).collect();
        assert_eq!(check_seats(&panel, None, &wide), Ok(()));
        assert!(matches!(
            check_seats(&panel, None, &Limits::DEFAULT),
            Err(DebateError::SeatCount { max: 12, .. })
        ));
        let mut long = protocol(
            &[
                "p".repeat(60).as_str(),
                "a",
                "b",
                "c",
                "d",
                "e",
                "f",
                "g",
                "h",
                "i",
            ],
            None,
        );
        long.rounds = 30;
        assert_eq!(check_protocol(&long, &panel, &wide), Ok(()));
        assert_eq!(
            check_protocol(&long, &panel, &Limits::DEFAULT),
            Err(DebateError::RoundsOutOfRange { max: 12 })
        );
        long.rounds = 31;
        assert_eq!(
            check_protocol(&long, &panel, &wide),
            Err(DebateError::RoundsOutOfRange { max: 30 })
        );
        let narrow = Limits {
            rounds: 2,
            ..Limits::LEAST
        };
        let agents = names(&["a", "b"]);
        let defaults = Protocol::parse(ProtocolRequest::default(), &agents, &narrow).unwrap();
        assert_eq!(defaults.rounds, 2, "the default rounds fit the limit");
        let least = Protocol::parse(ProtocolRequest::default(), &agents, &Limits::LEAST).unwrap();
        assert_eq!((least.rounds, least.phases.len()), (1, 4));
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
        let limits = Limits::DEFAULT;
        let protocol = Protocol::parse(ProtocolRequest::default(), &agents, &limits).unwrap();
        assert_eq!(protocol.rounds, DEFAULT_ROUNDS);
        assert_eq!(protocol.phases, DEFAULT_PHASES.map(str::to_owned).to_vec());
        assert_eq!(protocol.threshold, DEFAULT_THRESHOLD);
        let request = |judge: &str| ProtocolRequest {
            judge: Some(judge.to_owned()),
            ..ProtocolRequest::default()
        };
        assert_eq!(
            Protocol::parse(request("c"), &agents, &limits),
            Err(DebateError::JudgeNotSeated {
                name: "c".to_owned()
            })
        );
        assert_eq!(
            Protocol::parse(request("b"), &agents, &limits)
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
            Protocol::parse(zero, &agents, &limits),
            Err(DebateError::RoundsOutOfRange { max: 12 })
        );
    }
}
