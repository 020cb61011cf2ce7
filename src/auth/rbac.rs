//! Role-based access control (§5.5): which roles hold which permissions,
//! kept as data, and the one check every protected route goes through.

use std::time::Instant;

use serde::Serialize;

/// A permission a route can require.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, utoipa::ToSchema)]
pub enum Permission {
    #[serde(rename = "workflows.read")]
    WorkflowsRead,
    #[serde(rename = "workflows.create")]
    WorkflowsCreate,
    #[serde(rename = "workflows.update")]
    WorkflowsUpdate,
    #[serde(rename = "workflows.delete")]
    WorkflowsDelete,
    #[serde(rename = "workflows.execute")]
    WorkflowsExecute,
    #[serde(rename = "workflows.approve")]
    WorkflowsApprove,
    #[serde(rename = "feedback.write")]
    FeedbackWrite,
    #[serde(rename = "feedback.update")]
    FeedbackUpdate,
    #[serde(rename = "feedback.read")]
    FeedbackRead,
    /// The admin console and every admin-only endpoint (§5.2 rule 6).
    #[serde(rename = "admin")]
    Admin,
}

impl Permission {
    pub const ALL: [Permission; 10] = [
        Permission::WorkflowsRead,
        Permission::WorkflowsCreate,
        Permission::WorkflowsUpdate,
        Permission::WorkflowsDelete,
        Permission::WorkflowsExecute,
        Permission::WorkflowsApprove,
        Permission::FeedbackWrite,
        Permission::FeedbackUpdate,
        Permission::FeedbackRead,
        Permission::Admin,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Permission::WorkflowsRead => "workflows.read",
            Permission::WorkflowsCreate => "workflows.create",
            Permission::WorkflowsUpdate => "workflows.update",
            Permission::WorkflowsDelete => "workflows.delete",
            Permission::WorkflowsExecute => "workflows.execute",
            Permission::WorkflowsApprove => "workflows.approve",
            Permission::FeedbackWrite => "feedback.write",
            Permission::FeedbackUpdate => "feedback.update",
            Permission::FeedbackRead => "feedback.read",
            Permission::Admin => "admin",
        }
    }
}

use Permission as P;

/// What a member may do: read, write and run workflows, give feedback.
const MEMBER: &[Permission] = &[
    P::WorkflowsRead,
    P::WorkflowsCreate,
    P::WorkflowsUpdate,
    P::WorkflowsDelete,
    P::WorkflowsExecute,
    P::FeedbackWrite,
    P::FeedbackRead,
];

/// An organization's owners and admins also approve workflow steps.
const ORG_ADMIN: &[Permission] = &[
    P::WorkflowsRead,
    P::WorkflowsCreate,
    P::WorkflowsUpdate,
    P::WorkflowsDelete,
    P::WorkflowsExecute,
    P::WorkflowsApprove,
    P::FeedbackWrite,
    P::FeedbackRead,
];

const VIEWER: &[Permission] = &[P::WorkflowsRead, P::FeedbackWrite, P::FeedbackRead];

/// Role → permissions. `admin` and `user` are the platform roles of tokens;
/// `owner`, `member` and `viewer` are organization roles (an organization
/// `admin` is the platform `admin`'s namesake only in name: see
/// [`ORG_ROLE_PREFIX`]).
pub const ROLE_PERMISSIONS: &[(&str, &[Permission])] = &[
    ("admin", &Permission::ALL),
    ("user", MEMBER),
    ("org:owner", ORG_ADMIN),
    ("org:admin", ORG_ADMIN),
    ("org:member", MEMBER),
    ("org:viewer", VIEWER),
];

/// Organization roles are looked up under this prefix, so that an
/// organization admin is not a platform admin.
pub const ORG_ROLE_PREFIX: &str = "org:";

/// Whether any of `roles` holds `permission`. Counts every check and every
/// refusal, and times the check.
pub fn allows<'a>(roles: impl IntoIterator<Item = &'a str>, permission: Permission) -> bool {
    let started = Instant::now();
    let allowed = roles.into_iter().any(|role| {
        ROLE_PERMISSIONS
            .iter()
            .any(|(name, granted)| *name == role && granted.contains(&permission))
    });
    let label = [("permission", permission.name())];
    metrics::counter!("service_rbac_permission_checks_total", &label).increment(1);
    if !allowed {
        metrics::counter!("service_rbac_permission_denied_total", &label).increment(1);
    }
    metrics::histogram!("service_rbac_check_latency_seconds")
        .record(started.elapsed().as_secs_f64());
    allowed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admins_hold_every_permission() {
        for permission in Permission::ALL {
            assert!(allows(["admin"], permission), "{permission:?}");
        }
    }

    #[test]
    fn users_work_with_workflows_but_are_not_admins() {
        assert!(allows(["user"], P::WorkflowsCreate));
        assert!(!allows(["user"], P::WorkflowsApprove));
        assert!(!allows(["user"], P::FeedbackUpdate));
        assert!(!allows(["user"], P::Admin));
    }

    #[test]
    fn organization_roles_grade_their_permissions() {
        assert!(allows(["org:owner"], P::WorkflowsApprove));
        assert!(!allows(["org:admin"], P::Admin));
        assert!(allows(["org:viewer"], P::WorkflowsRead));
        assert!(!allows(["org:viewer"], P::WorkflowsCreate));
        assert!(!allows(["stranger"], P::WorkflowsRead));
        assert!(!allows(Vec::<&str>::new(), P::FeedbackRead));
    }

    #[test]
    fn every_permission_is_granted_to_some_role_other_than_admin_or_is_admin() {
        for permission in Permission::ALL {
            let holders = ROLE_PERMISSIONS
                .iter()
                .filter(|(role, granted)| *role != "admin" && granted.contains(&permission))
                .count();
            assert!(
                holders > 0 || matches!(permission, P::Admin | P::FeedbackUpdate),
                "{permission:?} is granted to no role"
            );
        }
    }
}
