//! Agents: the leaderboard after real debates, agent health and circuit
//! breakers, and automatic agent selection without keys.

use serde_json::{Value, json};

use super::{Api, DEMO, assert_consensus_body, assert_error, assert_plan, pick};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leaderboard_ranks_demo_agents_after_two_debates() {
    let (app, api) = Api::spawn(&[]).await;
    let (status, empty) = api.get("/api/leaderboard").await;
    assert_eq!(
        (status, pick(&empty, "agents total")),
        (200, json!({"agents": [], "total": 0}))
    );
    for topic in ["Tabs or spaces?", "Should homework be abolished?"] {
        api.finished(&api.demo(topic).await).await;
    }
    let both_counted = |board: &Value| {
        let agents = board["agents"].as_array().unwrap();
        agents.len() == 3 && agents.iter().all(|a| a["debates"] == 2)
    };
    let board = api.until("/api/leaderboard", both_counted).await;
    let agents = board["agents"].as_array().unwrap();
    let mut names: Vec<&str> = agents.iter().map(|a| a["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!((names, &board["total"]), (DEMO.to_vec(), &json!(3)));
    let elos: Vec<f64> = agents
        .iter()
        .map(|a| a["elo"].as_f64().expect("elo"))
        .collect();
    assert!(elos.windows(2).all(|w| w[0] >= w[1]), "best first: {board}");
    let drift = (elos.iter().sum::<f64>() - 1500.0 * 3.0).abs();
    assert!(drift < 0.2, "ratings sum to 1500 each: {board}");
    let (mut wins, mut losses) = (0, 0);
    for (rank, agent) in agents.iter().enumerate() {
        assert_eq!(agent["rank"], rank + 1);
        let games = ["wins", "losses", "draws"].map(|k| agent[k].as_u64().unwrap());
        assert_eq!(
            games.iter().sum::<u64>(),
            4,
            "2 opponents in 2 debates: {agent}"
        );
        (wins, losses) = (wins + games[0], losses + games[1]);
    }
    assert_eq!(wins, losses, "{board}");
    assert_eq!(board["rankings"], board["agents"], "one list, three names");
    assert_eq!(board["items"], board["agents"], "one list, three names");
    for path in [
        "/api/leaderboard/rankings",
        "/api/v1/leaderboard",
        "/api/rankings",
        "/api/v1/rankings",
        // Filters this service does not keep are ignored, not refused.
        "/api/leaderboard?view=overall&domain=x&sort_by=elo&order=desc",
        "/api/v1/rankings?domain=x&period=7d&limit=20",
    ] {
        assert_eq!(api.get(path).await, (200, board.clone()), "{path}");
    }
    for path in ["/api/v2/agents/leaderboard", "/api/v2/agents/rankings"] {
        let (status, v2) = api.get(path).await;
        assert_eq!((status, &v2["data"]), (200, &board), "{path}");
    }
    let (_, one) = api.get("/api/leaderboard?limit=1").await;
    assert_eq!(
        (&one["agents"], &one["total"]),
        (&json!(agents[..1]), &json!(3))
    );
    let (_, second) = api.get("/api/leaderboard?offset=1&limit=1").await;
    assert_eq!(second["agents"], json!(agents[1..2]), "{second}");
    assert_eq!(
        (&second["total"], &second["offset"]),
        (&json!(3), &json!(1))
    );
    let (_, none) = api.get("/api/leaderboard?min_debates=3").await;
    assert_eq!((&none["agents"], &none["total"]), (&json!([]), &json!(0)));
    let (_, all) = api.get("/api/leaderboard?min_debates=2").await;
    assert_eq!(all["total"], 3, "{all}");
    for bad in [
        "limit=0",
        "limit=101",
        "limit=many",
        "offset=-1",
        "min_debates=x",
    ] {
        let (status, body) = api.get(format!("/api/leaderboard/rankings?{bad}")).await;
        assert_error(status, &body, 400, "BAD_REQUEST");
    }
    app.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn agent_health_and_circuit_breakers() {
    let (app, api) = Api::spawn(&[]).await;
    let (status, health) = api.get("/api/agents/health").await;
    let want = json!({"status": "healthy", "demo_available": true, "open": []});
    assert_eq!(
        (status, pick(&health, "status demo_available open")),
        (200, want)
    );
    assert!(health["circuit_breakers"].is_array(), "{health}");
    let providers = health["providers"].as_array().unwrap();
    let provider = |name: &str| providers.iter().find(|p| p["provider"] == name).unwrap();
    assert_eq!(provider("demo")["configured"], true);
    let want = json!({"configured": false, "variable": "ANTHROPIC_API_KEY"});
    assert_eq!(pick(provider("anthropic"), "configured variable"), want);
    api.finished(&api.demo("Health check").await).await;
    let paths = "/api/agents/circuit-breakers /api/circuit-breakers /api/system/circuit-breakers";
    for path in paths.split(' ') {
        let (status, body) = api.get(path).await;
        let breakers = body["circuit_breakers"]
            .as_array()
            .expect("circuit_breakers");
        assert_eq!((status, &body["open"]), (200, &json!([])), "{path}: {body}");
        assert_eq!(body["total"], breakers.len());
        assert!(
            breakers
                .iter()
                .all(|b| b["state"] == "closed" && b["agent"].is_string())
        );
    }
    app.stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn auto_select_without_keys_picks_demo_agents() {
    let (app, api) = Api::spawn(&[]).await;
    let body = json!({"topic": "Pick for me", "rounds": 1, "auto_select": true});
    let current = api.create("/api/debates", body).await;
    let v2 = api
        .create(
            "/api/v2/debates",
            json!({"task": "Pick again", "rounds": 1}),
        )
        .await;
    for created in [&current, &v2["data"]] {
        assert_eq!(created["agents"], json!(DEMO), "{created}");
        let detail = api.finished(created["id"].as_str().unwrap()).await;
        assert_plan(&detail, 1);
        assert_consensus_body(&detail["consensus"], 3);
    }
    app.stop.cancel();
}
