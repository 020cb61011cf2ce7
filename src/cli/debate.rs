//! `agon debate`: runs one debate from the command line, on the local store
//! (the service's own runner, in process, sealing what it wrote) or against
//! a running service (`remote.rs`), with a live progress line per
//! contribution, failed agent and stage, and the consensus at the end.

use std::io::Write;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use agon_aggregates::debate::{ConsensusMode, DebateStatus};
use agon_projections::Debates;
use serde_json::Value;
use thiserror::Error;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::debates::NewDebate;
use crate::projection::Documents;
use crate::runner::Delta;
use crate::views::debates::DebateDetail;

/// How often progress on the local store is looked at (a local read).
const POLL: Duration = Duration::from_millis(100);

/// What `agon debate` was asked.
#[derive(Debug, Clone)]
pub struct DebateRequest {
    pub topic: String,
    pub agents: Vec<String>,
    pub rounds: Option<u32>,
    pub context: Option<String>,
    pub consensus: Option<String>,
    pub threshold: Option<f64>,
    /// Print the consensus as JSON (progress still goes to stderr).
    pub json: bool,
}

#[derive(Debug, Error)]
pub enum CliError {
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Failed(String),
    #[error("cannot reach {url}: {cause}")]
    Unreachable { url: String, cause: String },
    #[error("the debate's events could not be sealed: {0}")]
    Seal(String),
}

/// Prints, from a debate detail as JSON, what was not printed yet: each
/// contribution, each failed agent, the stage under way (rounds, then the
/// synthesis and the vote), the synthesis, and the votes at the end.
#[derive(Debug, Default)]
pub(super) struct Progress {
    printed: usize,
    failures: usize,
    stage: String,
    synthesis: bool,
    votes: bool,
}

/// The turn whose streamed text was printed last, while its line is open.
static STREAMING: Mutex<Option<String>> = Mutex::new(None);

/// Prints a piece of an agent's text as it streams (the `data` of an
/// `agent.delta` frame): a line per turn, opened by who is writing.
pub(super) fn show_delta(data: &Value) {
    let (agent, phase) = (
        data["agent"].as_str().unwrap_or(""),
        data["phase"].as_str().unwrap_or(""),
    );
    let turn = format!("{agent}/{}/{phase}/{}", data["round"], data["attempt"]);
    // Always stderr first, then STREAMING: `Progress::show`, on another
    // thread, takes them in that order too.
    let mut err = std::io::stderr().lock();
    let mut streaming = STREAMING.lock().unwrap_or_else(PoisonError::into_inner);
    if streaming.as_deref() != Some(turn.as_str()) {
        if streaming.is_some() {
            let _ = writeln!(err);
        }
        let _ = write!(err, "  {agent} (round {}, {phase}) › ", data["round"]);
        *streaming = Some(turn);
    }
    let text = data["text"].as_str().unwrap_or("").replace('\n', " ");
    let _ = write!(err, "{text}");
    let _ = err.flush();
}

/// Ends a line of streamed text before another line is printed; the caller
/// holds stderr's lock (taken before STREAMING's, as in [`show_delta`]).
fn end_streamed_line(err: &mut impl Write) {
    let mut streaming = STREAMING.lock().unwrap_or_else(PoisonError::into_inner);
    if streaming.take().is_some() {
        let _ = writeln!(err);
    }
}

