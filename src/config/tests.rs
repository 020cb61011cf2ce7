//! Settings read from the environment: defaults, bounds and the production checks.

use super::*;
use std::collections::HashMap;

fn settings(vars: &[(&str, &str)]) -> Result<Settings, ConfigError> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Settings::from_lookup(|name| map.get(name).cloned())
}

#[test]
fn defaults_are_the_embedded_back_end() {
    let s = settings(&[]).unwrap();
    assert_eq!(s.data_dir, PathBuf::from(".nomic"));
    assert!(s.database_url.is_none() && s.nats_url.is_none());
    assert_eq!(s.log_level, LogLevel::Info);
    assert_eq!(s.seal_interval, Duration::from_secs(60));
}

#[test]
fn log_levels_follow_the_spec_names() {
    assert_eq!(
        settings(&[("SERVICE_LOG_LEVEL", "warning")])
            .unwrap()
            .log_level,
        LogLevel::Warning
    );
    let err = settings(&[("SERVICE_LOG_LEVEL", "LOUD")]).unwrap_err();
    assert_eq!(err.variable, "SERVICE_LOG_LEVEL");
}

#[test]
fn bad_numbers_name_their_variable() {
    let err = settings(&[("SERVICE_SEAL_INTERVAL_SECONDS", "0")]).unwrap_err();
    assert_eq!(err.variable, "SERVICE_SEAL_INTERVAL_SECONDS");
}

#[test]
fn production_on_a_shared_database_requires_the_field_keys() {
    let long = "j".repeat(32);
    let key = "ab".repeat(32);
    let base = [
        ("SERVICE_ENV", "production"),
        ("SERVICE_JWT_SECRET", long.as_str()),
        ("DATABASE_URL", "postgres://db/agon"),
    ];
    let err = settings(&base).unwrap_err();
    assert_eq!(err.variable, "SERVICE_ENCRYPTION_KEY");
    let mut with_one = base.to_vec();
    with_one.push(("SERVICE_ENCRYPTION_KEY", key.as_str()));
    assert_eq!(
        settings(&with_one).unwrap_err().variable,
        "SERVICE_BLIND_INDEX_KEY"
    );
    with_one.push(("SERVICE_BLIND_INDEX_KEY", key.as_str()));
    assert!(settings(&with_one).is_ok());
    // The embedded store has one process: its key files are enough.
    assert!(settings(&base[..2]).is_ok());
}

#[test]
fn production_requires_a_long_jwt_secret() {
    let err = settings(&[("SERVICE_ENV", "production")]).unwrap_err();
    assert_eq!(err.variable, "SERVICE_JWT_SECRET");
    let err = settings(&[("SERVICE_JWT_SECRET", "short")]).unwrap_err();
    assert_eq!(err.variable, "SERVICE_JWT_SECRET");
    let long = "x".repeat(32);
    let s = settings(&[("SERVICE_ENV", "production"), ("SERVICE_JWT_SECRET", &long)]).unwrap();
    assert_eq!(s.environment, Environment::Production);
}

#[test]
fn wildcard_and_malformed_origins_are_refused() {
    for bad in [
        "*",
        "https://*.example.com",
        "example.com",
        "https://a.example/path",
    ] {
        let err = settings(&[("SERVICE_ALLOWED_ORIGINS", bad)]).unwrap_err();
        assert_eq!(err.variable, "SERVICE_ALLOWED_ORIGINS", "{bad}");
    }
    let s = settings(&[(
        "SERVICE_ALLOWED_ORIGINS",
        "https://a.example, http://localhost:3000",
    )])
    .unwrap();
    assert_eq!(
        s.http.allowed_origins,
        ["https://a.example", "http://localhost:3000"]
    );
}

