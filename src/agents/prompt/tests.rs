use super::super::turn::{Position, Task, Turn};
use super::*;

fn turn(task: Task) -> Turn {
    Turn {
        topic: "Should cities ban cars?".to_owned(),
        context: Some("Mid-sized European city.".to_owned()),
        agent: "claude".to_owned(),
        round: 2,
        rounds: 3,
        task,
    }
}

fn position(agent: &str, content: &str) -> Position {
    Position {
        agent: agent.to_owned(),
        content: content.to_owned(),
    }
}

#[test]
fn render_states_topic_context_round_and_labelled_texts() {
    let targets = vec![
        position("gpt", "Bans work."),
        position("gemini", "Bans fail."),
    ];
    let prompt = render(&turn(Task::Critique { targets }));
    assert!(prompt.system.contains("You are claude"));
    for needle in [
        "Should cities ban cars?",
        "Mid-sized European city.",
        "Round 2 of 3",
        "### gpt\nBans work.",
        "### gemini\nBans fail.",
    ] {
        assert!(
            prompt.user.contains(needle),
            "{needle} missing from {}",
            prompt.user
        );
    }
    let revision = render(&turn(Task::Revision {
        own: "My view.".to_owned(),
        critiques: vec![position("gpt", "Weak.")],
    }));
    assert!(revision.user.contains("My view.") && revision.user.contains("### gpt\nWeak."));
    let custom = render(&turn(Task::Custom {
        phase: "rebuttal".to_owned(),
        transcript: vec![],
    }));
    assert!(custom.user.contains("\"rebuttal\" phase") && custom.user.contains("(none)"));
}

#[test]
fn render_asks_for_the_formats_the_parsers_read() {
    let synthesis = render(&turn(Task::Synthesis {
        positions: vec![position("gpt", "Yes.")],
    }));
    assert!(synthesis.user.contains("SUMMARY:") && synthesis.user.contains("KEY POINTS:"));
    let task = Task::Vote {
        summary: "Draft.".to_owned(),
        key_points: vec!["One.".to_owned()],
        own: "Mine.".to_owned(),
    };
    let vote = render(&turn(task)).user;
    for needle in [
        "VOTE: agree | agree_with_modifications | disagree",
        "CONFIDENCE:",
        "REASONS:",
        "MODIFICATIONS:",
        "- One.",
        "Mine.",
    ] {
        assert!(vote.contains(needle), "{needle}");
    }
}

#[test]
fn render_bounds_huge_inputs() {
    let huge = "word ".repeat(100_000);
    let prompt = render(&turn(Task::Critique {
        targets: vec![position("gpt", &huge)],
    }));
    assert!(prompt.user.len() < 8_000);
}

#[test]
fn word_count_matches_split_whitespace() {
    for text in [
        "",
        " ",
        "one",
        " two  words ",
        "a\tb\nc\r\nd",
        "  lead",
        "trail  ",
        "é à ü",
    ] {
        assert_eq!(
            word_count(text),
            text.split_whitespace().count() as u64,
            "{text:?}"
        );
    }
}

#[test]
fn truncate_chars_respects_char_boundaries() {
    assert_eq!(truncate_chars("héllo", 2), "hé");
    assert_eq!(truncate_chars("日本語", 5), "日本語");
    assert_eq!(truncate_chars("", 3), "");
}

#[test]
fn parses_plain_synthesis() {
    let parsed = parse_synthesis("SUMMARY: They agree.\nKEY POINTS:\n- one\n- two\n").unwrap();
    assert_eq!(
        parsed,
        Synthesis {
            summary: "They agree.".to_owned(),
            key_points: vec!["one".to_owned(), "two".to_owned()]
        }
    );
}

#[test]
fn parses_decorated_synthesis() {
    let text = "Here is my draft.\r\n\r\n## Summary\r\nThe agents\r\nmostly agree.\r\n\r\n**Key Points:**\r\n* first\r\n• second\r\n1. third\r\n12) fourth\r\nSome closing prose.\r\n";
    let parsed = parse_synthesis(text).unwrap();
    assert_eq!(parsed.summary, "The agents mostly agree.");
    assert_eq!(parsed.key_points, ["first", "second", "third", "fourth"]);
    let bold = parse_synthesis("**SUMMARY:** Short.\n**key_points**:\n- a").unwrap();
    assert_eq!(
        (bold.summary.as_str(), bold.key_points.len()),
        ("Short.", 1)
    );
}

