//! Helpers for tests that sign users in: JSON calls with or without a
//! bearer token, registration and sign-in.

use reqwest::{Client, Method};
use serde_json::{Value, json};

/// A JSON call; returns the status and the parsed body (Null when empty).
pub async fn call(
    method: Method,
    url: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let client = Client::new();
    let mut request = client.request(method, url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let value = serde_json::from_str(&text).unwrap_or(Value::Null);
    (status, value)
}

/// `GET base+path` with the static admin token; asserts 200 and returns the body.
pub async fn admin_get(base: &str, path: &str) -> Value {
    let (status, body) = call(
        Method::GET,
        &format!("{base}{path}"),
        Some(super::TEST_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 200, "{path}: {body}");
    body
}

/// Registers `email` with `password`; returns the user id.
pub async fn register(base: &str, email: &str, password: &str) -> String {
    let (status, body) = call(
        Method::POST,
        &format!("{base}/api/auth/register"),
        None,
        Some(json!({"email": email, "password": password, "name": "Test User"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    body["user"]["user_id"].as_str().unwrap().to_owned()
}

/// Signs in; returns the whole login response (asserting 200).
pub async fn login(base: &str, email: &str, password: &str) -> Value {
    let (status, body) = call(
        Method::POST,
        &format!("{base}/api/auth/login"),
        None,
        Some(json!({"email": email, "password": password})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body
}

/// Registers and signs in; returns (user id, access token, refresh token).
pub async fn signed_in(base: &str, email: &str) -> (String, String, String) {
    let user_id = register(base, email, "correct horse battery").await;
    let body = login(base, email, "correct horse battery").await;
    (
        user_id,
        body["access_token"].as_str().unwrap().to_owned(),
        body["refresh_token"].as_str().unwrap().to_owned(),
    )
}

/// The status of `GET /api/auth/me` with `token`, and the profile.
pub async fn me(base: &str, token: &str) -> (u16, Value) {
    call(
        Method::GET,
        &format!("{base}/api/auth/me"),
        Some(token),
        None,
    )
    .await
}