#[test]
fn the_old_distributed_name_maps_to_the_new_one_with_a_warning() {
    let err = settings(&[("SERVICE_REQUIRE_DISTRIBUTED_STATE", "true")]).unwrap_err();
    assert_eq!(err.variable, "SERVICE_REQUIRE_DISTRIBUTED");
    let s = settings(&[
        ("SERVICE_REQUIRE_DISTRIBUTED_STATE", "true"),
        ("DATABASE_URL", "postgres://h/db"),
        ("SERVICE_NATS_URL", "nats://h:4222"),
    ])
    .unwrap();
    assert!(s.require_distributed);
    assert!(s.warnings[0].contains("SERVICE_REQUIRE_DISTRIBUTED_STATE"));
    let err = settings(&[
        ("SERVICE_REQUIRE_DISTRIBUTED", "true"),
        ("DATABASE_URL", "postgres://h/db"),
    ])
    .unwrap_err();
    assert!(err.problem.contains("SERVICE_NATS_URL"));
}

#[test]
fn rate_limit_settings_parse_and_name_their_variable() {
    let s = settings(&[
        ("SERVICE_TRUSTED_PROXIES", "10.0.0.0/8, 127.0.0.1"),
        ("SERVICE_BURST_MULTIPLIER", "1.5"),
        ("SERVICE_RATE_LIMIT", "70"),
    ])
    .unwrap();
    assert_eq!(s.rate_limits.trusted_proxies.len(), 2);
    assert_eq!(s.rate_limits.burst_multiplier, 1.5);
    assert_eq!(s.rate_limits.default_per_minute, 70);
    assert_eq!(s.rate_limits.ip_per_minute, 120);
    for (name, value) in [
        ("SERVICE_TRUSTED_PROXIES", "not-a-net"),
        ("SERVICE_BURST_MULTIPLIER", "0.5"),
        ("SERVICE_RATE_LIMIT_FAIL_OPEN", "maybe"),
        ("SERVICE_IP_RATE_LIMIT", "-1"),
    ] {
        assert_eq!(settings(&[(name, value)]).unwrap_err().variable, name);
    }
}

#[test]
fn secrets_do_not_print() {
    let s = settings(&[
        ("DATABASE_URL", "postgres://u:hunter2@h/db"),
        ("SERVICE_API_TOKEN", "static-hunter3-token"),
        ("SERVICE_SMTP_URL", "smtp://u:hunter4@mail:25"),
    ])
    .unwrap();
    let printed = format!("{s:?}");
    for secret in ["hunter2", "hunter3", "hunter4"] {
        assert!(!printed.contains(secret), "{secret} printed");
    }
}

#[test]
fn token_settings_follow_the_spec_defaults() {
    let s = settings(&[]).unwrap();
    assert_eq!(s.auth.access_ttl, Duration::from_secs(3_600));
    assert_eq!(s.auth.refresh_ttl, Duration::from_secs(7 * 86_400));
    assert_eq!(s.auth.max_sessions, 10);
    assert_eq!(s.auth.max_api_keys, 25);
    assert_eq!(s.auth.inactivity_timeout, Duration::from_secs(86_400));
    assert_eq!(s.auth.jwt_algorithm.as_str(), "HS256");
    let s = settings(&[("SERVICE_REFRESH_TOKEN_EXPIRY_DAYS", "30")]).unwrap();
    assert_eq!(s.auth.refresh_ttl, Duration::from_secs(30 * 86_400));
    let s = settings(&[
        ("SERVICE_REFRESH_TOKEN_EXPIRY_DAYS", "30"),
        ("SERVICE_JWT_REFRESH_EXPIRY_DAYS", "2"),
    ])
    .unwrap();
    assert_eq!(s.auth.refresh_ttl, Duration::from_secs(2 * 86_400));
}

#[test]
fn the_api_key_cap_is_range_checked() {
    let s = settings(&[("SERVICE_MAX_API_KEYS_PER_USER", "3")]).unwrap();
    assert_eq!(s.auth.max_api_keys, 3);
    for bad in ["0", "1001", "many"] {
        let e = settings(&[("SERVICE_MAX_API_KEYS_PER_USER", bad)]).unwrap_err();
        assert_eq!(e.variable, "SERVICE_MAX_API_KEYS_PER_USER", "{bad}");
    }
}

