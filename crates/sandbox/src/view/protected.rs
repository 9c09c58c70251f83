//! The protected set of CONTRACT §13: which paths a view hides and which it
//! binds read-only, gathered from the fixed lists, the server's own files,
//! the Git repositories of the workspace, `$HOME` and the policy's
//! `deny_read` / `deny_write`, and what the other live toolsrv servers and
//! bridges of this user registered (their sockets, secrets and token
//! files). Gathered when a view is built and by the background rescan
//! (about once a second), never per call.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use super::plan::RulePaths;
use crate::open::{identify, open_no_symlinks, FileId};
use crate::policy::glob::Glob;
use crate::policy::{anchor, PathContext, CREDENTIAL_STORES, TOOLSRV_BINARIES, TOOLSRV_STATE};

/// What a view does to a protected path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Masked: an empty read-only directory or file shows in its place.
    Hidden,
    /// Bound read-only over itself.
    ReadOnly,
}

/// What a protected path is (or would be, when it does not exist yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Shape {
    /// A directory (`~/.ssh`, `.git/hooks`).
    Dir,
    /// A file whose empty form reads like its absence (`~/.netrc`,
    /// `~/.bashrc`): a missing one may get an empty placeholder.
    NeutralFile,
    /// A file whose empty form would change how programs behave
    /// (`~/.docker/config.json`, `.mcp.json`, `~/.profile`): never created.
    File,
}

/// One protected path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Entry {
    /// The path: canonical when it exists; else its nearest existing
    /// ancestor, canonical, joined with the missing rest.
    pub path: PathBuf,
    /// Hidden or read-only.
    pub kind: Kind,
    /// What it is, or would be.
    pub(crate) shape: Shape,
    /// What it is now (`None`: missing). A protected file replaced by a new
    /// one is a new identity, and the view that masked the old one is stale.
    pub(crate) id: Option<FileId>,
}

/// The server's own files, as the server knows them (absolute paths).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerFiles {
    /// Hidden: the socket, `<socket>.secret`, the `--secret-file`, the MCP
    /// bridge's token files, the state of `toolsrv remote`, `secrets:` files.
    pub hidden: Vec<PathBuf>,
    /// Read-only: the policy file, its profiles directory, `grants.yaml`,
    /// the tools directory (as configured and as served), the built-in tools
    /// unpacked, the server's own executable, the binaries `toolsrv remote`
    /// installs.
    pub read_only: Vec<PathBuf>,
    /// What every view shows read-only whatever the policy's rules, so that
    /// tools can be run: the tools directory as configured and as served.
    pub shown: Vec<PathBuf>,
    /// The per-user registry of live toolsrv servers and bridges
    /// (`toolsrv_base::registry`): every gathering hides what each live
    /// entry names (its sockets with their `.secret` and `.mcp-token`
    /// siblings, its other secret and token files), so a server or bridge
    /// started later is hidden from the next rescan on. `None`: none read.
    pub registry: Option<PathBuf>,
}

/// Everything a protected set is gathered from.
#[derive(Debug, Clone)]
pub struct Sources {
    /// `$HOME`, the XDG variables.
    pub ctx: PathContext,
    /// The workspace (`--cwd`), canonical.
    pub workspace: PathBuf,
    /// The server's own files.
    pub server: ServerFiles,
    /// `filesystem.deny_read`, expanded (absolute; may hold globs).
    pub deny_read: Vec<PathBuf>,
    /// `filesystem.deny_write`, expanded.
    pub deny_write: Vec<PathBuf>,
    /// The policy's rule paths (`{CWD}` as the workspace): what the view
    /// binds, and under which read-only rules a socket is masked.
    pub rules: RulePaths,
    /// The server's directory for the upper layers of the copy-on-write
    /// caches (`None`: caches are bound as they are).
    pub layers: Option<PathBuf>,
}

/// The protected paths found, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProtectedSet {
    /// Every entry, sorted by path (a path may appear once per kind).
    pub entries: Vec<Entry>,
    /// A glob or a repository scan stopped at its budget.
    pub truncated: bool,
    /// A path could not be looked at for another reason than its absence
    /// (out of descriptors, say): the set may miss entries, and the rescan
    /// does not take it for a change.
    pub(crate) incomplete: bool,
    /// The Git directories of the workspace's repositories (above, below,
    /// through `gitdir:` files): their `hooks/` is read-only, and the
    /// server's guard watches their `config` (which git replaces by rename,
    /// so it is not bound read-only) and what redirects them.
    pub git_dirs: Vec<PathBuf>,
}

