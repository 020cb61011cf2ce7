//! Sign-in through identity providers, black-box: the real binary, a real
//! OpenID Connect provider (oidc-provider, `tests/idp/oidc.mjs`) and a
//! browser that follows redirects and posts the provider's sign-in form.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::accounts::{call, login, me, register};
use crate::support::binary::{Serve, Served};
use crate::support::idp::{Browser, OidcProvider};

/// Never fetched: the browser stops when a redirect leads here.
const SUCCESS: &str = "http://127.0.0.1:9/signed-in";
const FAILED: &str = "http://127.0.0.1:9/sign-in-failed";
const EXTIDP_SECRET: &str = "extidp-secret-0123456789abcdef";
const SSO_SECRET: &str = "sso-secret-0123456789abcdef0123";

struct World {
    idp: OidcProvider,
    service: Served,
    _data: tempfile::TempDir,
}

/// The provider with the service's two clients, and the service (with
/// `extra` settings) signing in through it.
async fn world(extra: &[(&str, &str)]) -> World {
    let serve = Serve::on_free_ports().loopback();
    let base = serve.base();
    let idp = OidcProvider::start(&json!([
        {"client_id": "agon-extidp", "client_secret": EXTIDP_SECRET,
         "redirect_uris": [format!("{base}/api/auth/oauth/extidp/callback")]},
        {"client_id": "agon-sso", "client_secret": SSO_SECRET,
         "redirect_uris": [format!("{base}/api/v1/auth/sso/callback"), format!("{base}/auth/sso/callback")],
         "post_logout_redirect_uris": [SUCCESS]},
    ]))
    .await;
    let data = tempfile::tempdir().unwrap();
    let mut envs: Vec<(String, String)> = vec![
        (
            "SERVICE_JWT_SECRET".into(),
            "sso-test-secret-0123456789-0123456789".into(),
        ),
        ("SERVICE_PUBLIC_URL".into(), base.clone()),
        (
            "SERVICE_API_TOKEN".into(),
            crate::support::TEST_TOKEN.into(),
        ),
        ("OAUTH_SUCCESS_URL".into(), SUCCESS.into()),
        ("OAUTH_ERROR_URL".into(), FAILED.into()),
        ("OAUTH_ALLOWED_REDIRECT_HOSTS".into(), "127.0.0.1".into()),
        ("EXTIDP_OAUTH_CLIENT_ID".into(), "agon-extidp".into()),
        ("EXTIDP_OAUTH_CLIENT_SECRET".into(), EXTIDP_SECRET.into()),
        ("EXTIDP_OAUTH_ISSUER_URL".into(), idp.issuer.clone()),
        ("SERVICE_SSO_ENABLED".into(), "true".into()),
        ("SERVICE_SSO_PROVIDER_TYPE".into(), "oidc".into()),
        ("SERVICE_SSO_CLIENT_ID".into(), "agon-sso".into()),
        ("SERVICE_SSO_CLIENT_SECRET".into(), SSO_SECRET.into()),
        ("SERVICE_SSO_ISSUER_URL".into(), idp.issuer.clone()),
        ("SERVICE_SSO_ALLOWED_DOMAINS".into(), "acme.test".into()),
        ("SERVICE_SSO_ALLOWED_GROUPS".into(), "staff".into()),
        (
            "SERVICE_SSO_GROUP_ROLES".into(),
            "agon-admins=admin,staff=member".into(),
        ),
        ("SERVICE_IP_RATE_LIMIT".into(), "100000".into()),
        ("SERVICE_RATE_LIMIT_SSO".into(), "100000".into()),
        ("SERVICE_RATE_LIMIT_OAUTH".into(), "100000".into()),
    ];
    for (key, value) in extra {
        envs.retain(|(k, _)| k != key);
        envs.push(((*key).to_owned(), (*value).to_owned()));
    }
    let service = serve.data_dir(data.path()).envs(envs).start().await;
    World {
        idp,
        service,
        _data: data,
    }
}

impl World {
    fn sso_login(&self) -> String {
        format!("{}/api/v1/auth/sso/login", self.service.base)
    }

    fn extidp_login(&self) -> String {
        format!("{}/api/auth/oauth/extidp", self.service.base)
    }

    /// Signs in through `start` as `login`; where the browser landed.
    async fn sign_in(&self, start: &str, login: &str) -> crate::support::idp::Landed {
        Browser::default()
            .walk(start, login, &[SUCCESS, FAILED])
            .await
    }
}

