//! Globs of `filesystem.deny_read` / `deny_write`: `*` matches any run of
//! characters within one name (a leading dot included: a deny glob errs on
//! the side of protecting), `**` any number of whole directories
//! (`{CWD}/**/.env`). A glob is expanded by a bounded walk from its longest
//! literal prefix, when a view is built and by the background rescan, never
//! per call.

use std::path::{Component, Path, PathBuf};

/// At most this many directories are read per glob expansion: a glob over a
/// huge tree protects what was found within the budget (and says so).
pub(crate) const WALK_BUDGET: usize = 20_000;

/// One parsed glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Glob {
    /// The literal directory the walk starts from.
    base: PathBuf,
    /// The remaining components, each a name pattern or `**`.
    parts: Vec<String>,
}

impl Glob {
    /// Parses an absolute, expanded path; `None` when it holds no `*` (a
    /// plain path).
    pub(crate) fn parse(path: &Path) -> Option<Glob> {
        if !path.as_os_str().as_encoded_bytes().contains(&b'*') {
            return None;
        }
        let mut base = PathBuf::new();
        let mut parts = Vec::new();
        for c in path.components() {
            let s = c.as_os_str().to_string_lossy();
            if parts.is_empty() && !s.contains('*') && !matches!(c, Component::ParentDir) {
                base.push(c);
            } else {
                parts.push(s.into_owned());
            }
        }
        Some(Glob { base, parts })
    }

    /// The existing paths that match, sorted; `truncated` is set when the
    /// walk ran out of budget.
    pub(crate) fn expand(&self, truncated: &mut bool) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut budget = WALK_BUDGET;
        walk(&self.base, &self.parts, &mut out, &mut budget, truncated);
        out.sort();
        out.dedup();
        out
    }
}

fn walk(
    dir: &Path,
    parts: &[String],
    out: &mut Vec<PathBuf>,
    budget: &mut usize,
    truncated: &mut bool,
) {
    let Some((first, rest)) = parts.split_first() else {
        if std::fs::symlink_metadata(dir).is_ok() {
            out.push(dir.to_path_buf());
        }
        return;
    };
    if first == "**" {
        // Zero directories...
        walk(dir, rest, out, budget, truncated);
        // ... or one more, then `**` again.
        for sub in subdirs(dir, budget, truncated) {
            walk(&sub, parts, out, budget, truncated);
        }
        return;
    }
    if !first.contains('*') {
        walk(&dir.join(first), rest, out, budget, truncated);
        return;
    }
    for (name, path) in entries(dir, budget, truncated) {
        if name_matches(first, &name) {
            walk(&path, rest, out, budget, truncated);
        }
    }
}

/// The entries of `dir` (one unit of budget).
fn entries(dir: &Path, budget: &mut usize, truncated: &mut bool) -> Vec<(String, PathBuf)> {
    if *budget == 0 {
        *truncated = true;
        return Vec::new();
    }
    *budget -= 1;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect()
}

/// The subdirectories of `dir` (not symbolic links; `.git` internals skipped).
fn subdirs(dir: &Path, budget: &mut usize, truncated: &mut bool) -> Vec<PathBuf> {
    entries(dir, budget, truncated)
        .into_iter()
        .filter(|(name, path)| {
            name != ".git" && std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_dir())
        })
        .map(|(_, p)| p)
        .collect()
}

use super::name_matches;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_within_names_and_across_directories() {
        let t = tempfile::tempdir().unwrap();
        let r = std::fs::canonicalize(t.path()).unwrap();
        for f in ["a/.env", "a/b/c/.env", ".env", "a/x.env", "a/b/key.pem"] {
            let p = r.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "").unwrap();
        }
        let mut cut = false;
        let g = Glob::parse(&r.join("**/.env")).unwrap();
        assert_eq!(
            g.expand(&mut cut),
            vec![r.join(".env"), r.join("a/.env"), r.join("a/b/c/.env")]
        );
        // `*` matches a leading dot too: a deny glob errs on the side of protecting.
        let g = Glob::parse(&r.join("a/*.env")).unwrap();
        assert_eq!(
            g.expand(&mut cut),
            vec![r.join("a/.env"), r.join("a/x.env")]
        );
        let g = Glob::parse(&r.join("**/*.pem")).unwrap();
        assert_eq!(g.expand(&mut cut), vec![r.join("a/b/key.pem")]);
        assert!(!cut);
        assert!(Glob::parse(&r.join("plain")).is_none());
        assert!(name_matches("ssh_host_*_key", "ssh_host_rsa_key"));
        assert!(!name_matches("ssh_host_*_key", "ssh_host_rsa_key.pub"));
    }
}