#[test]
fn synthesis_without_key_points_needs_a_summary() {
    assert_eq!(
        parse_synthesis("summary: enough on its own")
            .unwrap()
            .key_points,
        Vec::<String>::new()
    );
    assert_eq!(
        parse_synthesis("SUMMARY:\nKEY POINTS:\n- a"),
        Err(ParseError::EmptySummary)
    );
    assert_eq!(
        parse_synthesis("Summary of the debate: none\n- a"),
        Err(ParseError::MissingSummary)
    );
    assert_eq!(parse_synthesis("garbage"), Err(ParseError::MissingSummary));
    assert_eq!(
        ParseError::MissingSummary.to_string(),
        "synthesis reply has no SUMMARY: line"
    );
}

#[test]
fn caps_lists_and_items() {
    let points: String = (0..15).map(|i| format!("- point {i}\n")).collect();
    let long = "é".repeat(800);
    let parsed = parse_synthesis(&format!("SUMMARY: s\nKEY POINTS:\n- {long}\n{points}")).unwrap();
    assert_eq!(parsed.key_points.len(), 10);
    assert_eq!(parsed.key_points[0].chars().count(), 500);
}

#[test]
fn parses_vote_with_every_section() {
    let text = "I have read it.\nVOTE: agree_with_modifications\nCONFIDENCE: 0.8\nREASONS:\n- covers cost\n- fair\nMODIFICATIONS:\n- add a pilot\n";
    let vote = parse_vote(text).unwrap();
    assert_eq!(vote.choice, VoteChoice::AgreeWithModifications);
    assert_eq!(vote.confidence, 0.8);
    assert_eq!(vote.reasons, ["covers cost", "fair"]);
    assert_eq!(vote.modifications, ["add a pilot"]);
}

#[test]
fn accepts_choice_spellings() {
    let cases = [
        ("agree", VoteChoice::Agree),
        ("Agree.", VoteChoice::Agree),
        ("**disagree**", VoteChoice::Disagree),
        (
            "agree with modifications",
            VoteChoice::AgreeWithModifications,
        ),
        (
            "Agree-With-Modifications",
            VoteChoice::AgreeWithModifications,
        ),
        (
            "`agree_with_modifications`",
            VoteChoice::AgreeWithModifications,
        ),
    ];
    for (written, choice) in cases {
        let vote = parse_vote(&format!(
            "**Vote:** {written}\r\n## Confidence: 70%\r\nReasons: inline reason"
        ))
        .unwrap();
        assert_eq!(vote.choice, choice, "{written}");
        assert_eq!(vote.reasons, ["inline reason"]);
        assert!(vote.modifications.is_empty());
    }
}

#[test]
fn confidence_is_read_tolerantly_and_clamped() {
    let confidence = |value: &str| {
        parse_vote(&format!("VOTE: agree\nCONFIDENCE: {value}")).map(|v| v.confidence)
    };
    assert_eq!(confidence("80%"), Ok(0.8));
    assert_eq!(confidence("0.65 (fairly sure)"), Ok(0.65));
    assert_eq!(confidence("1.5"), Ok(1.0));
    assert_eq!(confidence("-0.2"), Ok(0.0));
    assert_eq!(confidence("150 %"), Ok(1.0));
    for bad in ["NaN", "high", "", "-"] {
        assert!(
            matches!(confidence(bad), Err(ParseError::InvalidConfidence(_))),
            "{bad}"
        );
    }
}

#[test]
fn vote_errors_name_what_is_missing() {
    assert_eq!(parse_vote("CONFIDENCE: 0.5"), Err(ParseError::MissingVote));
    assert_eq!(
        ParseError::MissingVote.to_string(),
        "vote reply has no VOTE: line"
    );
    assert_eq!(
        parse_vote("VOTE: agree\nREASONS:\n- x"),
        Err(ParseError::MissingConfidence)
    );
    assert!(matches!(
        parse_vote("VOTE: maybe\nCONFIDENCE: 1"),
        Err(ParseError::UnknownVote(_))
    ));
    assert_eq!(
        parse_vote("I think it is fine."),
        Err(ParseError::MissingVote)
    );
    assert_eq!(
        parse_vote("The vote is agree, confidence 0.9"),
        Err(ParseError::MissingVote)
    );
}
