//! Each spec area registers a handler once, at its unversioned path, with a
//! [`RouteSpec`]; [`Routes`] mounts it at every path the versioning rules
//! call for (`/api/x`, `/api/v1/x`, `/api/v2/x` or its §9.2 rename, and any
//! deprecated alias) and remembers each mount, so the middleware knows a
//! request's route, limits and successor, and the OpenAPI document lists
//! exactly what is served.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use utoipa::openapi::path::Paths;
use utoipa::openapi::{RefOr, schema::Schema};
use utoipa_axum::router::UtoipaMethodRouter;

use super::ratelimit::{Action, PathLimit};
use super::state::ApiState;
use crate::auth::rbac::Permission;

/// Schemas the handlers' annotations name, by name.
pub type Schemas = Vec<(String, RefOr<Schema>)>;

/// How one handler is mounted and limited.
#[derive(Debug, Clone)]
pub struct RouteSpec {
    access: Access,
    v2_path: Option<&'static str>,
    versioned: bool,
    limit: Option<PathLimit>,
    action: Action,
    also_at: Vec<&'static str>,
    /// Deprecated paths and the successor each names (the route's own path when none).
    aliases: Vec<(&'static str, Option<&'static str>)>,
    enveloped: bool,
    oauth_under_v2: bool,
}

impl Default for RouteSpec {
    fn default() -> Self {
        Self {
            access: Access::Authenticated,
            v2_path: None,
            versioned: true,
            limit: None,
            action: Action::Default,
            also_at: Vec::new(),
            aliases: Vec::new(),
            enveloped: true,
            oauth_under_v2: false,
        }
    }
}

impl RouteSpec {
    /// Mounted at `/api/x`, `/api/v1/x` and `/api/v2/x`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only at the given path and `also_at` paths: no versions, no envelope
    /// (documents, assets, the Prometheus text).
    pub fn unversioned() -> Self {
        Self {
            versioned: false,
            enveloped: false,
            ..Self::default()
        }
    }

    /// The v2 path when §9.2 renames it.
    /// Open to anyone: no credential needed (one that is sent is still read).
    pub fn public(mut self) -> Self {
        self.access = Access::Public;
        self
    }

    /// Only callers holding `permission`.
    pub fn requires(mut self, permission: Permission) -> Self {
        self.access = Access::Permission(permission);
        self
    }

    /// Under v2, an OAuth 2.0 access token (a session's) and never an API
    /// key: organization, user and webhook management (§9 rule 5).
    pub fn oauth_under_v2(mut self) -> Self {
        self.oauth_under_v2 = true;
        self
    }

    pub fn v2_at(mut self, path: &'static str) -> Self {
        self.v2_path = Some(path);
        self
    }

    /// Another path serving the same handler at the same version rules.
    pub fn also_at(mut self, path: &'static str) -> Self {
        self.also_at.push(path);
        self
    }

    /// A deprecated path whose successor is the unversioned path.
    pub fn deprecated_alias(mut self, path: &'static str) -> Self {
        self.aliases.push((path, None));
        self
    }

    /// A deprecated path whose named successor is `successor` (§9 names some).
    pub fn deprecated_alias_to(mut self, path: &'static str, successor: &'static str) -> Self {
        self.aliases.push((path, Some(successor)));
        self
    }

    pub fn limit(mut self, limit: PathLimit) -> Self {
        self.limit = Some(limit);
        self
    }

    pub fn action(mut self, action: Action) -> Self {
        self.action = action;
        self
    }

    /// Under v2, send the body as it is instead of in the envelope.
    pub fn raw(mut self) -> Self {
        self.enveloped = false;
        self
    }
}

/// Which family of paths a mount belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountKind {
    /// `/api/x`: v1 unless the request asks for v2.
    Legacy,
    V1,
    V2,
    /// A deprecated path scheduled for removal.
    Alias,
}

