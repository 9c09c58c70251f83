//! The mount plan of a view: from the protected set and the policy's rule
//! paths to the list of mounts to make, in order, and the placeholders to
//! create first (docs/sandbox-policy.md, "The filesystem view").

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::protected::{Entry, Kind, ProtectedSet, Shape};

/// The rule paths of a policy, resolved with `{CWD}` as the workspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RulePaths {
    /// `rw` and `rwx` paths (canonical, existing).
    pub writable: Vec<PathBuf>,
    /// `ro` and `rox` paths.
    pub readable: Vec<PathBuf>,
}

impl RulePaths {
    fn names(&self, p: &Path) -> bool {
        self.writable.iter().chain(&self.readable).any(|r| r == p)
    }

    fn writable_root_of(&self, p: &Path) -> Option<&PathBuf> {
        self.writable
            .iter()
            .filter(|w| p.starts_with(w))
            .max_by_key(|w| w.components().count())
    }
}

/// A rule path inside a hidden directory, shown through the mask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hole {
    /// Its path.
    pub path: PathBuf,
    /// Whether it is a directory.
    pub dir: bool,
    /// Whether its rule is writable (else it is bound read-only).
    pub writable: bool,
}

/// One mount over a protected path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cover {
    /// An empty read-only tmpfs over a directory, with holes for rules
    /// that name something inside it.
    HideDir(PathBuf, Vec<Hole>),
    /// An empty read-only file over a file or socket.
    HideFile(PathBuf),
    /// The path bound read-only over itself.
    ReadOnly(PathBuf),
}

impl Cover {
    /// The path covered.
    pub fn path(&self) -> &Path {
        match self {
            Cover::HideDir(p, _) | Cover::HideFile(p) | Cover::ReadOnly(p) => p,
        }
    }
}

/// A placeholder to create on the host before the view is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placeholder {
    /// An empty directory, mode 0700.
    Dir(PathBuf),
    /// An empty file, mode 0600.
    File(PathBuf),
}

/// Everything a view build does, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The workspace (`--cwd`): opened inside the view.
    pub workspace: PathBuf,
    /// Writable rule roots, outermost first: cloned before everything is
    /// made read-only, and attached again.
    pub writable: Vec<PathBuf>,
    /// Directories between a writable root and a protected path, bound
    /// onto themselves (outermost first), so that renaming one fails
    /// (`EBUSY`) and no protected path can be moved away.
    pub pins: Vec<PathBuf>,
    /// The protections, outermost first.
    pub covers: Vec<Cover>,
    /// Placeholders created before the build.
    pub placeholders: Vec<Placeholder>,
    /// Missing protected paths a tool can still create (logged; the
    /// rescan protects them once they exist).
    pub creatable: Vec<PathBuf>,
}

impl Plan {
    /// The plan for `set` under `rules`, with the view's working directory
    /// `workspace`.
    pub fn new(set: &ProtectedSet, rules: &RulePaths, workspace: &Path) -> Plan {
        let mut writable = rules.writable.clone();
        writable.sort_by_key(|p| p.components().count());
        writable.dedup();
        let mut plan = Plan {
            workspace: workspace.to_path_buf(),
            writable,
            ..Plan::default()
        };
        for e in &set.entries {
            plan.add(e, rules);
        }
        plan.covers.sort_by_key(|c| c.path().components().count());
        // A cover inside a hidden directory is hidden with it.
        // (A set of the hidden directories, looked up by each cover's
        // ancestors: a root server's view covers thousands of root-only
        // files, and comparing every cover with every hidden directory took
        // a fifth of a second.)
        let hidden: HashSet<PathBuf> = plan
            .covers
            .iter()
            .filter_map(|c| match c {
                Cover::HideDir(p, _) => Some(p.clone()),
                _ => None,
            })
            .collect();
        plan.covers
            .retain(|c| !c.path().ancestors().skip(1).any(|a| hidden.contains(a)));
        let mut pins = Vec::new();
        for c in &plan.covers {
            let p = c.path();
            for w in plan.writable.iter().filter(|w| p.starts_with(w)) {
                let mut d = p.parent();
                while let Some(dir) = d {
                    if dir == w.as_path() || !dir.starts_with(w) {
                        break;
                    }
                    pins.push(dir.to_path_buf());
                    d = dir.parent();
                }
            }
        }
        pins.sort_by_key(|p| (p.components().count(), p.clone()));
        pins.dedup();
        plan.pins = pins;
        plan
    }