/// System credential files, hidden (`*` within the last name): the same list
/// the Landlock-only fallback carves.
const SYSTEM: &[&str] = crate::policy::PROTECTED;

/// Shell start-up files in `$HOME`, read-only; the files whose empty form is
/// their absence first.
const SHELL_NEUTRAL: &[&str] = &[
    "~/.bashrc",
    "~/.zshrc",
    "~/.zshenv",
    "~/.zprofile",
    "~/.zlogin",
    "~/.config/fish/config.fish",
];

/// Login start-up files: bash reads the first of them that exists, so an
/// empty placeholder would change which one runs.
const SHELL_ORDERED: &[&str] = &["~/.bash_profile", "~/.bash_login", "~/.profile"];

/// Agent configuration (in the workspace and in `$HOME`), read-only.
const AGENT_DIRS: &[&str] = &[".claude", ".codex", ".cursor", ".vscode"];
/// Agent configuration files.
const AGENT_FILES: &[&str] = &[".mcp.json"];

/// Credential stores that are files whose empty form reads as "no
/// credentials" (the others are directories, or files never created).
const NEUTRAL_CREDENTIAL_FILES: &[&str] = &[
    ".netrc",
    ".authinfo",
    ".pgpass",
    ".my.cnf",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    "credentials",
    "credentials.toml",
    ".vault-token",
];

/// Credential stores that are files an empty form would break.
const OTHER_CREDENTIAL_FILES: &[&str] = &["config.json", "credentials.tfrc.json", ".authinfo.gpg"];

/// The state of `toolsrv remote` (hidden: [`TOOLSRV_STATE`]) and the
/// binaries it installs (read-only: [`TOOLSRV_BINARIES`]), expanded in `ctx`.
fn remote_files(ctx: &PathContext) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let expand = |list: &[&str]| list.iter().filter_map(|raw| ctx.expand(raw).ok()).collect();
    (expand(TOOLSRV_STATE), expand(TOOLSRV_BINARIES))
}

/// At most this many directories are read when looking for the Git
/// repositories below the workspace, at most [`REPO_DEPTH`] levels down.
pub(crate) const REPO_SCAN_BUDGET: usize = 4_000;
/// How deep below the workspace repositories are looked for.
pub(crate) const REPO_DEPTH: usize = 4;

impl ProtectedSet {
    /// Gathers the set from `src`.
    pub(crate) fn gather(src: &Sources) -> ProtectedSet {
        let mut set = Collector::default();
        for pattern in SYSTEM {
            let p = Path::new(pattern);
            if p.as_os_str().as_encoded_bytes().contains(&b'*') {
                if let Some(g) = Glob::parse(p) {
                    for m in g.expand(&mut set.truncated) {
                        set.add(&m, Kind::Hidden, Shape::File);
                    }
                }
            } else if p.exists() {
                set.add(p, Kind::Hidden, Shape::File);
            }
        }
        for raw in CREDENTIAL_STORES {
            if let Ok(p) = src.ctx.expand(raw) {
                set.add(&p, Kind::Hidden, credential_shape(&p));
            }
        }
        for p in &src.server.hidden {
            set.add(p, Kind::Hidden, Shape::File);
        }
        for p in &src.server.read_only {
            set.add(p, Kind::ReadOnly, Shape::File);
        }
        if let Some(dir) = &src.server.registry {
            match toolsrv_base::registry::read_live(dir) {
                Ok(entries) => {
                    for p in entries.iter().flat_map(|e| e.hidden_paths()) {
                        set.add(&p, Kind::Hidden, Shape::File);
                    }
                }
                // Not a change: a rescan keeps the view it has.
                Err(_) => set.incomplete = true,
            }
        }
        let (state, binaries) = remote_files(&src.ctx);
        for p in &state {
            set.add(p, Kind::Hidden, Shape::Dir);
        }
        for p in &binaries {
            set.add(p, Kind::ReadOnly, Shape::Dir);
        }
        let home = src.ctx.expand("~").ok();
        for raw in SHELL_NEUTRAL {
            if let Ok(p) = src.ctx.expand(raw) {
                set.add(&p, Kind::ReadOnly, Shape::NeutralFile);
            }
        }
        for raw in SHELL_ORDERED {
            if let Ok(p) = src.ctx.expand(raw) {
                set.add(&p, Kind::ReadOnly, Shape::File);
            }
        }
        if let Some(h) = &home {
            let path = src.ctx.env.get("PATH").map(String::as_str);
            for p in super::home::read_only_entries(h, &src.rules, &src.ctx, path) {
                set.add(&p, Kind::ReadOnly, Shape::File);
            }
        }
        for dir in home.iter().chain(std::iter::once(&src.workspace)) {
            for name in AGENT_DIRS {
                set.add(&dir.join(name), Kind::ReadOnly, Shape::Dir);
            }
            for name in AGENT_FILES {
                set.add(&dir.join(name), Kind::ReadOnly, Shape::File);
            }
        }
        for git_dir in repositories(&src.workspace, &mut set.truncated) {
            // `config` stays writable: git writes it by lock and rename,
            // which a mount point refuses (EBUSY); the guard puts back a
            // version a tool gave a key that runs something.
            set.add(&git_dir.join("hooks"), Kind::ReadOnly, Shape::Dir);
            set.git_dirs.push(git_dir);
        }
        for p in super::sockets::bound() {
            if under_read_only_rule(&p, &src.rules) {
                set.add(&p, Kind::Hidden, Shape::File);
            }
        }
        for (list, kind) in [
            (&src.deny_read, Kind::Hidden),
            (&src.deny_write, Kind::ReadOnly),
        ] {
            for p in list {
                match Glob::parse(p) {
                    Some(g) => {
                        for m in g.expand(&mut set.truncated) {
                            set.add(&m, kind, Shape::File);
                        }
                    }
                    None => set.add(p, kind, Shape::File),
                }
            }
        }
        set.finish()
    }

