//! §4.5 Gallery: an owner publishes a completed debate (an event on the
//! debate's chain), anyone reads it, and the owner takes it out again.
//! Others, unfinished debates and unknown ids are refused.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::serve::spawn_with;
use crate::support::accounts::{call, signed_in};
use crate::support::{Kind, TEST_TOKEN, on_both_backends};

on_both_backends! {
    owners_publish_completed_debates_for_anyone => publish_and_read;
}

const DEMO: [&str; 3] = ["demo-a", "demo-b", "demo-c"];

/// A caller of one service.
struct Client<'a> {
    base: &'a str,
    token: Option<&'a str>,
}

impl Client<'_> {
    async fn send(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        call(method, &format!("{}{path}", self.base), self.token, body).await
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send(Method::GET, path, None).await
    }

    /// A demo debate on `topic` over `rounds`; returns its id.
    async fn demo(&self, topic: &str, rounds: u32) -> String {
        let body = json!({"topic": topic, "agents": DEMO, "rounds": rounds});
        let (status, created) = self.send(Method::POST, "/api/debates", Some(body)).await;
        assert_eq!(status, 201, "{created}");
        created["id"].as_str().unwrap().to_owned()
    }

    /// Waits until debate `id` completed (20 s at most).
    async fn finished(&self, id: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (_, detail) = self.get(&format!("/api/debates/{id}")).await;
            if detail["status"] == "completed" {
                return;
            }
            assert!(Instant::now() < deadline, "{detail}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn assert_error(status: u16, body: &Value, want: u16, code: &str) {
    assert_eq!((status, &body["code"]), (want, &json!(code)), "{body}");
}

async fn publish_and_read(kind: Kind) {
    let mut vars = crate::auth::ROOMY.to_vec();
    vars.push(("SERVICE_RATE_LIMIT_DEBATE_CREATE", "1000000"));
    vars.push(("SERVICE_PUBLIC_URL", "https://agon.example.invalid/"));
    // Demo agents write slowly enough that a long debate is still running
    // when it is asked to publish.
    vars.push(("SERVICE_DEMO_DELTA_DELAY_MS", "40"));
    let app = spawn_with(kind, &vars).await;
    let base = app.base.as_str();
    let (ada_id, ada_token, _) = signed_in(base, "ada@example.com").await;
    let (_, bob_token, _) = signed_in(base, "bob@example.com").await;
    let ada = Client {
        base,
        token: Some(&ada_token),
    };
    let bob = Client {
        base,
        token: Some(&bob_token),
    };
    let admin = Client {
        base,
        token: Some(TEST_TOKEN),
    };
    let anyone = Client { base, token: None };

    let id = ada.demo("Should the gallery be public?", 1).await;
    let long = ada.demo("A long debate", 12).await;
    let publish = format!("/api/debates/{id}/publish");

    // Not completed: refused, named by the spec's conflict.
    let (status, body) = ada
        .send(Method::POST, &format!("/api/debates/{long}/publish"), None)
        .await;
    assert_error(status, &body, 409, "CONFLICT");
    ada.finished(&id).await;
    let receipt = format!("/api/v1/receipts/rcpt_{id}");
    let (status, before) = ada.get(&receipt).await;
    assert_eq!(status, 200, "{before}");

    // Nothing published yet; the gallery needs no credential.
    let (status, empty) = anyone.get("/api/gallery").await;
    assert_eq!(
        (status, &empty["total"], &empty["debates"]),
        (200, &json!(0), &json!([]))
    );
    let (status, body) = anyone.get(&format!("/api/gallery/{id}")).await;
    assert_error(status, &body, 404, "NOT_FOUND");

    // Only the owner publishes: another user does not even see it, an
    // admin sees it but may not; nobody without a credential.
    let (status, body) = bob.send(Method::POST, &publish, None).await;
    assert_error(status, &body, 404, "NOT_FOUND");
    let (status, body) = admin.send(Method::POST, &publish, None).await;
    assert_error(status, &body, 403, "FORBIDDEN");
    let (status, _) = anyone.send(Method::POST, &publish, None).await;
    assert_eq!(status, 401);
    let unknown = "01947a2b-3c4d-7e5f-8a6b-7c8d9e0f1a2b";
    for path in [
        format!("/api/debates/{unknown}/publish"),
        "/api/debates/nope/publish".into(),
    ] {
        let (status, body) = ada.send(Method::POST, &path, None).await;
        assert_error(status, &body, 404, "NOT_FOUND");
    }

    // The owner publishes; again changes nothing.
    let (status, state) = ada.send(Method::POST, &publish, None).await;
    assert_eq!(
        (status, &state["published"]),
        (200, &json!(true)),
        "{state}"
    );
    assert_eq!(
        state["url"],
        json!(format!("https://agon.example.invalid/gallery/{id}"))
    );
    let (_, again) = ada.send(Method::POST, &publish, None).await;
    assert_eq!(again, state);

    // Anyone reads it: list, detail, embed; no owner in any of them.
    let (status, list) = anyone.get("/api/gallery").await;
    assert_eq!(
        (status, &list["total"], &list["count"]),
        (200, &json!(1), &json!(1)),
        "{list}"
    );
    let card = &list["debates"][0];
    assert_eq!(
        (&card["id"], &card["topic"]),
        (&json!(id), &json!("Should the gallery be public?"))
    );
    assert_eq!(card["agents"], json!(DEMO));
    assert_eq!(card["max_rounds"], 1);
    assert_eq!(card["published_at"], state["published_at"]);
    let (status, detail) = anyone.get(&format!("/api/gallery/{id}")).await;
    assert_eq!(status, 200, "{detail}");
    let (_, own) = ada.get(&format!("/api/debates/{id}")).await;
    assert_eq!(detail["summary"], own["final_answer"]);
    assert_eq!(
        (&detail["max_rounds"], &detail["rounds"][0]["round_number"]),
        (&json!(1), &json!(1))
    );
    assert_eq!(
        detail["consensus"]["confidence"],
        own["consensus"]["consensus"]["confidence"]
    );
    let said: Vec<&Value> = own["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["content"])
        .collect();
    let shown: Vec<&Value> = detail["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["messages"].as_array().unwrap())
        .map(|m| &m["content"])
        .collect();
    assert_eq!(shown, said);
    let (status, embed) = anyone.get(&format!("/api/gallery/{id}/embed")).await;
    assert_eq!(status, 200, "{embed}");
    assert_eq!(embed["title"], json!("Should the gallery be public?"));
    assert_eq!(embed["confidence"], detail["confidence"]);
    assert_eq!(embed["summary"], detail["summary"]);
    assert_eq!(embed["agents"], json!(DEMO));
    assert_eq!(embed["url"], state["url"]);
    for body in [&list, &detail, &embed] {
        let text = body.to_string();
        assert!(
            !text.contains(&ada_id) && !text.contains("ada@example.com"),
            "{text}"
        );
    }
    let (status, v2) = anyone.get("/api/v2/gallery").await;
    assert_eq!((status, &v2["data"]["total"]), (200, &json!(1)), "{v2}");
    let (status, v1) = anyone.get(&format!("/api/v1/gallery/{id}/embed")).await;
    assert_eq!((status, &v1["id"]), (200, &json!(id)));
    for bad in ["limit=0", "limit=101", "offset=-1", "colour=red"] {
        let (status, body) = anyone.get(&format!("/api/gallery?{bad}")).await;
        assert_error(status, &body, 400, "BAD_REQUEST");
    }
    for path in [
        format!("/api/gallery/{long}"),
        format!("/api/gallery/{unknown}/embed"),
        "/api/gallery/nope".into(),
    ] {
        let (status, body) = anyone.get(&path).await;
        assert_error(status, &body, 404, "NOT_FOUND");
    }

    // The receipt still ends at the debate's end; the chain verifies.
    let (status, after) = ada.get(&receipt).await;
    assert_eq!((status, &after["events"]), (200, &before["events"]));
    let (status, verified) = admin
        .send(Method::POST, "/api/audit/verify", Some(json!({})))
        .await;
    assert_eq!(
        (status, &verified["valid"]),
        (200, &json!(true)),
        "{verified}"
    );

    // Taken out: gone for everyone; published again, back.
    let (status, body) = bob.send(Method::DELETE, &publish, None).await;
    assert_error(status, &body, 404, "NOT_FOUND");
    let (status, out) = ada.send(Method::DELETE, &publish, None).await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(
        out,
        json!({"debate_id": id, "published": false, "published_at": null, "url": null})
    );
    let (_, list) = anyone.get("/api/gallery").await;
    assert_eq!(list["total"], 0);
    let (status, _) = anyone.get(&format!("/api/gallery/{id}")).await;
    assert_eq!(status, 404);
    let (status, back) = ada.send(Method::POST, &publish, None).await;
    assert_eq!((status, &back["published"]), (200, &json!(true)));
    let (_, list) = anyone.get("/api/gallery").await;
    assert_eq!(list["total"], 1);
    app.stop.cancel();
}
