//! Who is calling: the principal every protected handler receives.

use agon_aggregates::account::Role;
use agon_aggregates::ids::{OrgId, SessionId, UserId};
use serde::{Deserialize, Serialize};

use super::rbac::{self, ORG_ROLE_PREFIX, Permission};

/// How the caller proved who it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Credential {
    /// An access token of session `session_id`.
    Session { session_id: SessionId },
    /// The user's API key.
    ApiKey { key_id: String },
    /// `SERVICE_API_TOKEN`.
    StaticToken,
    /// `X-User-*` headers from a trusted network.
    ServiceHeaders,
}

/// An authenticated caller.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Caller {
    pub user_id: UserId,
    pub email: Option<String>,
    pub role: Role,
    pub org_id: Option<OrgId>,
    pub org_role: Option<String>,
    /// Extra roles asserted by a trusted service (`X-User-Roles`).
    pub service_roles: Vec<String>,
    pub credential: Credential,
}

/// The user id of the static API token.
pub const STATIC_TOKEN_USER: &str = "service-api-token";

impl Caller {
    /// The roles RBAC sees: the organization role when the user has one
    /// (so that a viewer stays a viewer), else `user`; plus `admin`.
    pub fn roles(&self) -> Vec<String> {
        let mut roles = Vec::new();
        match &self.org_role {
            Some(org_role) => roles.push(format!("{ORG_ROLE_PREFIX}{org_role}")),
            None if self.service_roles.is_empty() => roles.push("user".to_owned()),
            None => {}
        }
        if self.role == Role::Admin {
            roles.push("admin".to_owned());
        }
        for role in &self.service_roles {
            roles.push(match role.as_str() {
                "admin" | "user" => role.clone(),
                other => format!("{ORG_ROLE_PREFIX}{other}"),
            });
        }
        roles
    }

    pub fn can(&self, permission: Permission) -> bool {
        let roles = self.roles();
        rbac::allows(roles.iter().map(String::as_str), permission)
    }

    pub fn is_admin(&self) -> bool {
        self.can(Permission::Admin)
    }

    /// The session behind the call, when it came with an access token.
    pub fn session_id(&self) -> Option<&str> {
        match &self.credential {
            Credential::Session { session_id } => Some(session_id),
            _ => None,
        }
    }
}
