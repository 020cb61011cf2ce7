//! Requests users get wrong: refused creates give their `debate_create`
//! cell back, field faults answer alike (422 naming the field) in every
//! error form, agent names ignore case for ratings.

use reqwest::Method;
use serde_json::{Value, json};

use super::{Api, DEMO};
use crate::serve::spawn_with;
use crate::support::accounts::{call, signed_in};
use crate::support::{Kind, LoopbackServer};

/// Ten refused creates (422 and 400) leave a user's two-a-minute
/// `debate_create` bucket whole: two good creates pass, the third is 429.
async fn refused_creates_leave_the_bucket(redis_url: Option<&str>) {
    let mut vars = crate::auth::ROOMY.to_vec();
    vars.push(("SERVICE_RATE_LIMIT_DEBATE_CREATE", "2"));
    vars.push(("SERVICE_BURST_MULTIPLIER", "1"));
    if let Some(url) = redis_url {
        vars.push(("SERVICE_REDIS_URL", url));
    }
    let app = spawn_with(Kind::Sqlite, &vars).await;
    let (_, token, _) = signed_in(&app.base, "rita@example.com").await;
    let api = Api::with(&app.base, &token);
    if redis_url.is_some() {
        let admin = Api::with(&app.base, crate::support::TEST_TOKEN);
        let (_, config) = admin.get("/api/rate-limits/config").await;
        assert_eq!(config["backend"], "redis", "{config}");
    }
    let refused = [
        (json!({"topic": "t", "agents": DEMO, "rounds": 0}), 422),
        (json!({"topic": "t", "agents": ["demo-a"]}), 422),
        (json!({"agents": DEMO}), 422),
        (json!({"topic": "t", "agents": DEMO, "rounds": -1}), 422),
        (json!({"topic": "t", "agents": ["demo-a", "claude"]}), 400),
    ];
    for (body, want) in refused.iter().cycle().take(10) {
        let (status, error) = api.post("/api/debates", body.clone()).await;
        assert_eq!(status, *want, "{body}: {error}");
    }
    for topic in ["First", "Second"] {
        let body = json!({"topic": topic, "agents": DEMO, "rounds": 1});
        let (status, created) = api.post("/api/debates", body).await;
        assert_eq!(status, 201, "{created}");
    }
    let body = json!({"topic": "Third", "agents": DEMO, "rounds": 1});
    let (status, refused) = api.post("/api/debates", body).await;
    assert_eq!(status, 429, "{refused}");
    // A refusal by the limiter itself gives nothing back.
    let (status, _) = api.post("/api/debates", json!({"topic": "t"})).await;
    assert_eq!(status, 429);
    app.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn refused_creates_do_not_use_up_debate_create_in_memory() {
    Box::pin(refused_creates_leave_the_bucket(None)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn refused_creates_do_not_use_up_debate_create_in_redis() {
    let redis = LoopbackServer::redis().await;
    Box::pin(refused_creates_leave_the_bucket(Some(&redis.url()))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn field_faults_answer_alike_and_keep_the_field_in_v1_and_v2() {
    let (app, api) = Api::spawn(&[]).await;
    let with_rounds = |rounds: Value| json!({"topic": "t", "agents": DEMO, "rounds": rounds});
    let wanted = "rounds: must be between 1 and 12";
    for rounds in [json!(0), json!(-1), json!(13)] {
        let (status, general) = api.post("/api/debates", with_rounds(rounds.clone())).await;
        assert_eq!(status, 422, "{general}");
        assert_eq!(general["code"], "VALIDATION_ERROR", "{general}");
        assert_eq!(general["error"], wanted, "{rounds}: {general}");
        let details = &general["details"];
        assert_eq!(details["field"], "rounds", "{general}");

        let (status, v1) = api
            .post("/api/v1/debates", with_rounds(rounds.clone()))
            .await;
        assert_eq!((status, &v1["status"]), (422, &json!(422)), "{v1}");
        assert_eq!(v1["error"], wanted, "{rounds}: {v1}");

        let (status, v2) = api
            .post("/api/v2/debates", with_rounds(rounds.clone()))
            .await;
        assert_eq!(
            (status, &v2["code"]),
            (422, &json!("VALIDATION_ERROR")),
            "{v2}"
        );
        assert_eq!(v2["error"], wanted, "{rounds}: {v2}");
    }
    // A wrong type, a missing field and a one-agent debate name their field
    // in the bare-string forms too.
    let cases = [
        (with_rounds(json!("two")), "rounds: "),
        (json!({"agents": DEMO}), "topic: "),
        (json!({"topic": "t", "agents": ["demo-a"]}), "agents: "),
        (
            json!({"topic": "t", "agents": ["demo-a", "Demo-A"]}),
            "agents: ",
        ),
    ];
    for (body, prefix) in cases {
        for path in ["/api/v1/debates", "/api/v2/debates"] {
            let (status, error) = api.post(path, body.clone()).await;
            assert_eq!(status, 422, "{path} {body}: {error}");
            let message = error["error"].as_str().unwrap_or_default();
            assert!(message.starts_with(prefix), "{path} {body}: {error}");
            assert!(
                message.len() > prefix.len() + 5,
                "a reason follows: {error}"
            );
        }
    }
    // Other JSON routes: a missing required field is a 422 naming it, bad
    // syntax stays a 400.
    let (status, error) = api.post("/api/debates/batch", json!({})).await;
    assert_eq!(status, 422, "{error}");
    assert_eq!(error["details"]["field"], "debate_ids", "{error}");
    let (status, error) = call(
        Method::POST,
        &format!("{}/api/auth/login", app.base),
        None,
        Some(json!({"email": "x@example.com"})),
    )
    .await;
    assert_eq!(status, 422, "{error}");
    assert_eq!(error["details"]["field"], "password", "{error}");
    let response = crate::support::client()
        .post(format!("{}/api/debates/batch", app.base))
        .bearer_auth(&api.token)
        .header("content-type", "application/json")
        .body("{\"debate_ids\": [")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    app.stop.cancel();
}

/// The API takes names in the documented lower-case spelling, but the local
/// `agon debate` takes any case: debates written either way share ratings.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn names_differing_in_case_are_one_agent_on_the_leaderboard() {
    let dir = tempfile::tempdir().unwrap();
    for (topic, agents) in [
        ("Tea or coffee?", "Demo-A,demo-b"),
        ("Cats or dogs?", "demo-a,DEMO-B"),
    ] {
        let ran = std::process::Command::new(env!("CARGO_BIN_EXE_agon"))
            .args([
                "debate", topic, "--agents", agents, "--rounds", "1", "--json",
            ])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("SERVICE_DATA_DIR", dir.path())
            .output()
            .unwrap();
        assert!(ran.status.success(), "{ran:?}");
        let written = String::from_utf8_lossy(&ran.stdout);
        assert!(
            written.contains(agents.split(',').next().unwrap()),
            "names keep their spelling: {written}"
        );
    }
    let served = crate::support::binary::Serve::on_free_ports()
        .data_dir(dir.path())
        .env("SERVICE_API_TOKEN", crate::support::TEST_TOKEN)
        .start()
        .await;
    let api = Api::with(&served.base, crate::support::TEST_TOKEN);
    let both = |board: &Value| {
        board["agents"].as_array().is_some_and(|agents| {
            agents
                .iter()
                .filter_map(|a| a["debates"].as_u64())
                .sum::<u64>()
                == 4
        })
    };
    let board = api.until("/api/leaderboard", both).await;
    let mut names: Vec<&str> = board["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["demo-a", "demo-b"], "{board}");
    assert!(
        board["agents"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["debates"] == 2),
        "{board}"
    );
    served.stop(std::time::Duration::from_secs(10)).await;
}

/// What the create schema calls valid is taken: a judge from outside the
/// panel sits as one more agent (past twelve named), and `2.0` is the whole
/// number 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_outside_judge_takes_a_seat_and_whole_floats_are_integers() {
    let (app, api) = Api::spawn(&[]).await;
    let body = json!({"topic": "Tea or coffee?", "agents": ["demo-a", "demo-b"],
        "consensus": "judge", "judge": "demo-c", "max_rounds": 2.0});
    let created = api.create("/api/debates", body).await;
    assert_eq!(
        created["agents"],
        json!(["demo-a", "demo-b", "demo-c"]),
        "{created}"
    );
    assert_eq!(created["rounds"], 2, "{created}");
    let twelve: Vec<String> = (1..=12).map(|n| format!("demo-{n}")).collect();
    let body = json!({"topic": "Who decides?", "agents": twelve,
        "protocol": {"consensus": "judge", "judge": "demo-judge"}});
    let created = api.create("/api/debates", body).await;
    assert_eq!(created["agents"].as_array().unwrap().len(), 13, "{created}");
    let id = created["id"].as_str().unwrap();
    let done = api.finished(id).await;
    let seated = done["agents"].as_array().unwrap();
    assert!(seated.contains(&json!("demo-judge")), "{done}");
    app.stop.cancel();
}

/// The create schema's agent-name pattern is this deployment's: with no
/// provider keys it admits demo agents only, so a client (or a fuzzer) that
/// follows it never names an agent the service would refuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_create_schema_names_only_agents_this_deployment_seats() {
    let (app, api) = Api::spawn(&[]).await;
    let (_, doc) = api.get("/api/openapi.json").await;
    let body = &doc["components"]["schemas"]["CreateDebateBody"];
    let pattern = body["properties"]["agents"]["items"]["pattern"]
        .as_str()
        .unwrap();
    let pattern = regex::Regex::new(pattern).unwrap();
    for (name, seated) in [
        ("demo-a", true),
        ("demo", true),
        ("claude", false),
        ("Demo-A", false),
    ] {
        assert_eq!(pattern.is_match(name), seated, "{name}");
        let body = json!({"topic": "t", "agents": [name, "demo-z"]});
        let (status, error) = api.post("/api/debates", body).await;
        assert_eq!(status == 201, seated, "{name}: {status} {error}");
    }
    assert_eq!(body["properties"]["agents"]["uniqueItems"], true);
    app.stop.cancel();
}

/// The topic and context limits are the deployment's, in the handler and
/// in the published schema alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn topic_and_context_limits_follow_their_variables() {
    let (app, api) = Api::spawn(&[
        ("SERVICE_MAX_TOPIC_CHARS", "10"),
        ("SERVICE_MAX_CONTEXT_CHARS", "12"),
    ])
    .await;
    let (_, doc) = api.get("/api/openapi.json").await;
    let context = &doc["components"]["schemas"]["CreateDebateBody"]["properties"]["context"];
    assert_eq!(context["maxLength"], 12, "{context}");
    let create =
        |topic: &str, context: &str| json!({"topic": topic, "context": context, "agents": DEMO});
    let (status, body) = api
        .post("/api/debates", create("ten chars!", "twelve chars"))
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = api.post("/api/debates", create("eleven char", "c")).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["error"], "topic: must be at most 10 characters",
        "{body}"
    );
    let (status, body) = api.post("/api/debates", create("t", "thirteen char")).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"].as_str().unwrap().starts_with("context: "),
        "{body}"
    );
    app.stop.cancel();
}