/// An organization owned by a password account, made on a first start so
/// that the second can name it in `SERVICE_SSO_ORG_ID`.
pub(crate) async fn organization(data: &std::path::Path) -> String {
    let service = Serve::on_free_ports()
        .loopback()
        .data_dir(data)
        .env(
            "SERVICE_JWT_SECRET",
            "sso-test-secret-0123456789-0123456789",
        )
        .start()
        .await;
    let base = &service.base;
    register(base, "owner@acme.test", "correct horse battery").await;
    let token = login(base, "owner@acme.test", "correct horse battery").await["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, body) = call(
        Method::POST,
        &format!("{base}/api/auth/setup-organization"),
        Some(&token),
        Some(json!({"org_name": "Acme"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let org_id = body["org_id"].as_str().unwrap().to_owned();
    service.stop(std::time::Duration::from_secs(10)).await;
    org_id
}

#[tokio::test]
async fn sso_provisions_into_the_organization_with_the_role_of_its_groups() {
    let data = tempfile::tempdir().unwrap();
    let org_id = organization(data.path()).await;
    let data_dir = data.path().to_str().unwrap().to_owned();
    let world = world(&[
        ("SERVICE_SSO_ORG_ID", &org_id),
        ("SERVICE_DATA_DIR", &data_dir),
    ])
    .await;

    for (login, role) in [("alice@acme.test", "admin"), ("bob@acme.test", "member")] {
        let landed = world.sign_in(&world.sso_login(), login).await;
        let fragment = landed.fragment();
        assert!(landed.url.starts_with(SUCCESS), "{landed:?}");
        let token = &fragment["access_token"];
        assert!(!fragment["refresh_token"].is_empty());
        let (status, profile) = me(&world.service.base, token).await;
        assert_eq!(status, 200, "{profile}");
        assert_eq!(profile["email"], login);
        assert_eq!(profile["user_id"], fragment["user_id"].as_str());
        assert_eq!(profile["org_id"], org_id.as_str(), "{profile}");
        assert_eq!(profile["org_role"], role, "{profile}");
        assert_eq!(profile["linked_providers"], json!(["sso"]));
    }

    // The same person again is the same account.
    let first = world.sign_in(&world.sso_login(), "alice@acme.test").await;
    let again = world.sign_in(&world.sso_login(), "alice@acme.test").await;
    let user_id = &first.fragment()["user_id"];
    assert_eq!(user_id, &again.fragment()["user_id"]);

    // Each sign-in is on the account's trail: provider, identity, outcome;
    // never the provider's subject itself.
    let trail = crate::support::accounts::admin_get(
        &world.service.base,
        &format!("/api/v1/audit-trails/account:{user_id}"),
    )
    .await;
    let events = trail["events"].as_array().unwrap();
    let kinds: Vec<_> = events
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds[..2], ["Registered", "IdentityLinked"], "{kinds:?}");
    let sign_ins: Vec<_> = events
        .iter()
        .filter(|e| e["event_type"] == "ProviderLoginSucceeded")
        .collect();
    assert_eq!(sign_ins.len(), 3, "{kinds:?}");
    assert_eq!(
        sign_ins[0]["changes"]["ProviderLoginSucceeded"]["provider"],
        "sso"
    );
    assert!(!trail.to_string().contains("sub-alice@acme.test"));
}

#[tokio::test]
async fn sso_refuses_other_domains_and_groups_with_user_not_authorized() {
    let world = world(&[]).await;
    // mallory's domain is not allowed; carol is in no allowed group.
    for login in ["mallory@evil.test", "carol@acme.test"] {
        let landed = world.sign_in(&world.sso_login(), login).await;
        assert!(landed.url.starts_with(FAILED), "{landed:?}");
        assert_eq!(landed.error().as_deref(), Some("User not authorized"));
    }
    // Nothing was provisioned for them.
    let (status, body) = call(
        Method::POST,
        &format!("{}/api/auth/login", world.service.base),
        None,
        Some(json!({"email": "mallory@evil.test", "password": "anything at all"})),
    )
    .await;
    assert_eq!(status, 401, "{body}");
}

#[tokio::test]
async fn an_sso_session_is_an_ordinary_session_refreshed_and_ended_with_the_providers_logout() {
    let world = world(&[]).await;
    // The legacy path starts the same flow.
    let start = format!("{}/auth/sso/login", world.service.base);
    let landed = world.sign_in(&start, "bob@acme.test").await;
    let fragment = landed.fragment();
    let base = &world.service.base;

    let (status, refreshed) = call(
        Method::POST,
        &format!("{base}/api/v1/auth/sso/refresh"),
        None,
        Some(json!({"refresh_token": fragment["refresh_token"]})),
    )
    .await;
    assert_eq!(status, 200, "{refreshed}");
    let token = refreshed["access_token"].as_str().unwrap();

    let (status, out) = call(
        Method::POST,
        &format!("{base}/api/v1/auth/sso/logout"),
        Some(token),
        None,
    )
    .await;
    assert_eq!(status, 200, "{out}");
    let logout_url = out["logout_url"].as_str().unwrap();
    assert!(
        logout_url.starts_with(&format!("{}/session/end", world.idp.issuer)),
        "{logout_url}"
    );
    assert!(logout_url.contains("client_id=agon-sso"), "{logout_url}");
    let (status, _) = me(base, token).await;
    assert_eq!(status, 401, "the session ended");
}

#[tokio::test]
async fn a_state_token_works_once_and_expires() {
    let world = world(&[("SERVICE_OAUTH_STATE_TTL_SECONDS", "2")]).await;
    let browser = Browser::default();
    let landed = browser
        .walk(&world.sso_login(), "bob@acme.test", &[SUCCESS, FAILED])
        .await;
    assert!(landed.url.starts_with(SUCCESS), "{landed:?}");
    // The provider's redirect to the callback, replayed.
    let callback = landed
        .visited
        .iter()
        .find(|url| url.contains("/auth/sso/callback?"))
        .unwrap()
        .clone();
    let replayed = browser.walk(&callback, "", &[SUCCESS, FAILED]).await;
    assert_eq!(replayed.error().as_deref(), Some("Invalid state token"));

    // An answer that names another issuer (a mix-up, RFC 9207).
    let at_callback = format!("{}/api/v1/auth/sso/callback", world.service.base);
    let stopped = Browser::default()
        .walk(&world.sso_login(), "bob@acme.test", &[&at_callback])
        .await;
    assert!(stopped.url.contains("iss="), "{stopped:?}");
    let (head, _) = stopped.url.split_once("iss=").unwrap();
    let mixed = format!("{head}iss=http%3A%2F%2F127.0.0.1%3A1");
    let refused = Browser::default()
        .walk(&mixed, "", &[SUCCESS, FAILED])
        .await;
    assert!(
        refused
            .error()
            .unwrap_or_default()
            .contains("another issuer"),
        "{refused:?}"
    );

    // A flow left at the provider past the state's lifetime.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let to_provider = http
        .get(world.sso_login())
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    let location = to_provider.headers()["location"]
        .to_str()
        .unwrap()
        .to_owned();
    tokio::time::sleep(std::time::Duration::from_millis(3_100)).await;
    let late = Browser::default()
        .walk(&location, "bob@acme.test", &[SUCCESS, FAILED])
        .await;
    assert_eq!(late.error().as_deref(), Some("State token expired"));
}

#[tokio::test]
async fn id_tokens_not_made_for_us_by_the_provider_are_refused() {
    let world = world(&[]).await;
    for mode in ["tampered", "wrong_audience", "expired", "unknown_key"] {
        world.idp.mode(mode).await;
        let landed = world.sign_in(&world.sso_login(), "bob@acme.test").await;
        let error = landed.error().unwrap_or_default();
        assert!(
            error.starts_with("The identity provider's ID token was rejected"),
            "{mode}: {landed:?}"
        );
    }
    // A key the provider published after the service read its keys: the
    // keys are read again, and the token is good.
    world.idp.mode("rotated").await;
    let landed = world.sign_in(&world.sso_login(), "bob@acme.test").await;
    assert!(landed.url.starts_with(SUCCESS), "{landed:?}");
}

#[tokio::test]
async fn wrong_client_credentials_say_so() {
    let world = world(&[(
        "SERVICE_SSO_CLIENT_SECRET",
        "not-the-secret-at-all-0123456789",
    )])
    .await;
    let landed = world.sign_in(&world.sso_login(), "bob@acme.test").await;
    assert_eq!(
        landed.error().as_deref(),
        Some("Invalid client credentials")
    );
}

#[tokio::test]
async fn extidp_signs_in_links_by_verified_email_and_never_takes_an_unverified_one() {
    let world = world(&[]).await;
    let base = world.service.base.clone();
    let bob = register(&base, "bob@acme.test", "correct horse battery").await;
    let dave = register(&base, "dave@acme.test", "correct horse battery").await;

    // bob's provider vouches for his address: his account, now linked.
    let landed = world.sign_in(&world.extidp_login(), "bob@acme.test").await;
    assert_eq!(landed.fragment()["user_id"], bob, "{landed:?}");

    // dave's address is unverified at the provider: no way in through it.
    let landed = world.sign_in(&world.extidp_login(), "dave@acme.test").await;
    assert!(
        landed
            .error()
            .unwrap_or_default()
            .contains("link the provider there"),
        "{landed:?}"
    );

    // Signed in with his password, dave links the provider himself.
    let token = login(&base, "dave@acme.test", "correct horse battery").await["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, started) = call(
        Method::POST,
        &format!("{base}/api/auth/oauth/link"),
        Some(&token),
        Some(json!({"provider": "extidp", "redirect_url": format!("{SUCCESS}/linked")})),
    )
    .await;
    assert_eq!(status, 200, "{started}");
    let linked = world
        .sign_in(started["auth_url"].as_str().unwrap(), "dave@acme.test")
        .await;
    assert_eq!(linked.fragment()["linked"], "extidp", "{linked:?}");
    let landed = world.sign_in(&world.extidp_login(), "dave@acme.test").await;
    assert_eq!(landed.fragment()["user_id"], dave, "{landed:?}");

    // Unlinking leaves the password; then the provider no longer signs in.
    let (status, body) = call(
        Method::DELETE,
        &format!("{base}/api/auth/oauth/unlink?provider=extidp"),
        Some(&token),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let landed = world.sign_in(&world.extidp_login(), "dave@acme.test").await;
    assert!(landed.error().is_some(), "{landed:?}");
}

#[tokio::test]
async fn two_first_sign_ins_at_once_make_one_account() {
    let world = world(&[]).await;
    // Through both providers at once: one provisions, the other links the
    // same (verified) address, whichever comes first.
    let (extidp, sso) = (world.extidp_login(), world.sso_login());
    for email in ["alice@acme.test", "bob@acme.test"] {
        let (one, two) = tokio::join!(world.sign_in(&extidp, email), world.sign_in(&sso, email));
        assert!(one.url.starts_with(SUCCESS), "{one:?}");
        assert!(two.url.starts_with(SUCCESS), "{two:?}");
        assert_eq!(one.fragment()["user_id"], two.fragment()["user_id"]);
    }
}

#[tokio::test]
async fn a_provisioned_account_keeps_its_only_way_in() {
    let world = world(&[]).await;
    let base = &world.service.base;
    let landed = world
        .sign_in(&world.extidp_login(), "carol@acme.test")
        .await;
    let token = landed.fragment()["access_token"].clone();
    let (status, body) = call(
        Method::DELETE,
        &format!("{base}/api/auth/oauth/unlink"),
        Some(&token),
        None,
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["rule"], "LAST_SIGN_IN_METHOD", "{body}");
}

#[tokio::test]
async fn redirects_go_only_to_allowed_hosts_and_the_routes_answer() {
    let world = world(&[]).await;
    let base = &world.service.base;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for start in [world.extidp_login(), world.sso_login()] {
        let answer = http
            .get(format!("{start}?redirect_url=https://elsewhere.invalid/x"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 400);
        let body: Value = answer.json().await.unwrap();
        assert!(body.to_string().contains("Invalid redirect URL"), "{body}");
    }
    // A form posted to the legacy callback without a live state ends at
    // the error address, whatever else it holds.
    let posted = http
        .post(format!("{base}/auth/sso/callback"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("code=abc&state=forged.99999999999&%ZZ=1")
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 302);
    let location = posted.headers()["location"].to_str().unwrap();
    assert!(location.starts_with(FAILED), "{location}");
    assert!(location.contains("error=Invalid+state+token"), "{location}");

    // An API client gets the provider's address as JSON (also at the
    // paths the upstream SDK calls).
    for path in [
        "/api/v1/auth/sso/login",
        "/api/sso/login",
        "/auth/sso/login",
    ] {
        let (status, body) = call(Method::GET, &format!("{base}{path}"), None, None).await;
        assert_eq!(status, 200, "{path}: {body}");
        let auth_url = body["auth_url"].as_str().unwrap();
        assert!(auth_url.starts_with(&world.idp.issuer), "{auth_url}");
    }
    // Logging out ends a session: a credential without one is refused.
    let (status, body) = call(
        Method::POST,
        &format!("{base}/api/v1/auth/sso/logout"),
        Some(crate::support::TEST_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 403, "{body}");

    let (status, body) = call(
        Method::GET,
        &format!("{base}/api/auth/oauth/providers"),
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);
    let ids: Vec<_> = body["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["extidp", "sso"]);
    let (status, body) = call(
        Method::GET,
        &format!("{base}/api/v1/auth/sso/providers"),
        None,
        None,
    )
    .await;
    assert_eq!((status, body["enabled"].clone()), (200, json!(true)));
    // The configuration is the admins'.
    let (status, _) = call(
        Method::GET,
        &format!("{base}/api/v1/auth/sso/config"),
        None,
        None,
    )
    .await;
    assert_eq!(status, 401);
    let config = crate::support::accounts::admin_get(base, "/api/v1/auth/sso/config").await;
    assert_eq!(config["client_id"], "agon-sso");
    assert!(!config.to_string().contains(SSO_SECRET));
}