    /// The entry that `path` (canonical) is or lies in, if any (the
    /// outermost when several are): a request's `cwd` there is refused.
    ///
    /// Each of the path's ancestors is looked up in the sorted entries (a few
    /// binary searches): a root server's set holds thousands of masked
    /// root-only files, and comparing the path with each of them took about
    /// 4 µs of every sandboxed call.
    pub fn covering(&self, path: &Path) -> Option<&Entry> {
        let mut ancestors: Vec<&Path> = path.ancestors().collect();
        ancestors.reverse();
        ancestors.into_iter().find_map(|a| {
            let i = self.entries.partition_point(|e| e.path.as_path() < a);
            self.entries.get(i).filter(|e| e.path == a)
        })
    }
}

/// Collects entries; a path protected both ways is hidden.
#[derive(Default)]
struct Collector {
    entries: Vec<Entry>,
    truncated: bool,
    incomplete: bool,
    git_dirs: Vec<PathBuf>,
}

/// Whether `e` says the path is not there (rather than not lookable).
fn absent(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR))
}

impl Collector {
    fn add(&mut self, path: &Path, kind: Kind, shape: Shape) {
        if !path.is_absolute() {
            return;
        }
        let (path, id, shape) = match std::fs::canonicalize(path) {
            Ok(c) => {
                let found = open_no_symlinks(&c).and_then(|fd| identify(fd.as_fd()));
                match found {
                    Ok((id, mode)) => {
                        let shape = if mode == libc::S_IFDIR {
                            Shape::Dir
                        } else if shape == Shape::Dir {
                            Shape::File
                        } else {
                            shape
                        };
                        (c, Some(id), shape)
                    }
                    Err(e) => {
                        self.incomplete |= !absent(&e) && e.raw_os_error() != Some(libc::ELOOP);
                        return;
                    }
                }
            }
            Err(e) if absent(&e) => match anchor(path) {
                Some(a) => (a, None, shape),
                None => return,
            },
            Err(_) => {
                self.incomplete = true;
                return;
            }
        };
        self.entries.push(Entry {
            path,
            kind,
            shape,
            id,
        });
    }

    fn finish(mut self) -> ProtectedSet {
        self.entries.sort();
        // One entry per path: hidden wins over read-only.
        self.entries
            .dedup_by(|later, earlier| later.path == earlier.path);
        self.git_dirs.sort();
        self.git_dirs.dedup();
        ProtectedSet {
            entries: self.entries,
            truncated: self.truncated,
            incomplete: self.incomplete,
            git_dirs: self.git_dirs,
        }
    }
}

