//! Settings of sign-in through identity providers: the OAuth 2.0 provider
//! `extidp` (`EXTIDP_OAUTH_*`, `OAUTH_*`) and enterprise SSO
//! (`SERVICE_SSO_*`), spec §5.3 and §5.4.

use std::time::Duration;

use agon_aggregates::organization::OrgRole;

use super::values::{ConfigError, Secret, Vars};

/// The issuer `extidp` discovers when `EXTIDP_OAUTH_ISSUER_URL` is unset.
pub const EXTIDP_DEFAULT_ISSUER: &str = "https://accounts.google.com";

/// One OpenID Connect relying party: who we are at the provider.
#[derive(Debug, Clone)]
pub struct OidcClient {
    pub client_id: String,
    pub client_secret: Option<Secret>,
    /// Where discovery starts (`<issuer>/.well-known/openid-configuration`);
    /// the ID token's `iss` must equal it.
    pub issuer_url: String,
    /// Our callback, registered at the provider.
    pub redirect_uri: String,
    pub scopes: Vec<String>,
}

/// Which protocol enterprise SSO speaks.
#[derive(Debug, Clone)]
pub enum SsoProtocol {
    Oidc(OidcClient),
    Saml(SamlSettings),
}

/// SAML 2.0 (`SERVICE_SSO_PROVIDER_TYPE=saml`): the identity provider and
/// who we are to it. Files named by the variables are read at start.
#[derive(Debug, Clone)]
pub struct SamlSettings {
    /// `SERVICE_SSO_IDP_ENTITY_ID`: the `Issuer` every response must name.
    pub idp_entity_id: String,
    /// `SERVICE_SSO_IDP_SSO_URL`: where sign-in requests go (HTTP-Redirect).
    pub idp_sso_url: String,
    /// `SERVICE_SSO_IDP_SLO_URL`: the provider's single logout address
    /// (HTTP-Redirect), when it has one.
    pub idp_slo_url: Option<String>,
    /// `SERVICE_SSO_IDP_CERTIFICATE`: the PEM (or base64 DER) certificate
    /// every response or assertion must be signed with.
    pub idp_certificate: String,
    /// `SERVICE_SSO_SP_PRIVATE_KEY` and `SERVICE_SSO_SP_CERTIFICATE`: PEM;
    /// when both are set, requests we send are signed.
    pub sp_signing: Option<(Secret, String)>,
    /// Our assertion consumer service: `SERVICE_SSO_CALLBACK_URL`, default
    /// `{SERVICE_PUBLIC_URL}/auth/sso/callback`.
    pub acs_url: String,
    /// Our single logout service: `{SERVICE_PUBLIC_URL}/auth/sso/logout`.
    pub slo_url: String,
    /// `SERVICE_SSO_SAML_MAX_AGE_SECONDS`: how old an assertion may be
    /// (from its `IssueInstant`). Default 180.
    pub max_age: Duration,
    /// `SERVICE_SSO_CLOCK_SKEW_SECONDS`: the leeway on time conditions.
    /// Default 60.
    pub clock_skew: Duration,
    /// `SERVICE_SSO_SAML_MAX_MESSAGE_BYTES`: the most a deflated message
    /// on the redirect binding (a logout request) may inflate to. Default 65536.
    pub max_message_bytes: u64,
}

#[derive(Debug, Clone)]
pub struct SsoSettings {
    /// `SERVICE_SSO_PROVIDER_TYPE` as given (`oidc`, or a directory's name
    /// that speaks OIDC: `azure_ad`, `okta`).
    pub provider_type: String,
    pub protocol: SsoProtocol,
    /// `SERVICE_SSO_ENTITY_ID`: our name at the provider; default
    /// `{SERVICE_PUBLIC_URL}/auth/sso`.
    pub entity_id: String,
    /// `SERVICE_SSO_ALLOWED_DOMAINS`: email domains that may sign in; empty: any.
    pub allowed_domains: Vec<String>,
    /// `SERVICE_SSO_ALLOWED_GROUPS`: the provider groups that may sign in
    /// (one is enough); empty: any.
    pub allowed_groups: Vec<String>,
    /// `SERVICE_SSO_GROUPS_CLAIM`: the ID token claim listing the user's
    /// groups. Default `groups`.
    pub groups_claim: String,
    /// `SERVICE_SSO_ORG_ID`: the organization a provisioned user joins.
    pub org_id: Option<String>,
    /// `SERVICE_SSO_GROUP_ROLES`: `group=role` pairs (roles `admin`,
    /// `member`, `viewer`), first match in the listed order wins.
    pub group_roles: Vec<(String, OrgRole)>,
    /// `SERVICE_SSO_DEFAULT_ROLE`: the role when no group matches. Default `member`.
    pub default_role: OrgRole,
}

