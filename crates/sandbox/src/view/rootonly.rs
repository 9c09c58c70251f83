//! Root-only files under read rules (CONTRACT §13): on a server running as
//! root, a file only root may read (owned by root, no read bit for others)
//! that lies under an `ro` or `rox` rule is hidden unless a rule names it.
//! Found by a bounded walk of the read rules when a view is built (not by
//! the once-a-second rescan): `ro` rules first, then `rox`.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::plan::RulePaths;
use super::protected::{Entry, Kind, Shape};
use crate::open::FileId;

/// At most this many entries are looked at per view build.
pub const SCAN_BUDGET: usize = 20_000;

/// The root-only files and directories under `rules.readable` (outside
/// every writable rule), as hidden entries; `true` when the walk stopped at
/// its budget.
pub fn root_only(rules: &RulePaths) -> (Vec<Entry>, bool) {
    let mut out = Vec::new();
    let mut budget = SCAN_BUDGET;
    let mut truncated = false;
    for root in &rules.readable {
        if rules.writable.iter().any(|w| root.starts_with(w)) {
            continue;
        }
        if let Ok(m) = std::fs::symlink_metadata(root) {
            walk(root, &m, rules, &mut out, &mut budget, &mut truncated);
        }
    }
    out.sort();
    out.dedup();
    (out, truncated)
}

/// Whether only root may read a file with this metadata.
fn only_root(m: &std::fs::Metadata) -> bool {
    m.uid() == 0 && m.mode() & 0o004 == 0
}

/// Walks `path` (whose metadata, not following a link, is `m`).
fn walk(
    path: &Path,
    m: &std::fs::Metadata,
    rules: &RulePaths,
    out: &mut Vec<Entry>,
    budget: &mut usize,
    truncated: &mut bool,
) {
    if *budget == 0 {
        *truncated = true;
        return;
    }
    *budget -= 1;
    if m.file_type().is_symlink() || rules.writable.iter().any(|w| path.starts_with(w)) {
        return;
    }
    let named = rules.readable.iter().any(|r| r == path);
    if only_root(m) && !named {
        out.push(Entry {
            path: path.to_path_buf(),
            kind: Kind::Hidden,
            shape: if m.is_dir() { Shape::Dir } else { Shape::File },
            id: Some(FileId {
                dev: m.dev(),
                ino: m.ino(),
            }),
        });
        return;
    }
    if !m.is_dir() {
        return;
    }
    let Ok(rd) = std::fs::read_dir(path) else {
        return;
    };
    // Each child's metadata is taken relative to the open directory (one
    // `statx` of a name, not of a whole path).
    let mut children: Vec<(PathBuf, std::fs::Metadata)> = rd
        .flatten()
        .filter_map(|e| Some((e.path(), e.metadata().ok()?)))
        .collect();
    children.sort_by(|a, b| a.0.cmp(&b.0));
    for (c, cm) in children {
        // Other file systems mounted below (/proc, /sys) are not walked.
        if cm.dev() != m.dev() {
            continue;
        }
        walk(&c, &cm, rules, out, budget, truncated);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn root_only_files_under_read_rules_are_found() {
        if toolsrv_base::effective_uid() != 0 {
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let r = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(r.join("etc/private")).unwrap();
        std::fs::write(r.join("etc/key"), "k").unwrap();
        std::fs::write(r.join("etc/open"), "o").unwrap();
        std::fs::set_permissions(r.join("etc/key"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        std::fs::set_permissions(
            r.join("etc/private"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        std::fs::create_dir(r.join("rw")).unwrap();
        std::fs::write(r.join("rw/mine"), "m").unwrap();
        std::fs::set_permissions(r.join("rw/mine"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        let rules = RulePaths {
            writable: vec![r.join("rw")],
            readable: vec![r.clone()],
            links: Vec::new(),
            cow: Vec::new(),
        };
        let (found, cut) = root_only(&rules);
        let paths: Vec<_> = found.iter().map(|e| e.path.clone()).collect();
        assert_eq!(paths, vec![r.join("etc/key"), r.join("etc/private")]);
        assert!(!cut);
    }
}
