//! The module dependencies point one way (ARCHITECTURE.md "Invariants"):
//! faces (`http`, `web`, `cli`) → services (`auth`, `debates`, `ops`, `runner`,
//! `agents`, `mail`, `views`, `push`) → adapters (`store`, `bus`, `projection`,
//! `crypto`, `config`, `clock`) → the domain crates. Only the composition
//! root (`app.rs`, `main.rs`) sees every layer. Checked on the sources'
//! `use` paths: cheap, and it fails the build's tests the day a cycle
//! comes back.

use std::path::{Path, PathBuf};

const SERVICES: [&str; 16] = [
    "auth", "debates", "ops", "runner", "agents", "mail", "views", "push", "webhooks", "review",
    "scm", "outside", "receipts", "audit", "backup", "sso",
];
const ADAPTERS: [&str; 8] = [
    "store",
    "bus",
    "projection",
    "crypto",
    "config",
    "clock",
    "request",
    "errors",
];

/// Every non-test source file under `src/`, as (path relative to `src/`, text).
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "tests") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs")
                && !path.to_string_lossy().ends_with("tests.rs")
            {
                out.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&root, &mut files);
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let relative = path.strip_prefix(&root).unwrap().to_string_lossy();
            (relative.replace('\\', "/"), text)
        })
        .collect()
}

/// The top-level module a file belongs to (`http/debates/read.rs` → `http`).
fn module_of(path: &str) -> &str {
    path.split('/')
        .next()
        .unwrap_or(path)
        .trim_end_matches(".rs")
}

/// The text before a file's `#[cfg(test)]` module: tests may reach further.
fn production(text: &str) -> &str {
    text.split("#[cfg(test)]").next().unwrap_or(text)
}

/// The top-level modules `text` names through `crate::`, including those
/// in a group (`crate::{http, projection}`).
fn named_modules(text: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut names = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => {
                let group = group.split('}').next().unwrap_or_default();
                names.extend(group.split(',').map(ident));
            }
            None => names.push(ident(rest)),
        }
    }
    names
}

/// Files of modules outside `allowed` (and outside `target` itself) that
/// name `crate::<target>`.
fn offenders(target: &str, allowed: &[&str]) -> Vec<String> {
    sources()
        .into_iter()
        .filter(|(path, _)| !allowed.contains(&module_of(path)) && module_of(path) != target)
        .filter(|(_, text)| named_modules(production(text)).iter().any(|m| m == target))
        .map(|(path, _)| path)
        .collect()
}

#[test]
fn only_the_composition_root_sees_the_faces() {
    for face in ["http", "cli", "web"] {
        let found = offenders(face, &["app", "main"]);
        assert!(found.is_empty(), "{found:?} depend on the {face} face");
    }
    let found = offenders("app", &["main", "cli"]);
    assert!(found.is_empty(), "{found:?} depend on the composition root");
}

#[test]
fn adapters_never_call_services() {
    for service in SERVICES {
        let mut allowed = SERVICES.to_vec();
        allowed.extend(["app", "main", "http", "cli", "web"]);
        let found = offenders(service, &allowed);
        assert!(
            found.is_empty(),
            "{found:?} depend on the {service} service"
        );
    }
    for adapter in ADAPTERS {
        assert!(
            sources().iter().any(|(path, _)| module_of(path) == adapter),
            "no module {adapter}: the layer list is out of date"
        );
    }
}

#[test]
fn the_check_sees_grouped_and_nested_paths() {
    let text = "use crate::{http, projection::x};\nuse crate::auth::Caller;\nfn f() { crate::clock::Clock::default(); }";
    assert_eq!(named_modules(text), ["http", "projection", "auth", "clock"]);
}

#[test]
fn only_the_http_face_speaks_http() {
    let found: Vec<String> = sources()
        .into_iter()
        .filter(|(path, _)| !["http", "web"].contains(&module_of(path)))
        .filter(|(_, text)| production(text).contains("axum::"))
        .map(|(path, _)| path)
        .collect();
    assert!(
        found.is_empty(),
        "{found:?} use axum outside the HTTP and web faces"
    );
}