#[derive(Debug, Clone)]
pub struct OAuthSettings {
    /// `EXTIDP_OAUTH_CLIENT_ID` and the rest; `None` when the client id is unset.
    pub extidp: Option<OidcClient>,
    /// `OAUTH_SUCCESS_URL`: where a sign-in lands, tokens in the fragment.
    /// Default `{SERVICE_PUBLIC_URL}/`.
    pub success_url: String,
    /// `OAUTH_ERROR_URL`: where a failed sign-in lands, `error` in the
    /// query. Default `{SERVICE_PUBLIC_URL}/login`.
    pub error_url: String,
    /// `OAUTH_ALLOWED_REDIRECT_HOSTS`: hosts a caller's `redirect_url` may
    /// name. Default: the host of `SERVICE_PUBLIC_URL`.
    pub allowed_redirect_hosts: Vec<String>,
    /// `SERVICE_OAUTH_STATE_TTL_SECONDS`: how long a sign-in's state token
    /// stays good. Default 600 (§8.2).
    pub state_ttl: Duration,
    /// `SERVICE_SSO_TIMEOUT_SECONDS`: one call to a provider. Default 10.
    pub timeout: Duration,
    /// `SERVICE_SSO_DISCOVERY_TTL_SECONDS`: how long a provider's discovery
    /// document and keys are reused. Default 3600.
    pub discovery_ttl: Duration,
    /// `SERVICE_SSO_ENABLED` and the rest; `None` when SSO is off.
    pub sso: Option<SsoSettings>,
}

impl OAuthSettings {
    pub(super) fn read<F: Fn(&str) -> Option<String>>(
        vars: &Vars<F>,
        public_url: &str,
    ) -> Result<Self, ConfigError> {
        let public_host = reqwest::Url::parse(public_url)
            .ok()
            .and_then(|url| url.host_str().map(str::to_owned))
            .unwrap_or_else(|| "localhost".to_owned());
        let mut allowed_redirect_hosts = vars.list("OAUTH_ALLOWED_REDIRECT_HOSTS");
        if allowed_redirect_hosts.is_empty() {
            allowed_redirect_hosts.push(public_host);
        }
        let success_url = url(vars, "OAUTH_SUCCESS_URL", format!("{public_url}/"))?;
        let error_url = url(vars, "OAUTH_ERROR_URL", format!("{public_url}/login"))?;
        let extidp = match vars.get("EXTIDP_OAUTH_CLIENT_ID") {
            None => None,
            Some(client_id) => Some(OidcClient {
                client_id,
                client_secret: vars.get("EXTIDP_OAUTH_CLIENT_SECRET").map(Secret::new),
                issuer_url: url(
                    vars,
                    "EXTIDP_OAUTH_ISSUER_URL",
                    EXTIDP_DEFAULT_ISSUER.to_owned(),
                )?,
                redirect_uri: url(
                    vars,
                    "EXTIDP_OAUTH_REDIRECT_URI",
                    format!("{public_url}/api/auth/oauth/extidp/callback"),
                )?,
                scopes: scopes(vars, "EXTIDP_OAUTH_SCOPES"),
            }),
        };
        Ok(Self {
            extidp,
            success_url,
            error_url,
            allowed_redirect_hosts,
            state_ttl: Duration::from_secs(vars.within(
                "SERVICE_OAUTH_STATE_TTL_SECONDS",
                1,
                86_400,
                600,
            )?),
            timeout: Duration::from_secs(vars.within("SERVICE_SSO_TIMEOUT_SECONDS", 1, 300, 10)?),
            discovery_ttl: Duration::from_secs(vars.within(
                "SERVICE_SSO_DISCOVERY_TTL_SECONDS",
                1,
                604_800,
                3_600,
            )?),
            sso: read_sso(vars, public_url)?,
        })
    }
}