/// Whether the innermost rule path `p` lies in is a read-only one (`/proc`,
/// which every view shows read-only, counts as one).
fn under_read_only_rule(p: &Path, rules: &RulePaths) -> bool {
    let depth = |r: &PathBuf| p.starts_with(r).then(|| r.components().count());
    let writable = rules.writable.iter().filter_map(depth).max();
    let readable = rules
        .readable
        .iter()
        .chain(std::iter::once(&PathBuf::from(super::plan::PROC)))
        .filter_map(depth)
        .max();
    match (readable, writable) {
        (Some(r), Some(w)) => r > w,
        (Some(_), None) => true,
        _ => false,
    }
}

/// A missing credential store's shape, from its name.
fn credential_shape(p: &Path) -> Shape {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if NEUTRAL_CREDENTIAL_FILES.contains(&name.as_str()) {
        Shape::NeutralFile
    } else if OTHER_CREDENTIAL_FILES.contains(&name.as_str()) {
        Shape::File
    } else {
        Shape::Dir
    }
}

/// The Git directories of the repository holding `workspace` (its `.git` at
/// `workspace` or above) and of the repositories found below it (a bounded
/// walk), with the common directory of a linked worktree.
fn repositories(workspace: &Path, truncated: &mut bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in workspace.ancestors() {
        if let Some(found) = git_dirs(dir) {
            out.extend(found);
            break;
        }
    }
    let mut budget = REPO_SCAN_BUDGET;
    let mut level = vec![workspace.to_path_buf()];
    for _ in 0..REPO_DEPTH {
        let mut next = Vec::new();
        for dir in level {
            if budget == 0 {
                *truncated = true;
                break;
            }
            budget -= 1;
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                if e.file_name() == ".git" || !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let sub = e.path();
                if let Some(found) = git_dirs(&sub) {
                    out.extend(found);
                }
                next.push(sub);
            }
        }
        level = next;
    }
    out.sort();
    out.dedup();
    out
}