#[test]
fn access_lifetime_is_capped_with_a_warning() {
    let s = settings(&[("SERVICE_JWT_EXPIRY_HOURS", "500")]).unwrap();
    assert_eq!(s.auth.access_ttl, Duration::from_secs(168 * 3_600));
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("SERVICE_JWT_EXPIRY_HOURS"))
    );
}

#[test]
fn only_hmac_algorithms_and_good_keys_are_accepted() {
    for bad in ["none", "RS256", "hs1"] {
        let e = settings(&[("SERVICE_JWT_ALGORITHM", bad)]).unwrap_err();
        assert_eq!(e.variable, "SERVICE_JWT_ALGORITHM");
    }
    assert!(settings(&[("SERVICE_JWT_ALGORITHM", "hs512")]).is_ok());
    let key = "ab".repeat(32);
    assert!(settings(&[("SERVICE_ENCRYPTION_KEY", &key)]).is_ok());
    for bad in ["abc", &"zz".repeat(32), &format!("{key},")] {
        let e = settings(&[("SERVICE_ENCRYPTION_KEY", bad)]);
        if let Err(e) = e {
            assert_eq!(e.variable, "SERVICE_ENCRYPTION_KEY");
            assert!(!e.to_string().contains(&key), "the key is echoed");
        } else {
            panic!("{bad:?} accepted");
        }
    }
    let e = settings(&[("SERVICE_API_TOKEN", "short")]).unwrap_err();
    assert_eq!(e.variable, "SERVICE_API_TOKEN");
}

#[test]
fn sso_settings_read_the_spec_names_and_refuse_what_they_cannot_do() {
    let sso = [
        ("SERVICE_SSO_ENABLED", "true"),
        ("SERVICE_SSO_CLIENT_ID", "agon"),
        ("SERVICE_SSO_ISSUER_URL", "https://idp.example/realms/acme"),
        (
            "SERVICE_SSO_ALLOWED_DOMAINS",
            "@Acme.Example, other.example",
        ),
        ("SERVICE_SSO_GROUP_ROLES", "admins=admin, staff = viewer"),
        ("SERVICE_SSO_SCOPES", "email groups"),
    ];
    let s = settings(&sso).unwrap();
    let read = s.oauth.sso.as_ref().unwrap();
    assert_eq!(read.allowed_domains, ["acme.example", "other.example"]);
    assert_eq!(
        read.group_roles,
        [
            (
                "admins".to_owned(),
                agon_aggregates::organization::OrgRole::Admin
            ),
            (
                "staff".to_owned(),
                agon_aggregates::organization::OrgRole::Viewer
            ),
        ]
    );
    let SsoProtocol::Oidc(client) = &read.protocol else {
        panic!("OIDC")
    };
    assert_eq!(client.scopes, ["openid", "email", "groups"]);
    assert_eq!(
        client.redirect_uri,
        "http://localhost:8080/api/v1/auth/sso/callback"
    );
    assert_eq!(read.entity_id, "http://localhost:8080/auth/sso");
    // The default scopes are the spec's.
    let s = settings(&sso[..3]).unwrap();
    let SsoProtocol::Oidc(client) = &s.oauth.sso.as_ref().unwrap().protocol else {
        panic!("OIDC")
    };
    assert_eq!(client.scopes, ["openid", "email", "profile"]);

    for (variable, value) in [
        ("SERVICE_SSO_GROUP_ROLES", "admins=owner"),
        ("SERVICE_SSO_GROUP_ROLES", "=admin"),
        ("SERVICE_SSO_PROVIDER_TYPE", "ldap"),
        ("SERVICE_SSO_ISSUER_URL", "ftp://idp.example"),
        ("SERVICE_SSO_DEFAULT_ROLE", "owner"),
    ] {
        let mut vars = sso.to_vec();
        vars.retain(|(k, _)| *k != variable);
        vars.push((variable, value));
        let err = settings(&vars).unwrap_err();
        assert_eq!(err.variable, variable, "{value}");
    }
    let err = settings(&[("SERVICE_SSO_ENABLED", "true")]).unwrap_err();
    assert_eq!(err.variable, "SERVICE_SSO_CLIENT_ID");
    // Off by default; extidp needs its client id.
    let s = settings(&[]).unwrap();
    assert!(s.oauth.sso.is_none() && s.oauth.extidp.is_none());
    assert_eq!(s.oauth.state_ttl, Duration::from_secs(600));
    assert_eq!(s.oauth.allowed_redirect_hosts, ["localhost"]);
}

