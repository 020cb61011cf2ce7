//! The `agon` command: parses arguments and runs the subcommand (each in
//! `agon::cli`): `serve`, `verify`, `seal`, `replay`, `debate`, `keys public`,
//! `backup`, `restore`.

use std::io::IsTerminal;
use std::process::ExitCode;

use agon::app::App;
use agon::cli;
use agon::config::Settings;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "agon", version, about = "Agon: a multi-agent debate service")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the service.
    Serve {
        /// Port of the HTTP API.
        #[arg(long, default_value_t = 8080)]
        api_port: u16,
        /// Port of the WebSocket endpoint `/ws`.
        #[arg(long, default_value_t = 8765)]
        ws_port: u16,
        /// Address to bind: loopback by default; `0.0.0.0` (or `::`) to be
        /// reachable from other machines, e.g. in a container.
        #[arg(long, default_value = "127.0.0.1")]
        host: String,
    },
    /// Check every stream's hash chain and every seal; exit 1 at the first
    /// break, 2 when there is no store to check.
    Verify {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Check seals against this published hex public key only (no key file needed).
        #[arg(long, value_name = "HEX")]
        public_key: Option<String>,
        /// A seal saved earlier (`agon seal --json`) that the log must still hold.
        #[arg(long, value_name = "FILE")]
        expect_seal: Option<std::path::PathBuf>,
        /// Check only the events from this position on (and the seals over them).
        #[arg(long, value_name = "POSITION")]
        from_position: Option<i64>,
        /// Check only the events up to this position (and the seals over them).
        #[arg(long, value_name = "POSITION")]
        to_position: Option<i64>,
    },
    /// Seal the events committed since the last seal, now.
    Seal {
        /// Print the newest seal as JSON, to save for `agon verify --expect-seal`.
        #[arg(long)]
        json: bool,
    },
    /// Rebuild read models from the whole log.
    Replay {
        /// One projection by name; all when omitted.
        #[arg(long)]
        projection: Option<String>,
    },
    /// Run one debate and print its consensus: on the local store, or on a
    /// running service with --server.
    Debate(DebateArgs),
    /// Back up the store's log and seals into SERVICE_BACKUP_DIR.
    Backup {
        /// full or snapshot (both a whole, consistent copy).
        #[arg(long = "type", default_value = "full")]
        backup_type: String,
        #[arg(long)]
        description: Option<String>,
    },
    /// Restore a backup (its directory, or its name in SERVICE_BACKUP_DIR)
    /// into the empty store the settings name, rebuild every read model and
    /// verify the log.
    Restore {
        /// The backup's directory or name.
        #[arg(long)]
        from: String,
    },
    /// Show key material.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Work with decision receipts offline.
    Receipt {
        #[command(subcommand)]
        command: ReceiptCommand,
    },
}