/// One path a handler is served at.
#[derive(Debug, Clone)]
pub struct Mount {
    pub path: String,
    pub access: Access,
    /// The path the handler was registered at (documented once there).
    pub canonical: String,
    pub kind: MountKind,
    pub versioned: bool,
    pub enveloped: bool,
    /// Where a deprecated request should go instead (a path template).
    pub successor: Option<String>,
    pub limit: Option<PathLimit>,
    pub action: Action,
    /// The HTTP methods (lowercase) this mount's handler serves; another
    /// handler may serve other methods at the same path.
    pub methods: Vec<&'static str>,
    /// Refuses API keys when the request is served as v2 (§9 rule 5).
    pub oauth_under_v2: bool,
}

impl Mount {
    /// The successor with this request's path parameters filled in.
    pub fn successor_for(&self, actual: &str) -> Option<String> {
        let successor = self.successor.as_deref()?;
        let values: HashMap<&str, &str> = self
            .path
            .split('/')
            .zip(actual.split('/'))
            .filter_map(|(template, value)| {
                let name = template.strip_prefix('{')?.strip_suffix('}')?;
                Some((name.trim_start_matches('*'), value))
            })
            .collect();
        let filled = successor
            .split('/')
            .map(|segment| {
                segment
                    .strip_prefix('{')
                    .and_then(|s| s.strip_suffix('}'))
                    .and_then(|name| values.get(name.trim_start_matches('*')).copied())
                    .unwrap_or(segment)
            })
            .collect::<Vec<_>>();
        Some(filled.join("/"))
    }
}

/// Who may call a route. Every route needs a credential unless it says
/// otherwise, so a new route cannot be left open by accident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Public,
    Authenticated,
    Permission(Permission),
}

/// HTTP methods as OpenAPI names them.
pub const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Every mount, by path template.
#[derive(Debug, Default)]
pub struct RouteTable {
    mounts: Vec<Arc<Mount>>,
    by_path: HashMap<String, Vec<Arc<Mount>>>,
}

impl RouteTable {
    /// The mount serving `method` at `path` (any mount of the path when
    /// none serves the method: it answers 405 the same way).
    pub fn get(&self, path: &str, method: &axum::http::Method) -> Option<&Arc<Mount>> {
        let mounts = self.by_path.get(path)?;
        let wanted = method.as_str().to_ascii_lowercase();
        mounts
            .iter()
            .find(|m| m.methods.contains(&wanted.as_str()))
            .or_else(|| mounts.first())
    }

    pub fn mounts(&self) -> &[Arc<Mount>] {
        &self.mounts
    }
}

/// A router under construction with its mounts and documentation.
pub struct Routes {
    router: Router<ApiState>,
    paths: Paths,
    schemas: Schemas,
    mounts: Vec<Mount>,
}

impl Default for Routes {
    fn default() -> Self {
        Self::new()
    }
}

impl Routes {
    pub fn new() -> Self {
        Self {
            router: Router::new(),
            paths: Paths::new(),
            schemas: Vec::new(),
            mounts: Vec::new(),
        }
    }

    /// Registers handlers made by `utoipa_axum::routes!` (one path each).
    pub fn add(mut self, routes: UtoipaMethodRouter<ApiState>, spec: RouteSpec) -> Self {
        let (schemas, paths, method_router) = routes;
        for (canonical, item) in &paths.paths {
            let item = serde_json::to_value(item).unwrap_or_default();
            let methods: Vec<&'static str> = METHODS
                .into_iter()
                .filter(|m| item.get(*m).is_some())
                .collect();
            for mount in mounts_for(canonical, &spec, &methods) {
                self.router = self.router.route(&mount.path, method_router.clone());
                self.mounts.push(mount);
            }
        }
        self.paths.merge(paths);
        self.schemas.extend(schemas);
        self
    }

    pub fn merge(mut self, other: Routes) -> Self {
        self.router = self.router.merge(other.router);
        self.paths.merge(other.paths);
        self.schemas.extend(other.schemas);
        self.mounts.extend(other.mounts);
        self
    }