#[test]
fn saml_settings_read_the_files_named_and_refuse_half_a_key_pair() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    };
    let (idp, key, cert) = (
        file("idp.pem", "IDP CERT"),
        file("sp.key", "SP KEY"),
        file("sp.pem", "SP CERT"),
    );
    let saml = [
        ("SERVICE_SSO_ENABLED", "true"),
        ("SERVICE_SSO_PROVIDER_TYPE", "SAML"),
        ("SERVICE_SSO_IDP_ENTITY_ID", "https://idp.example/saml"),
        ("SERVICE_SSO_IDP_SSO_URL", "https://idp.example/sso"),
        ("SERVICE_SSO_IDP_CERTIFICATE", idp.as_str()),
    ];
    let s = settings(&saml).unwrap();
    let SsoProtocol::Saml(read) = &s.oauth.sso.as_ref().unwrap().protocol else {
        panic!("SAML")
    };
    assert_eq!(read.idp_certificate, "IDP CERT");
    assert_eq!(read.acs_url, "http://localhost:8080/auth/sso/callback");
    assert_eq!(read.slo_url, "http://localhost:8080/auth/sso/logout");
    assert!(read.sp_signing.is_none() && read.idp_slo_url.is_none());
    assert_eq!(read.clock_skew.as_secs(), 60);
    assert_eq!(read.max_message_bytes, 65_536);

    let mut signed = saml.to_vec();
    signed.extend([
        ("SERVICE_SSO_SP_PRIVATE_KEY", key.as_str()),
        ("SERVICE_SSO_SP_CERTIFICATE", cert.as_str()),
    ]);
    let s = settings(&signed).unwrap();
    let SsoProtocol::Saml(read) = &s.oauth.sso.as_ref().unwrap().protocol else {
        panic!("SAML")
    };
    let (key_text, cert_text) = read.sp_signing.as_ref().unwrap();
    assert_eq!(
        (key_text.expose(), cert_text.as_str()),
        ("SP KEY", "SP CERT")
    );

    for (variable, value, blamed) in [
        (
            "SERVICE_SSO_SP_PRIVATE_KEY",
            key.as_str(),
            "SERVICE_SSO_SP_CERTIFICATE",
        ),
        (
            "SERVICE_SSO_SP_CERTIFICATE",
            cert.as_str(),
            "SERVICE_SSO_SP_PRIVATE_KEY",
        ),
        (
            "SERVICE_SSO_IDP_CERTIFICATE",
            "/no/such/file.pem",
            "SERVICE_SSO_IDP_CERTIFICATE",
        ),
        (
            "SERVICE_SSO_IDP_SSO_URL",
            "ftp://idp.example",
            "SERVICE_SSO_IDP_SSO_URL",
        ),
        (
            "SERVICE_SSO_CLOCK_SKEW_SECONDS",
            "3600",
            "SERVICE_SSO_CLOCK_SKEW_SECONDS",
        ),
    ] {
        let mut vars = saml.to_vec();
        vars.retain(|(k, _)| *k != variable);
        vars.push((variable, value));
        let err = settings(&vars).unwrap_err();
        assert_eq!(err.variable, blamed, "{variable}={value}");
    }
    let mut missing = saml.to_vec();
    missing.retain(|(k, _)| *k != "SERVICE_SSO_IDP_ENTITY_ID");
    assert_eq!(
        settings(&missing).unwrap_err().variable,
        "SERVICE_SSO_IDP_ENTITY_ID"
    );
}

mod limits;