#[derive(Debug, Subcommand)]
enum ReceiptCommand {
    /// Verify a downloaded receipt with the seal public key alone.
    Verify {
        /// The receipt file, exactly as served.
        file: std::path::PathBuf,
        /// Hex ed25519 public key (`agon keys public`).
        #[arg(long)]
        public_key: String,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// The flags of `agon debate`.
#[derive(Debug, clap::Args)]
struct DebateArgs {
    /// The debate's topic.
    topic: String,
    /// Comma-separated agent names (demo-a,demo-b,claude,openai:gpt-4o, ...).
    #[arg(long, value_delimiter = ',', default_value = "demo-a,demo-b,demo-c")]
    agents: Vec<String>,
    /// Rounds (1 to 12; default 3).
    #[arg(long)]
    rounds: Option<u32>,
    /// Background the agents should consider.
    #[arg(long)]
    context: Option<String>,
    /// majority, supermajority, unanimous, judge or weighted.
    #[arg(long)]
    consensus: Option<String>,
    /// Agreeing share that counts as consensus (0 to 1).
    #[arg(long)]
    threshold: Option<f64>,
    /// Print the consensus as JSON.
    #[arg(long)]
    json: bool,
    /// Base URL of a running service to run the debate on.
    #[arg(long)]
    server: Option<String>,
    /// Bearer credential for --server (an access token or API key).
    #[arg(long, env = "SERVICE_API_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

#[derive(Debug, Subcommand)]
enum KeysCommand {
    /// Print the hex ed25519 public key that verifies seals.
    Public,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut settings = match Settings::from_env() {
        Ok(settings) => settings,
        Err(e) => return fail(&e),
    };
    // Links in mails point at the served address unless SERVICE_PUBLIC_URL says otherwise.
    if let Command::Serve { host, api_port, .. } = &cli.command
        && std::env::var_os("SERVICE_PUBLIC_URL").is_none()
    {
        settings.auth.public_url = agon::mail::served_url(host, *api_port);
    }
    init_logging(&settings);
    // Start-up warnings concern the service; the other commands keep quiet.
    if matches!(cli.command, Command::Serve { .. }) {
        for warning in &settings.warnings {
            tracing::warn!("{warning}");
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&e),
    };
    runtime.block_on(run(cli.command, settings))
}

async fn run(command: Command, settings: Settings) -> ExitCode {
    if let Command::Debate(args) = &command
        && let Some(server) = &args.server
    {
        let outcome = cli::run_remote(server, args.token.as_deref(), debate_request(args)).await;
        return debate_exit(outcome);
    }
    if let Some(exit) = inspect(&command, &settings).await {
        return exit;
    }
    // Replay works on the log alone: no bus, Redis, mail or runner.
    if let Command::Replay { projection } = command {
        let replayed = match agon::app::open_log(&settings).await {
            Ok(log) => {
                let outcome = cli::replay::replay(&log, projection).await;
                log.db().close().await;
                outcome
            }
            Err(e) => Err(e.to_string()),
        };
        return exit(replayed);
    }
    // Backup and restore work on the log alone too.
    if matches!(command, Command::Backup { .. } | Command::Restore { .. }) {
        return Box::pin(backup_or_restore(command, &settings)).await;
    }
    let app = match App::build(settings).await {
        Ok(app) => app,
        Err(e) => return fail(&e),
    };
    match command {
        Command::Serve {
            api_port,
            ws_port,
            host,
        } => exit(cli::serve::serve(app, &host, api_port, ws_port).await),
        Command::Debate(args) => {
            debate_exit(Box::pin(cli::run_local(app, debate_request(&args))).await)
        }
        // Run before the app: `inspect` (whose start would create a store
        // and key) and replay (which needs the log alone).
        Command::Verify { .. }
        | Command::Seal { .. }
        | Command::Keys { .. }
        | Command::Receipt { .. }
        | Command::Replay { .. }
        | Command::Backup { .. }
        | Command::Restore { .. } => ExitCode::from(2),
    }
}

/// `agon backup` and `agon restore`, on the log alone.
async fn backup_or_restore(command: Command, settings: &Settings) -> ExitCode {
    let log = match agon::app::open_log(settings).await {
        Ok(log) => log,
        Err(e) => return fail(&e),
    };
    let outcome = match command {
        Command::Backup {
            backup_type,
            description,
        } => cli::backup::backup(settings, &log, &backup_type, description).await,
        Command::Restore { from } => cli::backup::restore(settings, &log, &from).await,
        _ => Ok(()),
    };
    log.db().close().await;
    exit(outcome)
}

/// Runs the commands that inspect or seal an existing store without
/// building the app; `None` for the others.
async fn inspect(command: &Command, settings: &Settings) -> Option<ExitCode> {
    let outcome = match command {
        Command::Verify {
            json,
            public_key,
            expect_seal,
            from_position,
            to_position,
        } => {
            let request = cli::verify::VerifyRequest {
                json: *json,
                public_key: public_key.clone(),
                expect_seal: expect_seal.clone(),
                range: cli::verify::position_range(*from_position, *to_position),
            };
            match cli::verify::verify(settings, &request).await {
                Ok(true) => Ok(ExitCode::SUCCESS),
                Ok(false) => Ok(ExitCode::FAILURE),
                Err(e) => Err(e),
            }
        }
        Command::Seal { json } => cli::verify::seal(settings, *json)
            .await
            .map(|()| ExitCode::SUCCESS),
        Command::Keys {
            command: KeysCommand::Public,
        } => cli::verify::keys_public(settings).map(|()| ExitCode::SUCCESS),
        Command::Receipt {
            command:
                ReceiptCommand::Verify {
                    file,
                    public_key,
                    json,
                },
        } => {
            return Some(match cli::receipt::verify(file, public_key, *json) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::FAILURE,
                Err(e) => fail(&e),
            });
        }
        _ => return None,
    };
    Some(outcome.unwrap_or_else(|e| fail(&e)))
}

/// What `agon debate` was asked (its flags other than where it runs).
fn debate_request(args: &DebateArgs) -> cli::DebateRequest {
    cli::DebateRequest {
        topic: args.topic.clone(),
        agents: args.agents.clone(),
        rounds: args.rounds,
        context: args.context.clone(),
        consensus: args.consensus.clone(),
        threshold: args.threshold,
        json: args.json,
    }
}

/// Exit 0 when the debate completed, 1 when it failed, 2 when it could not run.
fn debate_exit(outcome: Result<(), cli::CliError>) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(cli::CliError::Failed(reason)) => {
            eprintln!("agon: {reason}");
            ExitCode::FAILURE
        }
        Err(e) => fail(&e),
    }
}

fn init_logging(settings: &Settings) {
    let filter = tracing_subscriber::EnvFilter::new(settings.log_level.directive());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    if settings.log_json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// 0 on success, else the message and 2.
fn exit(outcome: Result<(), String>) -> ExitCode {
    outcome.map_or_else(|e| fail(&e), |()| ExitCode::SUCCESS)
}

fn fail(error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("agon: {error}");
    ExitCode::from(2)
}