impl Progress {
    pub(super) fn show(&mut self, detail: &Value) {
        let empty = Vec::new();
        let mut err = std::io::stderr().lock();
        let messages = detail["messages"].as_array().unwrap_or(&empty);
        if messages.len() > self.printed {
            end_streamed_line(&mut err);
        }
        for message in messages.iter().skip(self.printed) {
            let _ = writeln!(
                err,
                "  round {} · {:<10} · {:<16} {} tokens ({})",
                message["round"],
                message["phase"].as_str().unwrap_or(""),
                message["agent"].as_str().unwrap_or(""),
                message["tokens_out"],
                message["provider"].as_str().unwrap_or(""),
            );
        }
        self.printed = self.printed.max(messages.len());
        let failures = detail["failures"].as_array().unwrap_or(&empty);
        for failure in failures.iter().skip(self.failures) {
            let _ = writeln!(
                err,
                "  FAILED {} in round {} ({}): {}: {}",
                failure["agent"].as_str().unwrap_or(""),
                failure["round"],
                failure["phase"].as_str().unwrap_or(""),
                failure["code"].as_str().unwrap_or(""),
                failure["error"].as_str().unwrap_or(""),
            );
        }
        self.failures = self.failures.max(failures.len());
        if !self.synthesis && detail["synthesis"].is_object() {
            self.synthesis = true;
            let synthesis = &detail["synthesis"];
            let _ = writeln!(
                err,
                "  synthesis by {}: {}",
                synthesis["agent"].as_str().unwrap_or(""),
                first_line(synthesis["summary"].as_str().unwrap_or("")),
            );
        }
        let votes = detail["consensus"]["votes"].as_array().unwrap_or(&empty);
        if !self.votes && !votes.is_empty() {
            self.votes = true;
            for vote in votes {
                let _ = writeln!(
                    err,
                    "  vote · {:<16} {} (confidence {:.2})",
                    vote["agent"].as_str().unwrap_or(""),
                    vote["choice"].as_str().unwrap_or(""),
                    vote["confidence"].as_f64().unwrap_or(0.0),
                );
            }
        }
        let status = detail["status"].as_str().unwrap_or("");
        let stage = match (detail["current_phase"].as_str(), &detail["current_round"]) {
            (Some(phase @ ("synthesis" | "vote")), _) => format!("[{status}] {phase}"),
            (Some(phase), Value::Number(round)) => {
                format!("[{status}] phase {phase} (round {round})")
            }
            (Some(phase), _) => format!("[{status}] phase {phase}"),
            (None, _) => format!("[{status}]"),
        };
        if stage != self.stage {
            end_streamed_line(&mut err);
            let _ = writeln!(err, "{stage}");
            self.stage = stage;
        }
    }
}

/// The first line of `text`, cut to 100 characters.
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    match line.char_indices().nth(100) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

/// The finished debate's outcome printed, or why it failed.
pub(super) fn conclude(detail: &Value, json: bool) -> Result<(), CliError> {
    if detail["status"] == "failed" {
        return Err(CliError::Failed(format!(
            "debate failed: {}",
            detail["error"].as_str().unwrap_or("unknown reason")
        )));
    }
    let consensus = &detail["consensus"];
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(consensus).unwrap_or_default()
        );
        return Ok(());
    }
    let text = &consensus["consensus"];
    let votes = &consensus["voting_summary"];
    println!("{}", consensus["status"].as_str().unwrap_or(""));
    println!(
        "confidence {:.2}",
        text["confidence"].as_f64().unwrap_or(0.0)
    );
    println!("summary: {}", text["summary"].as_str().unwrap_or(""));
    for (title, key) in [
        ("key points", "key_points"),
        ("disagreements", "disagreements"),
    ] {
        let items = text[key].as_array().cloned().unwrap_or_default();
        if !items.is_empty() {
            println!("{title}:");
            for item in items {
                println!("  - {}", item.as_str().unwrap_or(""));
            }
        }
    }
    println!(
        "votes: agree {}, agree with modifications {}, disagree {}",
        votes["agree"], votes["agree_with_modifications"], votes["disagree"]
    );
    Ok(())
}

fn new_debate(request: &DebateRequest) -> Result<NewDebate, CliError> {
    let consensus = match &request.consensus {
        None => None,
        Some(text) => Some(ConsensusMode::parse(text).ok_or_else(|| {
            CliError::Refused(format!(
                "--consensus {text:?} is not one of majority, supermajority, unanimous, judge, weighted"
            ))
        })?),
    };
    Ok(NewDebate {
        topic: request.topic.clone(),
        context: request.context.clone(),
        agents: request.agents.clone(),
        auto_select: true,
        rounds: request.rounds,
        threshold: request.threshold,
        consensus,
        ..NewDebate::default()
    })
}

