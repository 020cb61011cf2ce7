//! Reading a unified diff the way a source host's review API counts it:
//! each file's `position` is the number of lines below its first hunk
//! header (later hunk headers count as lines), so a comment anchored here
//! lands on the line the host shows.

use serde::{Deserialize, Serialize};

/// Where comments on one file go: its first added line (or, for a file
/// with only removals, its first changed line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anchor {
    pub path: String,
    pub position: u32,
}

/// One file of a diff being read.
#[derive(Default)]
struct File {
    path: Option<String>,
    old_path: Option<String>,
    /// Lines since the first hunk header; `None` before it.
    position: Option<u32>,
    added: Option<u32>,
    changed: Option<u32>,
}

impl File {
    fn anchor(self) -> Option<Anchor> {
        let path = self.path.or(self.old_path)?;
        let position = self.added.or(self.changed)?;
        Some(Anchor { path, position })
    }
}

/// The anchor of every file the diff changes, in diff order; binary files
/// and files without hunks have none.
pub fn anchors(diff: &str) -> Vec<Anchor> {
    let mut found = Vec::new();
    let mut file: Option<File> = None;
    for line in diff.lines() {
        if line.starts_with("diff --git ") {
            found.extend(file.take().and_then(File::anchor));
            file = Some(File::default());
            continue;
        }
        let current = file.get_or_insert_with(File::default);
        match current.position {
            None => {
                if let Some(path) = line.strip_prefix("+++ ") {
                    current.path = side_path(path, "b/");
                } else if let Some(path) = line.strip_prefix("--- ") {
                    current.old_path = side_path(path, "a/");
                } else if line.starts_with("@@") {
                    current.position = Some(0);
                }
            }
            Some(position) => {
                let position = position + 1;
                current.position = Some(position);
                if line.starts_with('+') && current.added.is_none() {
                    current.added = Some(position);
                }
                if line.starts_with('-') && current.changed.is_none() {
                    current.changed = Some(position);
                }
            }
        }
    }
    found.extend(file.and_then(File::anchor));
    found
}

/// The path of one side of a `---`/`+++` line; none for `/dev/null`.
fn side_path(text: &str, prefix: &str) -> Option<String> {
    let text = text.split('\t').next().unwrap_or(text).trim_end();
    if text == "/dev/null" {
        return None;
    }
    Some(text.strip_prefix(prefix).unwrap_or(text).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str = "diff --git a/src/lib.rs b/src/lib.rs
index 1..2 100644
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,3 +1,3 @@
 fn a() {}
-fn b() {}
+fn b() { todo() }
 fn c() {}
@@ -10,2 +10,3 @@
 x
+y
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-one
-two
diff --git a/logo.png b/logo.png
Binary files differ
";

    #[test]
    fn positions_count_from_the_first_hunk_header() {
        assert_eq!(
            anchors(DIFF),
            [
                Anchor {
                    path: "src/lib.rs".to_owned(),
                    position: 3
                },
                Anchor {
                    path: "old.txt".to_owned(),
                    position: 1
                },
            ]
        );
    }

    #[test]
    fn a_diff_without_git_headers_still_reads() {
        let plain = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n";
        assert_eq!(
            anchors(plain),
            [Anchor {
                path: "x.py".to_owned(),
                position: 2
            }]
        );
    }
}