fn read_sso<F: Fn(&str) -> Option<String>>(
    vars: &Vars<F>,
    public_url: &str,
) -> Result<Option<SsoSettings>, ConfigError> {
    if !vars.flag("SERVICE_SSO_ENABLED", false)? {
        return Ok(None);
    }
    let provider_type = vars
        .get("SERVICE_SSO_PROVIDER_TYPE")
        .unwrap_or_else(|| "oidc".to_owned())
        .to_ascii_lowercase();
    let protocol = match provider_type.as_str() {
        "oidc" | "azure_ad" | "okta" => SsoProtocol::Oidc(OidcClient {
            client_id: vars.get("SERVICE_SSO_CLIENT_ID").ok_or_else(|| {
                ConfigError::new("SERVICE_SSO_CLIENT_ID", "is required when SSO is enabled")
            })?,
            client_secret: vars.get("SERVICE_SSO_CLIENT_SECRET").map(Secret::new),
            issuer_url: vars
                .get("SERVICE_SSO_ISSUER_URL")
                .ok_or_else(|| {
                    ConfigError::new("SERVICE_SSO_ISSUER_URL", "is required for OIDC SSO")
                })
                .and_then(|issuer| url(vars, "SERVICE_SSO_ISSUER_URL", issuer))?,
            redirect_uri: url(
                vars,
                "SERVICE_SSO_CALLBACK_URL",
                format!("{public_url}/api/v1/auth/sso/callback"),
            )?,
            scopes: scopes(vars, "SERVICE_SSO_SCOPES"),
        }),
        "saml" => SsoProtocol::Saml(read_saml(vars, public_url)?),
        _ => {
            return Err(ConfigError::new(
                "SERVICE_SSO_PROVIDER_TYPE",
                "must be oidc, azure_ad, okta or saml",
            ));
        }
    };
    let mut group_roles = Vec::new();
    for pair in vars.list("SERVICE_SSO_GROUP_ROLES") {
        let parsed = pair
            .split_once('=')
            .and_then(|(group, role)| Some((group.trim(), OrgRole::parse_invitable(role.trim())?)))
            .filter(|(group, _)| !group.is_empty());
        let (group, role) = parsed.ok_or_else(|| {
            ConfigError::new(
                "SERVICE_SSO_GROUP_ROLES",
                "is a list of group=role, each role admin, member or viewer",
            )
        })?;
        group_roles.push((group.to_owned(), role));
    }
    let default_role = match vars.get("SERVICE_SSO_DEFAULT_ROLE") {
        None => OrgRole::Member,
        Some(role) => OrgRole::parse_invitable(&role).ok_or_else(|| {
            ConfigError::new(
                "SERVICE_SSO_DEFAULT_ROLE",
                "must be admin, member or viewer",
            )
        })?,
    };
    Ok(Some(SsoSettings {
        provider_type,
        protocol,
        entity_id: vars
            .get("SERVICE_SSO_ENTITY_ID")
            .unwrap_or_else(|| format!("{public_url}/auth/sso")),
        allowed_domains: vars
            .list("SERVICE_SSO_ALLOWED_DOMAINS")
            .into_iter()
            .map(|domain| domain.trim_start_matches('@').to_ascii_lowercase())
            .collect(),
        allowed_groups: vars.list("SERVICE_SSO_ALLOWED_GROUPS"),
        groups_claim: vars
            .get("SERVICE_SSO_GROUPS_CLAIM")
            .unwrap_or_else(|| "groups".to_owned()),
        org_id: vars.get("SERVICE_SSO_ORG_ID"),
        group_roles,
        default_role,
    }))
}

