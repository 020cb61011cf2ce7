//! The start-a-debate form marks an agent whose circuit breaker is open
//! (read from the same registry as `/api/agents/circuit-breakers`), and a
//! provider without its key is offered disabled, naming its variable.

use super::{browser, ui_sign_in};
use crate::serve::spawn_with;
use crate::support::provider::{
    Behavior, FakeProvider, create_debate, quiet_limits, wait_finished,
};
use crate::support::{Kind, client, on_both_backends};

on_both_backends! {
    open_breakers_and_missing_keys_are_marked => open_breakers_and_missing_keys_are_marked;
}

async fn open_breakers_and_missing_keys_are_marked(kind: Kind) {
    let agent = "anthropic:claude-sonnet-4-5";
    let fake = FakeProvider::start().await;
    fake.script(move |c| {
        if c.agent == agent {
            Behavior::ServerError
        } else {
            Behavior::Answer
        }
    });
    let mut env = fake.env();
    env.extend(quiet_limits());
    let vars: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let app = spawn_with(kind, &vars).await;
    let jar = ui_sign_in(&app.base, "kim@example.com").await;
    let form = || async {
        browser()
            .get(format!("{}/debates/new", app.base))
            .header("cookie", jar.header())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    let before = form().await;
    assert!(!before.contains("Circuit open"), "{before}");
    assert!(
        before.contains("unavailable: set MISTRAL_API_KEY"),
        "an unconfigured provider names its variable: {before}"
    );
    assert!(
        !before.contains("unavailable: set ANTHROPIC_API_KEY"),
        "{before}"
    );

    // Each debate costs the agent one call of two attempts, then it drops out.
    let c = client();
    for _ in 0..3 {
        let id = create_debate(&c, &app.base, &[agent, "demo-a", "demo-b"], 1).await;
        wait_finished(&c, &app.base, &id).await;
    }
    let after = form().await;
    assert!(after.contains("Circuit open"), "{after}");
    assert!(
        after.contains(&format!("<li>{agent}: retry in ")),
        "{after}"
    );
    assert!(after.contains("circuit open: calls refused for"), "{after}");
}
