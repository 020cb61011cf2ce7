//! `agon debate`: runs one debate from the command line, on the local store
//! (the service's own runner, in process) or against a running service, with
//! a live progress line per contribution and the consensus at the end.

use std::io::Write;
use std::time::Duration;

use agon_aggregates::debate::{ConsensusMode, DebateStatus};
use agon_projections::Debates;
use serde_json::Value;
use thiserror::Error;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::debates::{self, NewDebate};
use crate::http::debates::views::DebateDetail;
use crate::projection::Documents;

/// How often progress is looked at.
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
}

/// Prints each contribution not yet printed, from a debate detail as JSON.
#[derive(Debug, Default)]
struct Progress {
    printed: usize,
    last_status: String,
}

impl Progress {
    fn show(&mut self, detail: &Value) {
        let empty = Vec::new();
        let messages = detail["messages"].as_array().unwrap_or(&empty);
        let mut err = std::io::stderr().lock();
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
        let status = detail["status"].as_str().unwrap_or("").to_owned();
        if status != self.last_status {
            let phase = detail["current_phase"].as_str().unwrap_or("-");
            let _ = writeln!(err, "[{status}] phase {phase}");
            self.last_status = status;
        }
    }
}

/// The finished debate's outcome printed, or why it failed.
fn conclude(detail: &Value, json: bool) -> Result<(), CliError> {
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

/// Runs the debate on this machine's store with the service's own runner.
pub async fn run_local(app: App, request: DebateRequest) -> Result<(), CliError> {
    let new = new_debate(&request)?;
    let stop = CancellationToken::new();
    let tasks = app
        .start_background(&stop)
        .await
        .map_err(|e| CliError::Failed(e.to_string()))?;
    let outcome = async {
        let debate = debates::create(&app, new, None, None)
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
    stop.cancel();
    app.finish(tasks).await;
    outcome
}

/// Runs the debate on a running service at `server`, with `token` as its bearer credential.
pub async fn run_remote(
    server: &str,
    token: Option<&str>,
    request: DebateRequest,
) -> Result<(), CliError> {
    let base = server.trim_end_matches('/');
    let client = reqwest::Client::new();
    let unreachable = |e: reqwest::Error| CliError::Unreachable {
        url: base.to_owned(),
        cause: e.to_string(),
    };
    let with_token = |builder: reqwest::RequestBuilder| match token {
        Some(token) => builder.bearer_auth(token),
        None => builder,
    };
    let mut body = serde_json::json!({"topic": request.topic, "agents": request.agents});
    for (key, value) in [
        ("rounds", request.rounds.map(Value::from)),
        ("context", request.context.clone().map(Value::from)),
        ("consensus", request.consensus.clone().map(Value::from)),
    ] {
        if let Some(value) = value {
            body[key] = value;
        }
    }
    if let Some(threshold) = request.threshold {
        body["protocol"] = serde_json::json!({"consensus_threshold": threshold});
    }
    let response = with_token(client.post(format!("{base}/api/v1/debates")))
        .json(&body)
        .send()
        .await
        .map_err(unreachable)?;
    let status = response.status();
    let created: Value = response.json().await.map_err(unreachable)?;
    if !status.is_success() {
        return Err(CliError::Refused(format!(
            "the service refused the debate ({status}): {}",
            created["error"]["message"]
                .as_str()
                .or(created["error"].as_str())
                .unwrap_or("")
        )));
    }
    let id = created["id"].as_str().unwrap_or_default().to_owned();
    eprintln!("debate {id} on {server}");
    let mut progress = Progress::default();
    loop {
        let detail: Value = with_token(client.get(format!("{base}/api/v1/debates/{id}")))
            .send()
            .await
            .map_err(unreachable)?
            .json()
            .await
            .map_err(unreachable)?;
        progress.show(&detail);
        match detail["status"].as_str() {
            Some("completed" | "failed") => return conclude(&detail, request.json),
            Some("paused") => return Err(CliError::Failed("the debate was paused".to_owned())),
            Some(_) => {}
            None => {
                return Err(CliError::Failed(format!("unexpected answer: {detail}")));
            }
        }
        tokio::time::sleep(POLL * 2).await;
    }
}
