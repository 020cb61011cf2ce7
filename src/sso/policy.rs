//! The organization's say over enterprise SSO: which email domains and
//! provider groups may sign in, and where a provisioned account goes (the
//! organization of `SERVICE_SSO_ORG_ID`, the role its groups map to).

use agon_aggregates::organization::OrgRole;
use serde_json::Value;

use super::{SsoError, Vouched};
use crate::auth::Auth;
use crate::auth::providers::Placement;
use crate::config::SsoSettings;

/// The domain and group checks of SSO; the organization and role a
/// provisioned account gets. A refusal is recorded on the account's trail.
pub async fn authorize(
    auth: &Auth,
    settings: &SsoSettings,
    vouched: &Vouched,
) -> Result<Option<Placement>, SsoError> {
    let groups = groups(&vouched.claims, &settings.groups_claim);
    let domain_ok = settings.allowed_domains.is_empty()
        || vouched
            .email
            .as_deref()
            .and_then(|email| email.rsplit_once('@'))
            .is_some_and(|(_, domain)| {
                settings
                    .allowed_domains
                    .iter()
                    .any(|allowed| allowed.eq_ignore_ascii_case(domain))
            });
    let group_ok = settings.allowed_groups.is_empty()
        || groups
            .iter()
            .any(|group| settings.allowed_groups.contains(group));
    if !(domain_ok && group_ok) {
        tracing::info!(
            domain_ok,
            group_ok,
            "SSO sign-in refused by the domain or group settings"
        );
        auth.refuse_unauthorized("sso", &vouched.subject).await?;
        return Err(SsoError::NotAuthorized);
    }
    Ok(settings.org_id.as_ref().map(|org_id| Placement {
        org_id: org_id.clone(),
        role: role_for(&groups, &settings.group_roles, settings.default_role),
    }))
}

/// The groups listed under `claim`: an array of strings, or one string.
fn groups(claims: &Value, claim: &str) -> Vec<String> {
    match claims.get(claim) {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        Some(Value::String(one)) => vec![one.clone()],
        _ => Vec::new(),
    }
}

/// The role of the first mapping whose group the user is in.
fn role_for(groups: &[String], mapping: &[(String, OrgRole)], default: OrgRole) -> OrgRole {
    mapping
        .iter()
        .find(|(group, _)| groups.contains(group))
        .map_or(default, |(_, role)| *role)
}
