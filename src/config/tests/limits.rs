//! The deployment's limits: each a variable with a default and a range,
//! refused out of it naming the variable.

use super::settings;

/// Each `(variable, value)` alone is refused, naming its variable.
fn refused(cases: &[(&str, &str)]) {
    for &(variable, value) in cases {
        let err = settings(&[(variable, value)]).unwrap_err();
        assert_eq!(err.variable, variable, "{value}");
    }
}

#[test]
fn a_debate_s_size_is_the_deployment_s_within_what_defaults_need() {
    let limits = settings(&[]).unwrap().agents.debate_limits;
    assert_eq!(limits, agon_aggregates::debate::Limits::DEFAULT);
    let wide = settings(&[
        ("SERVICE_MAX_AGENTS", "20"),
        ("SERVICE_MAX_ROUNDS", "50"),
        ("SERVICE_MAX_PHASES", "10"),
        ("SERVICE_MAX_PHASE_CHARS", "60"),
    ])
    .unwrap()
    .agents
    .debate_limits;
    assert_eq!(
        (wide.agents, wide.rounds, wide.phases, wide.phase_chars),
        (20, 50, 10, 60)
    );
    // Below what a request naming nothing gets (three picked agents, the
    // four default phases, "critique"), or past the upper bounds: refused.
    refused(&[
        ("SERVICE_MAX_AGENTS", "2"),
        ("SERVICE_MAX_AGENTS", "101"),
        ("SERVICE_MAX_ROUNDS", "0"),
        ("SERVICE_MAX_ROUNDS", "1001"),
        ("SERVICE_MAX_PHASES", "3"),
        ("SERVICE_MAX_PHASE_CHARS", "7"),
    ]);
}

#[test]
fn a_request_s_most_is_the_deployment_s_from_the_default_page_up() {
    let http = settings(&[]).unwrap().http;
    let pages = http.pages;
    assert_eq!(
        (pages.max_page, pages.max_batch, pages.max_export),
        (100, 100, 10_000)
    );
    assert_eq!(http.recent_errors, 200);
    let wide = settings(&[
        ("SERVICE_MAX_PAGE_SIZE", "500"),
        ("SERVICE_MAX_BATCH_IDS", "7"),
        ("SERVICE_MAX_EXPORT_DEBATES", "50000"),
    ])
    .unwrap()
    .http
    .pages;
    assert_eq!(
        (wide.max_page, wide.max_batch, wide.max_export),
        (500, 7, 50_000)
    );
    // A page smaller than §8.2's default of 20 would refuse a request
    // naming none.
    refused(&[
        ("SERVICE_MAX_PAGE_SIZE", "19"),
        ("SERVICE_MAX_PAGE_SIZE", "10001"),
        ("SERVICE_MAX_BATCH_IDS", "0"),
        ("SERVICE_MAX_EXPORT_DEBATES", "0"),
        ("SERVICE_MAX_EXPORT_DEBATES", "1000001"),
        ("SERVICE_RECENT_ERRORS", "0"),
    ]);
}

#[test]
fn agent_calls_and_breakers_follow_their_variables() {
    let agents = settings(&[]).unwrap().agents;
    assert_eq!(
        (
            agents.breaker_failures,
            agents.breaker_successes,
            agents.openai.max_tokens
        ),
        (5, 2, 1024)
    );
    let tuned = settings(&[
        ("SERVICE_CIRCUIT_BREAKER_FAILURES", "9"),
        ("SERVICE_CIRCUIT_BREAKER_SUCCESSES", "4"),
        ("SERVICE_AGENT_MAX_TOKENS", "4096"),
        ("SERVICE_OPENAI_COMPATIBLE_URL", "http://127.0.0.1:11434/v1"),
    ])
    .unwrap()
    .agents;
    assert_eq!((tuned.breaker_failures, tuned.breaker_successes), (9, 4));
    let providers = [
        &tuned.anthropic,
        &tuned.openai,
        &tuned.openrouter,
        &tuned.mistral,
        &tuned.gemini,
        &tuned.xai,
        tuned.compatible.as_ref().unwrap(),
    ];
    assert!(providers.iter().all(|p| p.max_tokens == 4096));
    refused(&[
        ("SERVICE_CIRCUIT_BREAKER_FAILURES", "0"),
        ("SERVICE_CIRCUIT_BREAKER_SUCCESSES", "1001"),
        ("SERVICE_AGENT_MAX_TOKENS", "0"),
    ]);
}

#[test]
fn mail_links_and_the_mfa_step_last_as_their_variables_say() {
    let auth = settings(&[]).unwrap().auth;
    assert_eq!(
        (
            auth.verification_hours,
            auth.invite_days,
            auth.mfa_step_seconds
        ),
        (24, 7, 300)
    );
    let tuned = settings(&[
        ("SERVICE_EMAIL_VERIFICATION_HOURS", "48"),
        ("SERVICE_INVITE_DAYS", "30"),
        ("SERVICE_MFA_STEP_SECONDS", "600"),
    ])
    .unwrap()
    .auth;
    assert_eq!(
        (
            tuned.verification_hours,
            tuned.invite_days,
            tuned.mfa_step_seconds
        ),
        (48, 30, 600)
    );
    refused(&[
        ("SERVICE_EMAIL_VERIFICATION_HOURS", "0"),
        ("SERVICE_INVITE_DAYS", "366"),
        ("SERVICE_MFA_STEP_SECONDS", "29"),
    ]);
}