    fn add(&mut self, e: &Entry, rules: &RulePaths) {
        let p = &e.path;
        if rules.names(p) {
            // Named by a rule: granted as written.
            return;
        }
        if e.id.is_none() {
            self.missing(e, rules);
            return;
        }
        match (e.kind, e.shape) {
            (Kind::Hidden, Shape::Dir) => {
                let holes = rules
                    .writable
                    .iter()
                    .map(|r| (r, true))
                    .chain(rules.readable.iter().map(|r| (r, false)))
                    .filter(|(r, _)| r.starts_with(p) && *r != p)
                    .map(|(r, writable)| Hole {
                        path: r.clone(),
                        dir: r.is_dir(),
                        writable,
                    })
                    .collect();
                self.covers.push(Cover::HideDir(p.clone(), holes));
            }
            (Kind::Hidden, _) => self.covers.push(Cover::HideFile(p.clone())),
            (Kind::ReadOnly, _) => {
                // Outside every writable rule it is read-only already.
                if rules.writable_root_of(p).is_some() {
                    self.covers.push(Cover::ReadOnly(p.clone()));
                }
            }
        }
    }

    /// A protected path that does not exist: nothing to do unless a tool
    /// could create it (its nearest existing ancestor lies in a writable
    /// rule); then a placeholder where an empty one reads like none (a
    /// directory, a neutral file), else the nearest existing ancestor
    /// read-only unless it is a writable rule's own root, else logged as
    /// creatable.
    fn missing(&mut self, e: &Entry, rules: &RulePaths) {
        let p = &e.path;
        let Some(existing) = p.ancestors().skip(1).find(|a| a.exists()) else {
            return;
        };
        let Some(root) = rules.writable_root_of(existing) else {
            return;
        };
        let kind_shape = (e.kind, e.shape);
        match kind_shape.1 {
            Shape::Dir => {
                self.placeholders.push(Placeholder::Dir(p.clone()));
                let cover = match e.kind {
                    Kind::Hidden => Cover::HideDir(p.clone(), Vec::new()),
                    Kind::ReadOnly => Cover::ReadOnly(p.clone()),
                };
                self.covers.push(cover);
            }
            Shape::NeutralFile => {
                self.placeholders.push(Placeholder::File(p.clone()));
                let cover = match e.kind {
                    Kind::Hidden => Cover::HideFile(p.clone()),
                    Kind::ReadOnly => Cover::ReadOnly(p.clone()),
                };
                self.covers.push(cover);
            }
            Shape::File if existing != root.as_path() => {
                self.covers.push(Cover::ReadOnly(existing.to_path_buf()));
            }
            Shape::File => {
                // Directly in the rule's root: an empty directory for the
                // first missing directory on the way, bound read-only; a
                // file right in the root stays creatable.
                let first = p
                    .strip_prefix(existing)
                    .ok()
                    .and_then(|rest| rest.components().next())
                    .map(|c| existing.join(c));
                match first {
                    Some(dir) if dir != *p => {
                        self.placeholders.push(Placeholder::Dir(dir.clone()));
                        self.covers.push(Cover::ReadOnly(dir));
                    }
                    _ => self.creatable.push(p.clone()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::open::FileId;

    fn entry(p: &str, kind: Kind, shape: Shape, exists: bool) -> Entry {
        Entry {
            path: PathBuf::from(p),
            kind,
            shape,
            id: exists.then_some(FileId { dev: 1, ino: 1 }),
        }
    }

    #[test]
    fn covers_pins_and_named_paths() {
        let set = ProtectedSet {
            entries: vec![
                entry("/w/.git/hooks", Kind::ReadOnly, Shape::Dir, true),
                entry("/w/.git/config", Kind::ReadOnly, Shape::File, true),
                entry("/w/sock", Kind::Hidden, Shape::File, true),
                entry("/h/.ssh", Kind::Hidden, Shape::Dir, true),
                entry("/h/.aws", Kind::Hidden, Shape::Dir, true),
                entry("/etc/ro-outside", Kind::ReadOnly, Shape::File, true),
            ],
            truncated: false,
            incomplete: false,
        };
        let rules = RulePaths {
            writable: vec![PathBuf::from("/w"), PathBuf::from("/h/.aws")],
            readable: vec![PathBuf::from("/h/.ssh/known_hosts")],
        };
        let plan = Plan::new(&set, &rules, Path::new("/w"));
        assert_eq!(plan.pins, vec![PathBuf::from("/w/.git")]);
        assert!(plan.covers.contains(&Cover::HideFile("/w/sock".into())));
        assert!(plan
            .covers
            .contains(&Cover::ReadOnly("/w/.git/hooks".into())));
        assert!(!plan.covers.iter().any(|c| c.path() == Path::new("/h/.aws")));
        assert!(!plan
            .covers
            .iter()
            .any(|c| c.path() == Path::new("/etc/ro-outside")));
        let ssh = plan
            .covers
            .iter()
            .find(|c| c.path() == Path::new("/h/.ssh"))
            .unwrap();
        let Cover::HideDir(_, holes) = ssh else {
            panic!("{ssh:?}")
        };
        assert_eq!(holes[0].path, PathBuf::from("/h/.ssh/known_hosts"));
        assert!(!holes[0].writable);
    }

    #[test]
    fn covers_inside_a_hidden_directory_go_with_it() {
        let set = ProtectedSet {
            entries: vec![
                entry("/h/.ssh", Kind::Hidden, Shape::Dir, true),
                entry("/h/.ssh/id_rsa", Kind::Hidden, Shape::File, true),
                entry("/h/.ssh/keys/a", Kind::Hidden, Shape::File, true),
                entry("/h/.sshx", Kind::Hidden, Shape::File, true),
                entry("/h/.ssh2/k", Kind::Hidden, Shape::File, true),
            ],
            truncated: false,
            incomplete: false,
        };
        let plan = Plan::new(&set, &RulePaths::default(), Path::new("/w"));
        let paths: Vec<&Path> = plan.covers.iter().map(Cover::path).collect();
        assert_eq!(
            paths,
            [
                Path::new("/h/.ssh"),
                Path::new("/h/.sshx"),
                Path::new("/h/.ssh2/k")
            ]
        );
    }

    #[test]
    fn missing_paths_get_placeholders_read_only_parents_or_are_logged() {
        let t = tempfile::tempdir().unwrap();
        let r = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(r.join("home/.docker")).unwrap();
        std::fs::create_dir_all(r.join("elsewhere")).unwrap();
        let h = r.join("home");
        let p = |rel: &str| h.join(rel).display().to_string();
        let set = ProtectedSet {
            entries: vec![
                entry(&p(".aws"), Kind::Hidden, Shape::Dir, false),
                entry(&p(".netrc"), Kind::Hidden, Shape::NeutralFile, false),
                entry(&p(".docker/config.json"), Kind::Hidden, Shape::File, false),
                entry(&p("cfg/sandbox.yaml"), Kind::ReadOnly, Shape::File, false),
                entry(&p(".profile"), Kind::ReadOnly, Shape::File, false),
                entry(
                    &r.join("elsewhere/x").display().to_string(),
                    Kind::Hidden,
                    Shape::Dir,
                    false,
                ),
            ],
            truncated: false,
            incomplete: false,
        };
        let rules = RulePaths {
            writable: vec![h.clone()],
            readable: Vec::new(),
        };
        let plan = Plan::new(&set, &rules, &h);
        assert_eq!(
            plan.placeholders,
            vec![
                Placeholder::Dir(h.join(".aws")),
                Placeholder::File(h.join(".netrc")),
                Placeholder::Dir(h.join("cfg")),
            ]
        );
        assert!(plan
            .covers
            .contains(&Cover::HideDir(h.join(".aws"), Vec::new())));
        assert!(plan.covers.contains(&Cover::HideFile(h.join(".netrc"))));
        assert!(plan.covers.contains(&Cover::ReadOnly(h.join(".docker"))));
        assert!(plan.covers.contains(&Cover::ReadOnly(h.join("cfg"))));
        // Directly in the writable root, and never created: logged.
        assert_eq!(plan.creatable, vec![h.join(".profile")]);
        // Outside every writable rule nothing is needed.
        assert!(!plan
            .covers
            .iter()
            .any(|c| c.path().starts_with(r.join("elsewhere"))));
    }
}
