//! Enterprise SSO over SAML 2.0, black-box: the real binary, a real SAML
//! identity provider (samlify, `tests/idp/saml.mjs`) that reads the
//! service's metadata, and a browser that posts the provider's forms; then
//! each known attack on a service provider, refused.

use reqwest::Method;
use serde_json::json;

use crate::support::accounts::{admin_get, call, me};
use crate::support::binary::{Serve, Served};
use crate::support::idp::{Browser, Landed, SamlIdp};

/// Never fetched: the browser stops when a redirect leads here.
const SUCCESS: &str = "http://127.0.0.1:9/signed-in";
const FAILED: &str = "http://127.0.0.1:9/sign-in-failed";
const REJECTED: &str = "The identity provider's SAML response was rejected";

struct World {
    idp: SamlIdp,
    service: Served,
    _data: tempfile::TempDir,
}

/// The provider, and the service (with `extra` settings) that trusts it.
async fn world(extra: &[(&str, &str)], signed_requests: bool) -> World {
    let idp = SamlIdp::start().await;
    let serve = Serve::on_free_ports().loopback();
    let base = serve.base();
    let data = tempfile::tempdir().unwrap();
    let mut envs: Vec<(String, String)> = [
        (
            "SERVICE_JWT_SECRET",
            "saml-test-secret-0123456789-0123456789",
        ),
        ("SERVICE_API_TOKEN", crate::support::TEST_TOKEN),
        ("OAUTH_SUCCESS_URL", SUCCESS),
        ("OAUTH_ERROR_URL", FAILED),
        ("OAUTH_ALLOWED_REDIRECT_HOSTS", "127.0.0.1"),
        ("SERVICE_SSO_ENABLED", "true"),
        ("SERVICE_SSO_PROVIDER_TYPE", "saml"),
        ("SERVICE_SSO_ALLOWED_DOMAINS", "acme.test"),
        ("SERVICE_SSO_ALLOWED_GROUPS", "staff"),
        ("SERVICE_SSO_GROUP_ROLES", "agon-admins=admin,staff=member"),
        ("SERVICE_IP_RATE_LIMIT", "100000"),
        ("SERVICE_RATE_LIMIT_SSO", "100000"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    envs.extend([
        ("SERVICE_PUBLIC_URL".to_owned(), base.clone()),
        (
            "SERVICE_SSO_IDP_ENTITY_ID".to_owned(),
            format!("{}/metadata", idp.base),
        ),
        (
            "SERVICE_SSO_IDP_SSO_URL".to_owned(),
            format!("{}/sso", idp.base),
        ),
        (
            "SERVICE_SSO_IDP_SLO_URL".to_owned(),
            format!("{}/slo", idp.base),
        ),
        (
            "SERVICE_SSO_IDP_CERTIFICATE".to_owned(),
            idp.file("idp.pem"),
        ),
    ]);
    if signed_requests {
        envs.push(("SERVICE_SSO_SP_PRIVATE_KEY".to_owned(), idp.file("sp.key")));
        envs.push(("SERVICE_SSO_SP_CERTIFICATE".to_owned(), idp.file("sp.pem")));
    }
    for (key, value) in extra {
        envs.retain(|(k, _)| k != key);
        envs.push(((*key).to_owned(), (*value).to_owned()));
    }
    let service = serve.data_dir(data.path()).envs(envs).start().await;
    idp.trust(&format!("{}/auth/sso/metadata", service.base))
        .await;
    World {
        idp,
        service,
        _data: data,
    }
}

impl World {
    fn login_url(&self) -> String {
        format!("{}/api/v1/auth/sso/login", self.service.base)
    }

    async fn sign_in(&self, login: &str) -> Landed {
        Browser::default()
            .walk(&self.login_url(), login, &[SUCCESS, FAILED])
            .await
    }
}

#[tokio::test]
async fn saml_provisions_with_the_role_of_its_groups_and_refuses_others() {
    let data = tempfile::tempdir().unwrap();
    let org_id = crate::sso::organization(data.path()).await;
    let data_dir = data.path().to_str().unwrap().to_owned();
    let world = world(
        &[
            ("SERVICE_SSO_ORG_ID", &org_id),
            ("SERVICE_DATA_DIR", &data_dir),
        ],
        false,
    )
    .await;
    let base = &world.service.base;

    // The metadata holds §5.4's values.
    let metadata = reqwest::get(format!("{base}/auth/sso/metadata"))
        .await
        .unwrap();
    assert_eq!(metadata.status(), 200);
    assert_eq!(
        metadata.headers()["content-type"],
        "application/samlmetadata+xml"
    );
    let metadata = metadata.text().await.unwrap();
    for expected in [
        format!("entityID=\"{base}/auth/sso\""),
        format!("Location=\"{base}/auth/sso/callback\""),
        format!("Location=\"{base}/auth/sso/logout\""),
        "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress".to_owned(),
        "AuthnRequestsSigned=\"false\"".to_owned(),
    ] {
        assert!(metadata.contains(&expected), "{expected} in {metadata}");
    }

    for (login, role) in [("alice@acme.test", "admin"), ("bob@acme.test", "member")] {
        let landed = world.sign_in(login).await;
        assert!(landed.url.starts_with(SUCCESS), "{landed:?}");
        let fragment = landed.fragment();
        let (status, profile) = me(base, &fragment["access_token"]).await;
        assert_eq!(status, 200, "{profile}");
        assert_eq!(profile["email"], login);
        assert_eq!(
            profile["name"],
            if role == "admin" {
                "Alice Admin"
            } else {
                "Bob Builder"
            }
        );
        assert_eq!(profile["org_id"], org_id.as_str(), "{profile}");
        assert_eq!(profile["org_role"], role, "{profile}");
        assert_eq!(profile["linked_providers"], json!(["sso"]));
    }
    // The same person again is the same account.
    let first = world.sign_in("bob@acme.test").await.fragment()["user_id"].clone();
    let again = world.sign_in("bob@acme.test").await.fragment()["user_id"].clone();
    assert_eq!(first, again);

    // Another domain, or no allowed group: refused, nothing provisioned.
    for login in ["mallory@evil.test", "carol@acme.test"] {
        let landed = world.sign_in(login).await;
        assert_eq!(
            landed.error().as_deref(),
            Some("User not authorized"),
            "{login}"
        );
    }

    let providers = admin_get(base, "/api/v1/auth/sso/providers").await;
    assert_eq!(providers["providers"][0]["protocol"], "saml", "{providers}");
    let config = admin_get(base, "/api/v1/auth/sso/config").await;
    assert_eq!(config["provider_type"], "saml");
    assert_eq!(config["acs_url"], format!("{base}/auth/sso/callback"));
    assert_eq!(
        config["idp_entity_id"],
        format!("{}/metadata", world.idp.base)
    );
}

#[tokio::test]
async fn every_known_attack_on_the_response_is_refused() {
    let world = world(&[], false).await;
    // bob is a real user of the provider; each mode bends what it signs
    // for him (`wrapped*` and `comment` aim at alice's account).
    for (mode, why) in [
        ("unsigned", "unsigned"),
        (
            "wrong_cert",
            "does not verify with the identity provider's certificate",
        ),
        ("sha1", "SHA-1"),
        ("doctype", "document type declaration"),
        ("wrapped", "signature wrapping"),
        ("wrapped_inside", "signature wrapping"),
        ("comment", "comment"),
        ("expired", "expired"),
        ("wrong_audience", "Audience"),
        ("no_audience", "not restricted to this service"),
    ] {
        world.idp.mode(mode).await;
        let landed = world.sign_in("bob@acme.test").await;
        let error = landed.error().unwrap_or_default();
        assert!(error.starts_with(REJECTED), "{mode}: {landed:?}");
        assert!(
            error.to_lowercase().contains(&why.to_lowercase()),
            "{mode}: {error}"
        );
    }
    // Nobody was signed in or provisioned by any of them.
    let users = admin_get(&world.service.base, "/api/v1/admin/users").await;
    assert!(!users.to_string().contains("@acme.test"), "{users}");

    // The same provider behaving: bob signs in.
    world.idp.mode("normal").await;
    let landed = world.sign_in("bob@acme.test").await;
    assert!(landed.url.starts_with(SUCCESS), "{landed:?}");
}

#[tokio::test]
async fn a_response_and_an_assertion_are_accepted_once() {
    let world = world(&[], false).await;
    let acs = format!("{}/auth/sso/callback", world.service.base);
    let browser = Browser::default();
    let held = browser
        .walk(&world.login_url(), "bob@acme.test", &[&acs])
        .await;
    let form = held
        .form
        .clone()
        .expect("the provider's form to the service");
    assert!(
        form.iter().any(|(name, _)| name == "SAMLResponse"),
        "{form:?}"
    );

    let landed = browser.post(&acs, form.clone(), &[SUCCESS, FAILED]).await;
    assert!(landed.url.starts_with(SUCCESS), "{landed:?}");
    // The same post again: its flow is spent.
    let replayed = browser.post(&acs, form, &[SUCCESS, FAILED]).await;
    assert_eq!(replayed.error().as_deref(), Some("Invalid state token"));

    // An assertion already accepted, signed again into an answer to a new
    // request: refused by its id.
    world.idp.mode("replay_id").await;
    let landed = world.sign_in("bob@acme.test").await;
    assert_eq!(
        landed.error().as_deref(),
        Some("The SAML assertion was already used"),
        "{landed:?}"
    );

    // A response without its RelayState belongs to no flow; a body that
    // is not a form is not a response.
    let bare = Browser::default()
        .post(
            &acs,
            vec![(
                "SAMLResponse".to_owned(),
                "PHNhbWxwOlJlc3BvbnNlLz4=".to_owned(),
            )],
            &[SUCCESS, FAILED],
        )
        .await;
    assert_eq!(bare.error().as_deref(), Some("Invalid state token"));
    let (status, body) = call(Method::POST, &acs, None, Some(json!({}))).await;
    assert_eq!(status, 415, "{body}");
}

#[tokio::test]
async fn signed_requests_and_single_logout() {
    let world = world(&[], true).await;
    let base = &world.service.base;
    let metadata = reqwest::get(format!("{base}/auth/sso/metadata"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metadata.contains("AuthnRequestsSigned=\"true\""),
        "{metadata}"
    );

    // The request is signed, and the provider checks it against the
    // certificate in our metadata before it shows its form.
    let to_idp = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(world.login_url())
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    let location = to_idp.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.contains("&Signature="), "{location}");
    let forged = location.replace("&Signature=", "&Signature=AAAA");
    let refused = reqwest::get(&forged).await.unwrap();
    assert_eq!(
        refused.status(),
        400,
        "the provider took a forged signature"
    );

    let landed = world.sign_in("bob@acme.test").await;
    assert!(landed.url.starts_with(SUCCESS), "{landed:?}");
    let token = landed.fragment()["access_token"].clone();

    let (status, out) = call(
        Method::POST,
        &format!("{base}/api/v1/auth/sso/logout"),
        Some(&token),
        None,
    )
    .await;
    assert_eq!(status, 200, "{out}");
    let logout_url = out["logout_url"].as_str().unwrap();
    assert!(
        logout_url.starts_with(&format!("{}/slo?SAMLRequest=", world.idp.base)),
        "{logout_url}"
    );
    let at_idp = reqwest::get(logout_url).await.unwrap();
    assert_eq!(at_idp.status(), 200, "{}", at_idp.text().await.unwrap());
    let logouts = world.idp.logouts().await;
    assert_eq!(logouts[0]["name_id"], "bob@acme.test", "{logouts}");
    assert_eq!(logouts[0]["signed"], true);
    let (status, _) = me(base, &token).await;
    assert_eq!(status, 401, "the session ended");
}

#[tokio::test]
async fn the_provider_signs_a_user_out_of_every_session() {
    let world = world(&[], false).await;
    let base = &world.service.base;
    let token_of = |landed: Landed| landed.fragment()["access_token"].clone();
    let alice = token_of(world.sign_in("alice@acme.test").await);
    let bob = [
        token_of(world.sign_in("bob@acme.test").await),
        token_of(world.sign_in("bob@acme.test").await),
    ];
    let slo = format!("{}/slo", world.idp.base);

    // Unsigned, or with a forged signature: refused, nobody signed out.
    let (_, unsigned) = world.idp.logout_request("bob@acme.test", false).await;
    let (_, signed) = world.idp.logout_request("bob@acme.test", true).await;
    let forged = signed.replace("&Signature=", "&Signature=AAAA");
    for (what, url) in [("unsigned", &unsigned), ("forged", &forged)] {
        let landed = Browser::default()
            .walk(url, "", &[SUCCESS, FAILED, &slo])
            .await;
        let error = landed.error().unwrap_or_default();
        assert!(
            error.starts_with("The identity provider's logout request was rejected"),
            "{what}: {landed:?}"
        );
        for token in bob.iter().chain([&alice]) {
            assert_eq!(me(base, token).await.0, 200, "{what}");
        }
    }

    // Signed: both of bob's sessions end, alice's stays, and the provider
    // gets our answer.
    let (request_id, signed) = world.idp.logout_request("bob@acme.test", true).await;
    let landed = Browser::default()
        .walk(&signed, "", &[SUCCESS, FAILED, &slo])
        .await;
    assert!(
        landed.url.starts_with(&format!("{slo}?SAMLResponse=")),
        "{landed:?}"
    );
    reqwest::get(&landed.url).await.unwrap();
    let logouts = world.idp.logouts().await;
    let answer = &logouts[0];
    assert_eq!(answer["in_response_to"], request_id.as_str(), "{logouts}");
    assert_eq!(
        answer["status"],
        "urn:oasis:names:tc:SAML:2.0:status:Success"
    );
    assert_eq!(answer["relay_state"], "after-logout");
    for token in &bob {
        assert_eq!(me(base, token).await.0, 401, "bob's session ended");
    }
    assert_eq!(me(base, &alice).await.0, 200, "alice's session stays");

    // The provider's answer to a logout of ours lands on the success address.
    let landed = Browser::default()
        .walk(
            &format!("{base}/auth/sso/logout?SAMLResponse=whatever"),
            "",
            &[SUCCESS, FAILED],
        )
        .await;
    assert!(landed.url.starts_with(SUCCESS), "{landed:?}");
    // Without a SAML message or a credential: 401.
    let (status, _) = call(Method::GET, &format!("{base}/auth/sso/logout"), None, None).await;
    assert_eq!(status, 401);
}