    pub fn into_parts(self) -> (Router<ApiState>, RouteTable, Paths, Schemas) {
        let mut table = RouteTable::default();
        for mount in self.mounts {
            let mount = Arc::new(mount);
            table
                .by_path
                .entry(mount.path.clone())
                .or_default()
                .push(mount.clone());
            table.mounts.push(mount);
        }
        (self.router, table, self.paths, self.schemas)
    }
}

fn mounts_for(canonical: &str, spec: &RouteSpec, methods: &[&'static str]) -> Vec<Mount> {
    let mount = |path: String, kind: MountKind, successor: Option<String>| Mount {
        path,
        access: spec.access,
        canonical: canonical.to_owned(),
        kind,
        versioned: spec.versioned,
        enveloped: spec.enveloped,
        successor,
        limit: spec.limit,
        action: spec.action,
        methods: methods.to_vec(),
        oauth_under_v2: spec.oauth_under_v2 && spec.versioned,
    };
    let mut mounts = Vec::new();
    if !spec.versioned {
        mounts.push(mount(canonical.to_owned(), MountKind::Legacy, None));
        for extra in &spec.also_at {
            mounts.push(mount((*extra).to_owned(), MountKind::Legacy, None));
        }
        return mounts;
    }
    if canonical.starts_with("/api/v2/") {
        mounts.push(mount(canonical.to_owned(), MountKind::V2, None));
        return mounts;
    }
    let rest = canonical
        .strip_prefix("/api/v1/")
        .or_else(|| canonical.strip_prefix("/api/"))
        .unwrap_or(canonical.trim_start_matches('/'));
    let v2 = spec
        .v2_path
        .map_or_else(|| format!("/api/v2/{rest}"), str::to_owned);
    if !canonical.starts_with("/api/v1/") {
        mounts.push(mount(
            canonical.to_owned(),
            MountKind::Legacy,
            Some(v2.clone()),
        ));
        for extra in &spec.also_at {
            mounts.push(mount(
                (*extra).to_owned(),
                MountKind::Legacy,
                Some(v2.clone()),
            ));
        }
    }
    mounts.push(mount(
        format!("/api/v1/{rest}"),
        MountKind::V1,
        Some(v2.clone()),
    ));
    // Other paths follow the same rules: each has its v1 path too.
    for extra in spec.also_at.iter().filter_map(|p| p.strip_prefix("/api/")) {
        if !extra.starts_with("v1/") && !extra.starts_with("v2/") {
            mounts.push(mount(
                format!("/api/v1/{extra}"),
                MountKind::V1,
                Some(v2.clone()),
            ));
        }
    }
    for (alias, successor) in &spec.aliases {
        mounts.push(mount(
            (*alias).to_owned(),
            MountKind::Alias,
            Some(successor.unwrap_or(canonical).to_owned()),
        ));
    }
    mounts.push(mount(v2, MountKind::V2, None));
    mounts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renamed_route_is_mounted_at_every_version() {
        let spec = RouteSpec::new().v2_at("/api/v2/system/health");
        let paths: Vec<_> = mounts_for("/api/health", &spec, &["get"])
            .into_iter()
            .map(|m| (m.path, m.kind, m.successor))
            .collect();
        let v2 = Some("/api/v2/system/health".to_owned());
        assert_eq!(
            paths,
            [
                ("/api/health".to_owned(), MountKind::Legacy, v2.clone()),
                ("/api/v1/health".to_owned(), MountKind::V1, v2.clone()),
                ("/api/v2/system/health".to_owned(), MountKind::V2, None),
            ]
        );
    }

    #[test]
    fn successors_carry_the_path_parameters() {
        let spec = RouteSpec::new().v2_at("/api/v2/debates/{id}");
        let mounts = mounts_for("/api/debate/{id}", &spec, &["get"]);
        assert_eq!(
            mounts[1].successor_for("/api/v1/debate/d-42").as_deref(),
            Some("/api/v2/debates/d-42")
        );
    }
}