/// Prints the streamed text of debate `id` until aborted.
async fn print_deltas(
    mut deltas: tokio::sync::broadcast::Receiver<crate::bus::ephemeral::Payload>,
    id: String,
) {
    loop {
        match deltas.recv().await {
            Ok(payload) => {
                if let Some(delta) = Delta::decode(&payload)
                    && delta.debate_id == id
                {
                    show_delta(&serde_json::to_value(&delta).unwrap_or_default());
                }
            }
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Aborts its task when dropped.
pub(super) struct AbortOnDrop(pub(super) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs the debate on this machine's store with the service's own runner.
pub async fn run_local(app: App, request: DebateRequest) -> Result<(), CliError> {
    let new = new_debate(&request)?;
    let stop = CancellationToken::new();
    let tasks = app
        .start_background(&stop)
        .await
        .map_err(|e| CliError::Failed(e.to_string()))?;
    // Listening before the debate exists: its first words are not missed.
    let deltas = app.deltas.subscribe();
    let outcome = async {
        let debate = app
            .debates
            .create(new, None, None)
            .await
            .map_err(|e| CliError::Refused(e.to_string()))?;
        eprintln!(
            "debate {} on {:?} with {}",
            debate.id,
            debate.topic,
            debate.agents.join(", ")
        );
        let documents = Documents::new(app.log.clone());
        let mut progress = Progress::default();
        let _streaming = AbortOnDrop(tokio::spawn(print_deltas(deltas, debate.id.clone())));
        loop {
            if let Some(debate) = documents
                .get::<Debates>(&debate.id)
                .await
                .map_err(|e| CliError::Failed(e.to_string()))?
            {
                let detail = serde_json::to_value(DebateDetail::from(&debate)).unwrap_or_default();
                progress.show(&detail);
                if debate.status.is_finished() {
                    return conclude(&detail, request.json);
                }
                if debate.status == DebateStatus::Paused {
                    return Err(CliError::Failed("the debate was paused".to_owned()));
                }
            }
            tokio::time::sleep(POLL).await;
        }
    }
    .await;
    // Once the runner has stopped writing, what this run committed is
    // sealed before the store closes, so that `agon verify` finds nothing
    // unsealed after it (the service seals on a timer; a one-off command
    // has none).
    app.runner.drain(app.settings.agents.shutdown_grace).await;
    let sealed = app.log.seal_now(&app.seal_key).await;
    stop.cancel();
    app.finish(tasks).await;
    match sealed {
        Ok(Some(seal)) => eprintln!(
            "seal {} covers {} events",
            seal.seal_number, seal.event_count
        ),
        Ok(None) => {}
        Err(e) => return outcome.and(Err(CliError::Seal(e.to_string()))),
    }
    outcome
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    /// The socket's task prints deltas while the poller prints messages;
    /// the two once took stderr's and STREAMING's locks in opposite orders
    /// and `agon debate --server` hung for good.
    #[test]
    fn streamed_text_and_progress_never_wait_on_each_other() {
        let (done, finished) = mpsc::channel();
        let poller = {
            let done = done.clone();
            std::thread::spawn(move || {
                let mut err = std::io::stderr().lock();
                // Lets the other thread reach the locks while stderr is held.
                std::thread::sleep(Duration::from_millis(200));
                end_streamed_line(&mut err);
                drop(err);
                let _ = done.send("poller");
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        let socket = std::thread::spawn(move || {
            let data =
                json!({"agent": "a", "phase": "opening", "round": 1, "attempt": 1, "text": ""});
            show_delta(&data);
            let _ = done.send("socket");
        });
        for _ in 0..2 {
            finished
                .recv_timeout(Duration::from_secs(30))
                .expect("the two printers are waiting on each other");
        }
        poller.join().unwrap();
        socket.join().unwrap();
    }
}
