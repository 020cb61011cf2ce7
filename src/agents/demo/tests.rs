use super::super::prompt::{self, parse_synthesis, parse_vote};
use super::*;

const TOPIC: &str = "Should cities ban cars from their centres?";
const AGENTS: [&str; 3] = ["demo-a", "demo-b", "demo-c"];
const TOPICS: [&str; 8] = [
    TOPIC,
    "Is remote work better than office work?",
    "Should AI-generated art be eligible for copyright?",
    "Should the voting age be lowered to 16?",
    "Should nuclear power be expanded to fight climate change?",
    "Should homework be abolished in primary schools?",
    "Should social media require age verification?",
    "Should we colonise Mars?",
];

fn turn(topic: &str, agent: &str, task: Task) -> Turn {
    let (topic, agent) = (topic.to_owned(), agent.to_owned());
    Turn {
        topic,
        context: None,
        agent,
        round: 1,
        rounds: 2,
        task,
    }
}

fn position(agent: &str, content: String) -> Position {
    Position {
        agent: agent.to_owned(),
        content,
    }
}

fn say(topic: &str, agent: &str, task: Task) -> String {
    respond(&turn(topic, agent, task)).content
}

fn openings(topic: &str) -> Vec<Position> {
    AGENTS
        .iter()
        .map(|a| position(a, say(topic, a, Task::Opening)))
        .collect()
}

fn others(all: &[Position], me: &str) -> Vec<Position> {
    all.iter().filter(|p| p.agent != me).cloned().collect()
}

/// Opening, one critique and revision round, synthesis by demo-a, then votes.
fn debate(topic: &str) -> Vec<prompt::ParsedVote> {
    let opened = openings(topic);
    let critiques: Vec<Position> = (AGENTS.iter())
        .map(|a| {
            position(
                a,
                say(
                    topic,
                    a,
                    Task::Critique {
                        targets: others(&opened, a),
                    },
                ),
            )
        })
        .collect();
    let revised: Vec<Position> = (opened.iter())
        .map(|own| {
            let critiques = others(&critiques, &own.agent);
            let task = Task::Revision {
                own: own.content.clone(),
                critiques,
            };
            position(&own.agent, say(topic, &own.agent, task))
        })
        .collect();
    let synthesis = say(
        topic,
        "demo-a",
        Task::Synthesis {
            positions: revised.clone(),
        },
    );
    let draft = parse_synthesis(&synthesis).unwrap();
    (revised.iter())
        .map(|own| {
            let (summary, key_points) = (draft.summary.clone(), draft.key_points.clone());
            let task = Task::Vote {
                summary,
                key_points,
                own: own.content.clone(),
            };
            parse_vote(&say(topic, &own.agent, task)).unwrap()
        })
        .collect()
}

#[test]
fn recognises_demo_names() {
    for name in ["demo", "DEMO", "demo-a", "Demo-Bob", "demo-1"] {
        assert!(is_demo(name), "{name}");
    }
    for name in [
        "",
        "dem",
        "demo-",
        "demox",
        "democracy",
        "openai:gpt-4o",
        "my-demo",
    ] {
        assert!(!is_demo(name), "{name}");
    }
}

#[test]
fn same_turn_gives_same_reply() {
    let opened = openings(TOPIC);
    let tasks = [
        Task::Opening,
        Task::Critique {
            targets: others(&opened, "demo-a"),
        },
        Task::Revision {
            own: opened[0].content.clone(),
            critiques: others(&opened, "demo-a"),
        },
        Task::Custom {
            phase: "cross-examination".to_owned(),
            transcript: opened.clone(),
        },
        Task::Synthesis {
            positions: opened.clone(),
        },
        Task::Vote {
            summary: "A summary.".to_owned(),
            key_points: vec![],
            own: opened[0].content.clone(),
        },
    ];
    for task in tasks {
        let once = respond(&turn(TOPIC, "demo-a", task.clone()));
        assert_eq!(once, respond(&turn(TOPIC, "demo-a", task)));
        assert!(
            once.content.starts_with("[demo agent demo-a]"),
            "{}",
            once.content
        );
    }
}