/// How big a debate may be (agents, rounds, phases and their names) is
/// the deployment's, in the handler and in the published schema alike:
/// once fixed at 12 agents, 12 rounds and 8 phases of 40 characters.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_debate_s_size_follows_its_variables() {
    let (app, api) = Api::spawn(&[
        ("SERVICE_MAX_AGENTS", "14"),
        ("SERVICE_MAX_ROUNDS", "20"),
        ("SERVICE_MAX_PHASES", "10"),
        ("SERVICE_MAX_PHASE_CHARS", "50"),
        ("SERVICE_MAX_TOPIC_CHARS", "30"),
    ])
    .await;
    let (_, doc) = api.get("/api/openapi.json").await;
    let schemas = &doc["components"]["schemas"];
    let body = &schemas["CreateDebateBody"]["properties"];
    assert_eq!(body["rounds"]["maximum"], 20, "{body}");
    assert_eq!(body["max_rounds"]["maximum"], 20, "{body}");
    assert_eq!(body["agents"]["maxItems"], 14, "{body}");
    assert_eq!(body["topic"]["maxLength"], 30, "{body}");
    let protocol = &schemas["ProtocolBody"]["properties"];
    assert_eq!(protocol["rounds"]["maximum"], 20, "{protocol}");
    assert_eq!(protocol["phases"]["maxItems"], 10, "{protocol}");
    assert_eq!(
        protocol["phases"]["items"]["pattern"], "^[a-z0-9_-]{1,50}$",
        "{protocol}"
    );
    let panel = |n: usize| (0..n).map(|i| format!("demo-{i}")).collect::<Vec<_>>();
    let phases: Vec<String> = (0..10).map(|i| format!("{}{i}", "p".repeat(49))).collect();
    let (status, created) = api
        .post(
            "/api/debates",
            json!({"topic": "t", "agents": panel(14), "rounds": 15, "protocol": {"phases": phases}}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["rounds"], 15, "{created}");
    let refused = [
        (
            json!({"topic": "t", "agents": DEMO, "rounds": 21}),
            "rounds: must be between 1 and 20",
        ),
        (
            json!({"topic": "t", "agents": DEMO, "max_rounds": 21}),
            "rounds: must be between 1 and 20",
        ),
        (
            json!({"topic": "t", "agents": panel(15)}),
            "agents: a debate seats 2 to 14 agents, not 15",
        ),
    ];
    for (body, error) in refused {
        let (status, answer) = api.post("/api/debates", body.clone()).await;
        assert_eq!(
            (status, answer["error"].as_str()),
            (422, Some(error)),
            "{body}: {answer}"
        );
    }
    app.stop.cancel();

    // A limit below the default rounds: a request naming none gets the limit.
    let (app, api) = Api::spawn(&[("SERVICE_MAX_ROUNDS", "2")]).await;
    let (status, created) = api
        .post("/api/debates", json!({"topic": "t", "agents": DEMO}))
        .await;
    assert_eq!(
        (status, created["rounds"].as_u64()),
        (201, Some(2)),
        "{created}"
    );
    let (status, answer) = api
        .post(
            "/api/debates",
            json!({"topic": "t", "agents": DEMO, "rounds": 3}),
        )
        .await;
    assert_eq!(status, 422, "{answer}");
    app.stop.cancel();
}
