//! What the guard watches and acts on: gathered from the filesystem views
//! (their writable binds, missing protected paths, Git directories and
//! writable homes) each time they are built or brought up to date.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The places the guard watches, and what a tool must not leave there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Targets {
    /// The workspace (`--cwd`, canonical): the scope of Git checks.
    pub(crate) workspace: PathBuf,
    /// The writable binds of the views (host paths), copy-on-write caches
    /// excepted: only what happens beneath one is acted on.
    pub(crate) writable: Vec<PathBuf>,
    /// Protected paths that do not exist yet in a writable bind: a tool's
    /// creation of one, or of a directory on the way to one, is moved to
    /// quarantine.
    pub(crate) creatable: BTreeSet<PathBuf>,
    /// `$HOME` where a rule makes it writable: a new entry at its top level
    /// whose name starts with a dot is moved to quarantine.
    pub(crate) homes: Vec<PathBuf>,
    /// Paths a rule names: granted as written, never moved.
    pub(crate) named: BTreeSet<PathBuf>,
    /// The Git directories the views know of.
    pub(crate) git_dirs: Vec<PathBuf>,
    /// The server's own directories (its state, the cache layers): never
    /// acted on.
    pub(crate) ignored: Vec<PathBuf>,
}

impl Targets {
    /// Whether `p` lies beneath a writable bind and outside the server's
    /// own directories.
    pub(crate) fn in_scope(&self, p: &Path) -> bool {
        self.writable.iter().any(|w| p.starts_with(w))
            && !self.ignored.iter().any(|i| p.starts_with(i))
    }

    /// Why a tool's new entry `p` must not stay, if it must not: it is a
    /// missing protected path, a directory on the way to one, or a new dot
    /// entry at the top of a writable home.
    pub(crate) fn forbidden(&self, p: &Path) -> Option<&'static str> {
        if self.named.contains(p) {
            return None;
        }
        if self.creatable.contains(p) {
            return Some("a path the sandbox protects (it did not exist: tools may not create it)");
        }
        if self
            .creatable
            .range(p.to_path_buf()..)
            .next()
            .is_some_and(|c| c.starts_with(p))
        {
            return Some("a directory on the way to a path the sandbox protects");
        }
        let dot = p
            .file_name()
            .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."));
        if dot
            && p.parent()
                .is_some_and(|d| self.homes.iter().any(|h| h == d))
        {
            return Some("a new entry at the top of a writable $HOME whose name starts with a dot (the human's programs read their configuration there)");
        }
        None
    }

    /// The union of `self` and `other` (several views).
    pub(crate) fn merge(&mut self, other: Targets) {
        self.writable.extend(other.writable);
        self.creatable.extend(other.creatable);
        self.homes.extend(other.homes);
        self.named.extend(other.named);
        self.git_dirs.extend(other.git_dirs);
        self.ignored.extend(other.ignored);
        if self.workspace.as_os_str().is_empty() {
            self.workspace = other.workspace;
        }
        for v in [
            &mut self.writable,
            &mut self.homes,
            &mut self.git_dirs,
            &mut self.ignored,
        ] {
            v.sort();
            v.dedup();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creatable_paths_their_ancestors_and_new_dot_entries_of_a_home_are_forbidden() {
        let t = Targets {
            workspace: "/w".into(),
            writable: vec!["/w".into(), "/h".into()],
            creatable: ["/w/.claude", "/h/.config/gh"]
                .iter()
                .map(PathBuf::from)
                .collect(),
            homes: vec!["/h".into()],
            named: ["/h/.tool"].iter().map(PathBuf::from).collect(),
            git_dirs: Vec::new(),
            ignored: vec!["/h/.cache/toolsrv".into()],
        };
        assert!(t.forbidden(Path::new("/w/.claude")).is_some());
        assert!(t.forbidden(Path::new("/h/.config")).is_some());
        assert!(t.forbidden(Path::new("/h/.config/gh")).is_some());
        assert!(t.forbidden(Path::new("/h/.bashrc2")).is_some());
        assert!(t.forbidden(Path::new("/h/.tool")).is_none());
        assert!(t.forbidden(Path::new("/h/notes")).is_none());
        assert!(t.forbidden(Path::new("/w/.claudex")).is_none());
        assert!(t.forbidden(Path::new("/w/src/.hidden")).is_none());
        assert!(t.in_scope(Path::new("/w/a")) && !t.in_scope(Path::new("/x")));
        assert!(!t.in_scope(Path::new("/h/.cache/toolsrv/layers")));
    }
}