#[test]
fn demo_a_b_c_take_different_stances_on_every_topic() {
    for topic in TOPICS.iter().copied().chain(["", "x", "Tabs or spaces?"]) {
        let stances: Vec<usize> = AGENTS.iter().map(|a| stance_index(topic, a)).collect();
        assert!(stances[0] != stances[1] && stances[1] != stances[2] && stances[0] != stances[2]);
        for (agent, stance) in AGENTS.iter().zip(stances) {
            assert!(say(topic, agent, Task::Opening).contains(VOICES[stance].label));
        }
    }
}

#[test]
fn opening_builds_on_the_topic_and_context() {
    let mut with_context = turn(TOPIC, "demo-b", Task::Opening);
    with_context.context = Some("A city of 2 million with a tram network.".to_owned());
    let text = respond(&with_context).content;
    assert!(text.contains("cars") || text.contains("centres") || text.contains("cities"));
    assert!(text.contains("tram network"), "{text}");
    assert_eq!(claims(&text).len(), 4);
}

#[test]
fn critique_names_and_quotes_every_target() {
    let opened = openings(TOPIC);
    let targets = others(&opened, "demo-a");
    let text = say(
        TOPIC,
        "demo-a",
        Task::Critique {
            targets: targets.clone(),
        },
    );
    for target in &targets {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("On {}", target.agent)))
            .unwrap();
        let quoted = line.split('"').nth(1).unwrap().trim_end_matches('…');
        assert!(
            quoted.len() > 20 && target.content.contains(quoted),
            "{line}"
        );
        assert!(
            line.contains(stance_name(detect_stance(&target.content))),
            "{line}"
        );
    }
}

#[test]
fn critique_of_foreign_text_quotes_it_and_stays_bounded() {
    let huge = "Congestion pricing works better than bans. ".repeat(50_000);
    let targets = vec![
        position("openai:gpt-4o", huge),
        position("claude", String::new()),
    ];
    let text = say(TOPIC, "demo-c", Task::Critique { targets });
    assert!(text.contains("On openai:gpt-4o (unclassified): you write \"Congestion pricing works"));
    assert!(text.contains("On claude (unclassified): you state nothing I can quote."));
    assert!(text.len() < 2_000, "{}", text.len());
}

#[test]
fn revision_keeps_stance_and_answers_named_critics() {
    let opened = openings(TOPIC);
    let critiques: Vec<Position> = (AGENTS.iter())
        .map(|a| {
            position(
                a,
                say(
                    TOPIC,
                    a,
                    Task::Critique {
                        targets: others(&opened, a),
                    },
                ),
            )
        })
        .collect();
    let own = opened[0].content.clone();
    let received = others(&critiques, "demo-a");
    let text = say(
        TOPIC,
        "demo-a",
        Task::Revision {
            own,
            critiques: received.clone(),
        },
    );
    assert!(text.contains(VOICES[stance_index(TOPIC, "demo-a")].label));
    for critic in &received {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("Response to {}", critic.agent)))
            .unwrap();
        let quoted = line.split('"').nth(1).unwrap().trim_end_matches('…');
        assert!(critic.content.contains(quoted), "{line}");
    }
    assert!(text.contains("\nConcession: "), "{text}");
}

#[test]
fn custom_phase_references_phase_and_transcript() {
    let transcript = openings(TOPIC);
    let text = say(
        TOPIC,
        "demo-b",
        Task::Custom {
            phase: "closing".to_owned(),
            transcript,
        },
    );
    assert!(
        text.contains("\"closing\" phase") && text.contains("from demo-c"),
        "{text}"
    );
    let empty = say(
        TOPIC,
        "demo-b",
        Task::Custom {
            phase: "x".to_owned(),
            transcript: vec![],
        },
    );
    assert!(empty.contains("empty"));
}

#[test]
fn synthesis_parses_and_attributes_every_position() {
    let positions = openings(TOPIC);
    let draft = parse_synthesis(&say(TOPIC, "demo-b", Task::Synthesis { positions })).unwrap();
    assert!(
        draft.summary.contains("3 agents debated"),
        "{}",
        draft.summary
    );
    assert_eq!(draft.key_points.len(), 9);
    for agent in AGENTS {
        assert!(draft.summary.contains(agent));
        assert!(
            draft
                .key_points
                .iter()
                .any(|p| p.starts_with(&format!("{agent} (")))
        );
    }
    let none = parse_synthesis(&say(TOPIC, "demo-b", Task::Synthesis { positions: vec![] }));
    assert!(none.unwrap().key_points.is_empty());
}

