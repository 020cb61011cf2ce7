//! A debate as a Markdown report a person reads, as both faces export it
//! (`GET /api/debates/{id}/export/md` and the web page's export link).

use agon_aggregates::debate::{Debate, VoteChoice};

fn choice(choice: VoteChoice) -> &'static str {
    match choice {
        VoteChoice::Agree => "agree",
        VoteChoice::AgreeWithModifications => "agree_with_modifications",
        VoteChoice::Disagree => "disagree",
    }
}

/// A report a person reads: the question, who debated, what each said by
/// round and phase, and the outcome.
pub fn markdown(debate: &Debate) -> String {
    let mut out = format!("# {}\n\n", one_line(&debate.topic));
    out.push_str(&format!(
        "- Debate: `{}`\n- Status: {}\n- Agents: {}\n- Rounds: {}\n",
        debate.id,
        debate.status.as_str(),
        debate.agents.join(", "),
        debate.last_round(),
    ));
    if let Some(context) = &debate.context {
        out.push_str(&format!("\n## Context\n\n{context}\n"));
    }
    let mut heading = None;
    for m in &debate.messages {
        let this = (m.round, m.phase.as_str());
        if heading != Some(this) {
            out.push_str(&format!("\n## Round {}: {}\n", m.round, m.phase));
            heading = Some(this);
        }
        out.push_str(&format!("\n### {}\n\n{}\n", m.agent, m.content.trim()));
    }
    if let Some(consensus) = &debate.consensus {
        out.push_str(&format!(
            "\n## Consensus\n\n{}\n\n- Confidence: {:.2}\n",
            consensus.summary.trim(),
            consensus.confidence
        ));
        for point in &consensus.key_points {
            out.push_str(&format!("- {}\n", one_line(point)));
        }
    }
    if !debate.votes.is_empty() {
        out.push_str("\n## Votes\n\n| Agent | Vote | Confidence |\n|---|---|---|\n");
        for vote in &debate.votes {
            out.push_str(&format!(
                "| {} | {} | {:.2} |\n",
                cell(&vote.agent),
                choice(vote.choice),
                vote.confidence
            ));
        }
    }
    out
}

/// Text on one line (a heading or list item must not break).
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Text safe in a table cell.
fn cell(text: &str) -> String {
    one_line(text).replace('|', "\\|")
}
