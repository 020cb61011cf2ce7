//! `agon debate --server` against the real binary under a tight per-user
//! rate limit and slow providers: it waits out the 429s as `Retry-After`
//! says and ends with the consensus, showing failed agents and the
//! synthesis and vote stages on the way.

use std::time::Duration;

use super::lifecycle::{Binary, binary_env};
use crate::support::provider::{Behavior, FakeProvider};
use crate::support::{Kind, TEST_TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn debate_on_a_server_waits_out_rate_limits_and_completes() {
    let fake = FakeProvider::start().await;
    fake.script(|call| match call.model.as_str() {
        "gpt-4o-mini" => Behavior::ServerError,
        _ => Behavior::slow(1000),
    });
    let dir = tempfile::tempdir().unwrap();
    // Four looks a minute, no burst: the fifth request within 15 s is a 429.
    let limits = [
        ("SERVICE_RATE_LIMIT_DEFAULT", "4"),
        ("SERVICE_BURST_MULTIPLIER", "1"),
    ];
    let (env, _nats) = binary_env(Kind::Sqlite, &fake, &dir, &limits).await;
    let mut server = Binary::start(&env).await;

    let client_dir = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agon"));
    command
        .args(["debate", "Patient topic", "--rounds", "1", "--json"])
        .args(["--agents", "claude,gpt-4o,openai:gpt-4o-mini"])
        .args(["--server", &server.base, "--token", TEST_TOKEN])
        .env_clear()
        .env("SERVICE_DATA_DIR", client_dir.path())
        .kill_on_drop(true);
    let run = tokio::time::timeout(Duration::from_secs(120), command.output());
    let output = run.await.expect("agon debate never ended").unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{output:?}");
    assert!(
        stderr.contains("rate limited (429)"),
        "it met a 429: {stderr}"
    );
    let consensus: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        consensus["failed_agents"],
        serde_json::json!(["openai:gpt-4o-mini"])
    );
    assert_eq!(
        consensus["votes"].as_array().unwrap().len(),
        2,
        "{consensus}"
    );
    for shown in [
        "FAILED openai:gpt-4o-mini in round 1 (opening): http_status",
        "synthesis by claude: ",
        "vote · claude ",
        "vote · gpt-4o ",
        "[completed]",
    ] {
        assert!(stderr.contains(shown), "{shown:?} not shown: {stderr}");
    }
    assert!(server.terminate().await.success());
}