#[test]
fn vote_follows_whether_the_draft_reflects_own_points() {
    for agent in AGENTS {
        let own = say(TOPIC, agent, Task::Opening);
        let vote = |summary: &str, key_points: Vec<String>| {
            let task = Task::Vote {
                summary: summary.to_owned(),
                key_points,
                own: own.clone(),
            };
            parse_vote(&say(TOPIC, agent, task)).unwrap()
        };
        let all_points = claims(&own).iter().map(|(_, c)| (*c).to_owned()).collect();
        let included = vote("The agents agree on most things.", all_points);
        let omitted = vote(
            "Bicycles are pleasant in spring.",
            vec!["Weather matters.".to_owned()],
        );
        assert_eq!(included.choice, VoteChoice::Agree, "{agent}");
        assert_eq!(omitted.choice, VoteChoice::Disagree, "{agent}");
        assert!(
            included.reasons[0].starts_with("4 of my 4 points"),
            "{:?}",
            included.reasons
        );
        assert!(
            omitted.reasons[0].starts_with("0 of my 4 points"),
            "{:?}",
            omitted.reasons
        );
    }
}

#[test]
fn partial_draft_gets_modifications_naming_missing_points() {
    let agent = (AGENTS.iter())
        .find(|a| !VOICES[stance_index(TOPIC, a)].concern_decides)
        .unwrap();
    let own = say(TOPIC, agent, Task::Opening);
    let points: Vec<String> = claims(&own).iter().map(|(_, c)| (*c).to_owned()).collect();
    let task = Task::Vote {
        summary: "Draft.".to_owned(),
        key_points: points[..1].to_vec(),
        own,
    };
    let vote = parse_vote(&say(TOPIC, agent, task)).unwrap();
    assert_eq!(vote.choice, VoteChoice::AgreeWithModifications);
    assert!((0.0..=1.0).contains(&vote.confidence));
    assert!(
        vote.modifications
            .iter()
            .any(|m| m.contains(&quote(&points[1]))),
        "{vote:?}"
    );
}

#[test]
fn demo_debates_usually_reach_consensus_but_not_always_unanimously() {
    let votes: Vec<Vec<prompt::ParsedVote>> = TOPICS.iter().map(|t| debate(t)).collect();
    let supportive = |vs: &Vec<prompt::ParsedVote>| {
        vs.iter()
            .filter(|v| v.choice != VoteChoice::Disagree)
            .count()
    };
    let consensus = votes.iter().filter(|vs| supportive(vs) >= 2).count();
    let unanimous = (votes.iter())
        .filter(|vs| vs.iter().all(|v| v.choice == VoteChoice::Agree))
        .count();
    assert!(
        consensus >= 6,
        "consensus on {consensus} of {}",
        TOPICS.len()
    );
    assert!(unanimous < TOPICS.len(), "every debate was unanimous");
}

#[test]
fn usage_counts_words_read_and_written() {
    let task = Task::Critique {
        targets: openings(TOPIC),
    };
    let asked = turn(TOPIC, "demo-c", task);
    let reply = respond(&asked);
    assert_eq!(
        (reply.usage.provider.as_str(), reply.usage.model.as_str()),
        ("demo", "demo-v1")
    );
    let rendered = prompt::render(&asked);
    let read =
        rendered.system.split_whitespace().count() + rendered.user.split_whitespace().count();
    assert_eq!(reply.usage.tokens_in, read as u64);
    assert_eq!(
        reply.usage.tokens_out,
        reply.content.split_whitespace().count() as u64
    );
    assert_eq!((reply.usage.latency_ms, reply.usage.fallback), (0, false));
}

#[test]
fn stopwords_are_sorted_for_binary_search() {
    assert!(text::STOPWORDS.windows(2).all(|pair| pair[0] < pair[1]));
    assert!(text::STOPWORDS.iter().all(|word| word.len() <= 8));
    assert!(text::STOPWORD_KEYS.windows(2).all(|pair| pair[0] < pair[1]));
}

/// Run with `cargo test --release -- --ignored --nocapture` to see µs per reply.
#[test]
#[ignore]
fn measure_reply_time() {
    let start = std::time::Instant::now();
    let rounds = 300;
    for index in 0..rounds {
        std::hint::black_box(debate(TOPICS[index % TOPICS.len()]));
    }
    let replies = rounds * 13;
    println!(
        "{:.1} µs per reply",
        start.elapsed().as_secs_f64() * 1e6 / replies as f64
    );
}