/// The Git directories of a repository whose work tree is `dir`: `dir/.git`,
/// or the `gitdir:` a `.git` file names, plus its `commondir` (a linked
/// worktree keeps hooks and the shared config there).
fn git_dirs(dir: &Path) -> Option<Vec<PathBuf>> {
    let dot = dir.join(".git");
    let meta = std::fs::symlink_metadata(&dot).ok()?;
    let git_dir = if meta.is_dir() {
        dot
    } else {
        let text = std::fs::read_to_string(&dot).ok()?;
        let target = text.trim().strip_prefix("gitdir:")?.trim();
        dir.join(target)
    };
    let mut out = vec![git_dir.clone()];
    if let Ok(common) = std::fs::read_to_string(git_dir.join("commondir")) {
        out.push(git_dir.join(common.trim()));
    }
    Some(
        out.into_iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources(home: &Path, workspace: &Path) -> Sources {
        Sources {
            ctx: PathContext {
                cwd: workspace.to_path_buf(),
                workdir: None,
                workspace: None,
                env: [("HOME".to_string(), home.display().to_string())].into(),
            },
            workspace: workspace.to_path_buf(),
            server: ServerFiles::default(),
            deny_read: Vec::new(),
            deny_write: Vec::new(),
            rules: RulePaths::default(),
            layers: None,
        }
    }

    #[test]
    fn repositories_are_found_above_below_and_through_a_gitdir_file() {
        let t = tempfile::tempdir().unwrap();
        let r = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(r.join("repo/.git/worktrees/w")).unwrap();
        std::fs::write(r.join("repo/.git/worktrees/w/commondir"), "../..\n").unwrap();
        std::fs::create_dir_all(r.join("repo/ws/nested/.git")).unwrap();
        std::fs::create_dir_all(r.join("repo/ws/wt")).unwrap();
        std::fs::write(
            r.join("repo/ws/wt/.git"),
            format!("gitdir: {}\n", r.join("repo/.git/worktrees/w").display()),
        )
        .unwrap();
        let mut cut = false;
        let found = repositories(&r.join("repo/ws"), &mut cut);
        assert_eq!(
            found,
            vec![
                r.join("repo/.git"),
                r.join("repo/.git/worktrees/w"),
                r.join("repo/ws/nested/.git"),
            ]
        );
    }

    #[test]
    fn missing_entries_are_anchored_and_existing_ones_identified() {
        let t = tempfile::tempdir().unwrap();
        let h = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir(h.join(".ssh")).unwrap();
        std::fs::write(h.join(".bashrc"), "").unwrap();
        let set = ProtectedSet::gather(&sources(&h, &h));
        let get = |p: &Path| set.entries.iter().find(|e| e.path == p).cloned();
        let ssh = get(&h.join(".ssh")).unwrap();
        assert_eq!(
            (ssh.kind, ssh.shape, ssh.id.is_some()),
            (Kind::Hidden, Shape::Dir, true)
        );
        let aws = get(&h.join(".aws")).unwrap();
        assert_eq!((aws.shape, aws.id), (Shape::Dir, None));
        let netrc = get(&h.join(".netrc")).unwrap();
        assert_eq!(netrc.shape, Shape::NeutralFile);
        let rc = get(&h.join(".bashrc")).unwrap();
        assert_eq!((rc.kind, rc.id.is_some()), (Kind::ReadOnly, true));
        assert_eq!(get(&h.join(".mcp.json")).unwrap().shape, Shape::File);
        assert!(set.covering(&h.join(".ssh/keys")).is_some());
        assert!(set.covering(&h.join("src")).is_none());
    }

    #[test]
    fn what_other_servers_registered_is_hidden_and_gone_servers_are_not() {
        use toolsrv_base::registry::{self, Entry as Registered, Kind as Who};
        let t = tempfile::tempdir().unwrap();
        let h = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir(h.join(".run")).unwrap();
        std::fs::write(h.join(".run/b.sock"), "").unwrap();
        std::fs::write(h.join("token"), "").unwrap();
        let dir = h.join("registry");
        let me = toolsrv_base::ProcessId::current().unwrap();
        let _b = registry::register(
            &dir,
            &Registered {
                kind: Who::Server,
                id: me,
                sockets: vec![h.join(".run/b.sock")],
                hidden: vec![h.join("token")],
            },
        )
        .unwrap();
        let gone = toolsrv_base::ProcessId {
            start: me.start + 1,
            ..me
        };
        std::fs::write(h.join(".run/c.sock"), "").unwrap();
        std::mem::forget(
            registry::register(
                &dir,
                &Registered {
                    kind: Who::Server,
                    id: gone,
                    sockets: vec![h.join(".run/c.sock")],
                    hidden: Vec::new(),
                },
            )
            .unwrap(),
        );
        let mut src = sources(&h, &h);
        src.server.registry = Some(dir);
        let set = ProtectedSet::gather(&src);
        let hidden = |p: &Path| {
            set.entries
                .iter()
                .any(|e| e.path == p && e.kind == Kind::Hidden)
        };
        assert!(hidden(&h.join(".run/b.sock")));
        assert!(
            hidden(&h.join(".run/b.sock.secret")),
            "a missing sibling too"
        );
        assert!(hidden(&h.join(".run/b.sock.mcp-token")));
        assert!(hidden(&h.join("token")));
        assert!(
            !hidden(&h.join(".run/c.sock")),
            "a gone server's entry is ignored"
        );
    }

    #[test]
    fn covering_finds_the_outermost_entry_a_path_lies_in_by_whole_names() {
        let entry = |p: &str, kind| Entry {
            path: PathBuf::from(p),
            kind,
            shape: Shape::Dir,
            id: None,
        };
        let mut entries = vec![
            entry("/a/b", Kind::ReadOnly),
            entry("/a/b/c", Kind::Hidden),
            entry("/a/bc", Kind::Hidden),
            entry("/z", Kind::Hidden),
        ];
        entries.sort();
        let set = ProtectedSet {
            entries,
            ..ProtectedSet::default()
        };
        let covering = |p: &str| set.covering(Path::new(p)).map(|e| e.path.clone());
        assert_eq!(covering("/a/b/c/d"), Some(PathBuf::from("/a/b")));
        assert_eq!(covering("/a/b"), Some(PathBuf::from("/a/b")));
        assert_eq!(covering("/a/bc/x"), Some(PathBuf::from("/a/bc")));
        assert_eq!(covering("/a/bcd"), None, "a longer name is not inside");
        assert_eq!(covering("/a"), None, "an ancestor is not inside");
        assert_eq!(covering("/y/z"), None);
        assert_eq!(covering("/z"), Some(PathBuf::from("/z")));
    }
}
