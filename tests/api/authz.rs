//! The authorization matrix: every protected route of the router, with every
//! kind of bad credential, answers the spec's 401 or 403. The route list
//! comes from the router itself, so a new route cannot be forgotten.

use std::collections::BTreeMap;

use agon::crypto::jwt::{Claims, JwtAlgorithm, JwtKeys, TokenType};
use agon::http::routes::Access;
use reqwest::Method;
use serde_json::Value;

use crate::auth::{ROOMY, SECRET};
use crate::serve::spawn_with;
use crate::support::Kind;
use crate::support::accounts::{call, signed_in};

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// The message of an error in any of §7's forms.
fn message(body: &Value) -> String {
    match &body["error"] {
        Value::String(text) => text.clone(),
        other => other["message"].as_str().unwrap_or_default().to_owned(),
    }
}

#[tokio::test]
async fn every_protected_route_refuses_every_bad_credential() {
    let app = spawn_with(Kind::Sqlite, &ROOMY).await;
    let base = &app.base;
    let (user_id, user_access, refresh) = signed_in(base, "matrix@example.com").await;
    let (_, revoked, _) = signed_in(base, "revoked@example.com").await;
    let (status, _) = call(
        Method::POST,
        &format!("{base}/api/auth/logout"),
        Some(&revoked),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let now = app.app.clock.unix();
    let claims = |exp: i64| Claims {
        exp,
        iat: now - 7_200,
        sub: user_id.clone(),
        jti: "matrix-session".to_owned(),
        token_type: TokenType::Access,
        email: Some("matrix@example.com".to_owned()),
        role: Some("admin".to_owned()),
        generation: None,
        org_id: None,
        org_role: None,
        via: None,
    };
    let ours = JwtKeys::new(SECRET.as_bytes(), JwtAlgorithm::Hs256);
    let theirs = JwtKeys::new(
        b"someone-elses-secret-0123456789abcdef",
        JwtAlgorithm::Hs256,
    );
    let expired = ours.issue(&claims(now - 60)).unwrap();
    let wrong_signature = theirs.issue(&claims(now + 600)).unwrap();

    let cases: Vec<(&str, Option<String>, &str)> = vec![
        ("no token", None, "Authentication required"),
        ("malformed", Some("not.a.jwt".to_owned()), "Invalid token"),
        ("wrong signature", Some(wrong_signature), "Invalid token"),
        ("expired", Some(expired), "Token expired"),
        ("revoked", Some(revoked), "Invalid token"),
        ("refresh token", Some(refresh), "Invalid token"),
    ];

    let (_, table, paths, _) = agon::http::routes().into_parts();
    let documented: BTreeMap<String, Value> =
        serde_json::from_value(serde_json::to_value(&paths.paths).unwrap()).unwrap();
    let mut checked = 0;
    let mut admin_routes = 0;
    for mount in table.mounts() {
        if mount.access == Access::Public {
            continue;
        }
        let item = &documented[&mount.canonical];
        let url = format!(
            "{base}{}",
            mount
                .path
                .split('/')
                .map(|s| if s.starts_with('{') { "x" } else { s })
                .collect::<Vec<_>>()
                .join("/")
        );
        for method in METHODS
            .iter()
            .filter(|m| item.get(**m).is_some() && mount.methods.contains(*m))
        {
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            for (case, token, expected) in &cases {
                let (status, body) = call(method.clone(), &url, token.as_deref(), None).await;
                assert_eq!(status, 401, "{method} {url} with {case}: {body}");
                assert_eq!(message(&body), *expected, "{method} {url} with {case}");
                checked += 1;
            }
            if let Access::Permission(permission) = mount.access {
                let (status, body) = call(method.clone(), &url, Some(&user_access), None).await;
                assert_eq!(status, 403, "{method} {url} as a user: {body}");
                assert!(
                    message(&body).contains(permission.name()),
                    "{method} {url}: {body}"
                );
                admin_routes += 1;
            }
        }
    }
    assert!(
        checked > 200,
        "only {checked} checks: is the route list empty?"
    );
    assert!(admin_routes >= 8, "only {admin_routes} admin-only routes");
}

#[tokio::test]
async fn only_the_spec_public_routes_are_open() {
    let (_, table, _, _) = agon::http::routes().into_parts();
    let open: Vec<&str> = table
        .mounts()
        .iter()
        .filter(|m| m.access == Access::Public)
        .map(|m| m.canonical.as_str())
        .collect();
    let allowed = [
        "/api/health",
        // Orchestrators' liveness and readiness probes: no figures, no data.
        "/healthz",
        "/readyz",
        "/api/auth/register",
        "/api/auth/login",
        "/api/auth/mfa/verify",
        "/api/auth/refresh",
        "/api/auth/signup",
        "/api/auth/verify-email",
        "/api/auth/accept-invite",
        "/api/auth/check-invite",
        "/api/v2/auth/token",
        // The interface's own description, so that a browser can open it.
        "/api/openapi.json",
        "/api/openapi.yaml",
        "/api/postman.json",
        "/api/docs",
        "/api/docs/{file}",
        "/api/redoc",
        "/api/redoc/redoc.standalone.js",
        // §4.3: WebSocket health is public.
        "/api/health/ws",
        // The newest seal, so that outsiders can keep copies of the head
        // (issue 25; event-schemas/AUDIT.md), and the proof that a later
        // seal extends the one they kept.
        "/api/audit/head",
        "/api/audit/consistency",
        // The upgrade authenticates itself: the credential may ride in the
        // query (`token`, `ticket`) or the subprotocol header (tests/api/ws.rs).
        "/ws",
        // §6.3: the source host's deliveries carry no bearer; the service
        // checks their HMAC signature (tests/api/scm.rs).
        "/api/v1/webhooks/scm",
        // §4.5: the gallery is public; only what an owner published shows
        // (tests/api/gallery.rs).
        "/api/gallery",
        "/api/gallery/{debate_id}",
        "/api/gallery/{debate_id}/embed",
        // §5.3, §5.4: a sign-in through an identity provider starts and
        // comes back without a credential (the state token ties the two
        // ends); the providers on offer and the SSO refresh (its refresh
        // token is the credential) are the sign-in page's (tests/api/sso.rs).
        "/api/auth/oauth/extidp",
        "/api/auth/oauth/extidp/callback",
        "/api/auth/oauth/providers",
        "/api/auth/sso/login",
        "/api/auth/sso/callback",
        "/api/auth/sso/refresh",
        "/api/auth/sso/providers",
        "/auth/sso/callback",
        // The SAML service provider's metadata is published to identity
        // providers; its single logout service takes the provider's signed
        // logout requests, and callers' logouts by their own credential
        // (tests/api/sso_saml.rs).
        "/auth/sso/metadata",
        "/auth/sso/logout",
    ];
    for canonical in &open {
        assert!(allowed.contains(canonical), "{canonical} is public");
    }
    for canonical in allowed {
        assert!(open.contains(&canonical), "{canonical} should be public");
    }
}