fn read_saml<F: Fn(&str) -> Option<String>>(
    vars: &Vars<F>,
    public_url: &str,
) -> Result<SamlSettings, ConfigError> {
    let required = |variable: &'static str| {
        vars.get(variable)
            .ok_or_else(|| ConfigError::new(variable, "is required for SAML SSO"))
    };
    let idp_sso_url = url(
        vars,
        "SERVICE_SSO_IDP_SSO_URL",
        required("SERVICE_SSO_IDP_SSO_URL")?,
    )?;
    let idp_slo_url = match vars.get("SERVICE_SSO_IDP_SLO_URL") {
        Some(given) => Some(url(vars, "SERVICE_SSO_IDP_SLO_URL", given)?),
        None => None,
    };
    let idp_certificate = read_file(
        "SERVICE_SSO_IDP_CERTIFICATE",
        &required("SERVICE_SSO_IDP_CERTIFICATE")?,
    )?;
    let sp_signing = match (
        vars.get("SERVICE_SSO_SP_PRIVATE_KEY"),
        vars.get("SERVICE_SSO_SP_CERTIFICATE"),
    ) {
        (None, None) => None,
        (Some(key), Some(certificate)) => Some((
            Secret::new(read_file("SERVICE_SSO_SP_PRIVATE_KEY", &key)?),
            read_file("SERVICE_SSO_SP_CERTIFICATE", &certificate)?,
        )),
        (None, Some(_)) => {
            return Err(ConfigError::new(
                "SERVICE_SSO_SP_PRIVATE_KEY",
                "is required with SERVICE_SSO_SP_CERTIFICATE",
            ));
        }
        (Some(_), None) => {
            return Err(ConfigError::new(
                "SERVICE_SSO_SP_CERTIFICATE",
                "is required with SERVICE_SSO_SP_PRIVATE_KEY",
            ));
        }
    };
    Ok(SamlSettings {
        idp_entity_id: required("SERVICE_SSO_IDP_ENTITY_ID")?,
        idp_sso_url,
        idp_slo_url,
        idp_certificate,
        sp_signing,
        acs_url: url(
            vars,
            "SERVICE_SSO_CALLBACK_URL",
            format!("{public_url}/auth/sso/callback"),
        )?,
        slo_url: format!("{public_url}/auth/sso/logout"),
        max_age: Duration::from_secs(vars.within(
            "SERVICE_SSO_SAML_MAX_AGE_SECONDS",
            10,
            86_400,
            180,
        )?),
        clock_skew: Duration::from_secs(vars.within(
            "SERVICE_SSO_CLOCK_SKEW_SECONDS",
            0,
            600,
            60,
        )?),
        max_message_bytes: vars.within(
            "SERVICE_SSO_SAML_MAX_MESSAGE_BYTES",
            1_024,
            16_777_216,
            65_536,
        )?,
    })
}

/// The text of the file `path` names (a key or a certificate).
fn read_file(variable: &'static str, path: &str) -> Result<String, ConfigError> {
    std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(variable, format!("cannot read {path}: {e}")))
}

/// Scopes from a comma-separated list (spaces also split); `openid` first,
/// always. Default `openid,email,profile`.
fn scopes<F: Fn(&str) -> Option<String>>(vars: &Vars<F>, variable: &str) -> Vec<String> {
    let given = vars
        .get(variable)
        .unwrap_or_else(|| "openid,email,profile".to_owned());
    let mut scopes = vec!["openid".to_owned()];
    for scope in given.split([',', ' ']).map(str::trim) {
        if !scope.is_empty() && !scopes.iter().any(|s| s == scope) {
            scopes.push(scope.to_owned());
        }
    }
    scopes
}

/// An absolute http(s) URL from `variable`, or `default`.
fn url<F: Fn(&str) -> Option<String>>(
    vars: &Vars<F>,
    variable: &'static str,
    default: String,
) -> Result<String, ConfigError> {
    let value = vars.get(variable).unwrap_or(default);
    let parsed = reqwest::Url::parse(&value)
        .map_err(|e| ConfigError::new(variable, format!("not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ConfigError::new(variable, "must be an http(s) URL"));
    }
    Ok(value)
}
