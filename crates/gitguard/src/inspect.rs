//! Repository inspection: what in a git directory (and in every git
//! directory it redirects to or holds) would make the human's git run
//! something or take configuration or hooks from elsewhere.

use crate::config::Config;
use crate::fs::{self, Node, Read};
use crate::keys::{dangerous_in, normalize, Scope};
use crate::{Finding, Kind, Stamp};
use std::borrow::Cow;
use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Every hook name of githooks(5) (git 2.5x): a file of that name in
/// `hooks/` (or in `core.hooksPath`) is run by git when executable.
pub static HOOKS: &[&str] = &[
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "proc-receive",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "sendemail-validate",
    "fsmonitor-watchman",
    "p4-changelist",
    "p4-prepare-changelist",
    "p4-post-changelist",
    "p4-pre-submit",
    "post-index-change",
];

/// Bounds on what one inspection reads, so that a hostile repository (100k
/// worktrees, a 1 GB config, modules nested without end) costs a bounded
/// time. Past a bound the inspection reports [`Kind::TooMany`] or
/// [`Kind::TooLarge`] and sets [`Inspection::truncated`]: treat that
/// repository as unsafe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest file read (a config, a `.git` file, a todo list).
    pub max_file_bytes: u64,
    /// The most names looked at in one directory (`hooks/`, `worktrees/`,
    /// `modules/`).
    pub max_entries: usize,
    /// The most git directories inspected (the repository, its linked
    /// worktrees, submodules and redirections).
    pub max_git_dirs: usize,
    /// The deepest nesting of git directories (submodules of submodules,
    /// redirections of redirections).
    pub max_depth: usize,
    /// The most names looked at in all.
    pub max_examined: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: 1 << 20,
            max_entries: 512,
            max_git_dirs: 64,
            max_depth: 8,
            max_examined: 10_000,
        }
    }
}

/// How to inspect.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InspectOptions {
    /// The workspace the tool may write anyway (absolute, canonical). With
    /// it, a `core.worktree` or `submodule.<name>.gitdir` inside it is no
    /// finding and a `.git` file pointing out of it is; without it, every
    /// `core.worktree` is a finding and a `gitdir:` only a note.
    pub workspace: Option<PathBuf>,
    /// The bounds.
    pub limits: Limits,
}

/// What an inspection found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inspection {
    /// The git directories inspected, in order.
    pub git_dirs: Vec<PathBuf>,
    /// What would run or redirect; empty for a clean repository.
    pub findings: Vec<Finding>,
    /// What is worth knowing but runs nothing (a linked worktree's
    /// location, alternates, attributes naming drivers...).
    pub notes: Vec<Note>,
    /// Whether a [`Limits`] bound stopped the inspection somewhere.
    pub truncated: bool,
}

/// A remark about a file that runs nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The file.
    pub path: PathBuf,
    /// What about it.
    pub text: String,
}

impl Inspection {
    /// Whether nothing was found and nothing was left unexamined.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty() && !self.truncated
    }

    /// The findings of `self` that `before` does not have
    /// ([`Finding::same_as`]): what changed between two inspections of the
    /// same repository (a rewritten hook has a new [`Stamp`]).
    pub fn new_since(&self, before: &Inspection) -> Vec<&Finding> {
        self.findings
            .iter()
            .filter(|f| !before.findings.iter().any(|b| b.same_as(f)))
            .collect()
    }
}

/// Inspects a work tree (whose `.git` is a directory or a `gitdir:` file)
/// or a git directory itself, with default [`InspectOptions`].
pub fn inspect(git_dir_or_worktree: &Path) -> Inspection {
    inspect_with(git_dir_or_worktree, &InspectOptions::default())
}

/// [`inspect`] with options.
///
/// `path` may also be a `.git` file (its directory is the work tree) or a
/// directory named `.git` that does not look complete yet (a tool's
/// half-built one is inspected all the same).
///
/// `path` itself is opened following links (it is the caller's); below it
/// nothing is followed: a link where git expects a file or directory is a
/// [`Kind::Symlink`] finding. A `gitdir:` or `commondir` target is opened
/// as git opens it (following links in its path) and inspected in turn.
pub fn inspect_with(path: &Path, opts: &InspectOptions) -> Inspection {
    let mut i = Inspector {
        opts,
        out: Inspection::default(),
        visited: HashSet::new(),
        included: HashSet::new(),
        examined: 0,
        exhausted: false,
    };
    i.start(path);
    i.out
}

/// Whether `path` looks like a git directory to git's discovery (a `HEAD`,
/// and `objects/` and `refs/` or a `commondir`), so that a bare repository
/// planted anywhere can be told. Lenient: it does not validate `HEAD`.
pub fn looks_like_git_dir(path: &Path) -> bool {
    fs::open_dir_path(path).is_ok_and(|fd| looks_like_git_dir_fd(fd.as_fd()))
}

fn looks_like_git_dir_fd(fd: BorrowedFd<'_>) -> bool {
    let is_dir = |n: &str| matches!(fs::node(fd, OsStr::new(n)), Node::Dir);
    let head = matches!(
        fs::node(fd, OsStr::new("HEAD")),
        Node::File { .. } | Node::Symlink(_)
    );
    let common = matches!(fs::node(fd, OsStr::new("commondir")), Node::File { .. });
    head && (common || (is_dir("objects") && is_dir("refs")))
}

const MAX_NOTES: usize = 1000;

struct Inspector<'a> {
    opts: &'a InspectOptions,
    out: Inspection,
    visited: HashSet<(u64, u64)>,
    /// Included files read, by device and inode (an include cycle ends).
    included: HashSet<(u64, u64)>,
    examined: usize,
    exhausted: bool,
}

fn osstr(s: &str) -> &OsStr {
    OsStr::new(s)
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn name_str(n: &OsStr) -> String {
    lossy(n.as_bytes())
}

impl Inspector<'_> {
    fn limits(&self) -> &Limits {
        &self.opts.limits
    }

    /// Counts one name looked at; false once the budget is spent.
    fn tick(&mut self, at: &Path) -> bool {
        if self.exhausted {
            return false;
        }
        self.examined += 1;
        if self.examined > self.limits().max_examined {
            self.exhausted = true;
            let n = self.limits().max_examined;
            self.too_many(
                at,
                format!("more than {n} names to examine: the rest was not"),
            );
            return false;
        }
        true
    }

    fn too_many(&mut self, at: &Path, reason: String) {
        self.out.truncated = true;
        self.find(Kind::TooMany, at, "", None, None, reason.into(), None);
    }

    #[allow(clippy::too_many_arguments)]
    fn find(
        &mut self,
        kind: Kind,
        path: &Path,
        key: &str,
        value: Option<String>,
        line: Option<usize>,
        reason: Cow<'static, str>,
        stamp: Option<Stamp>,
    ) {
        self.out.findings.push(Finding {
            kind,
            path: Some(path.to_path_buf()),
            key: key.to_string(),
            value,
            line,
            reason,
            stamp,
        });
    }

    fn note(&mut self, path: &Path, text: impl Into<String>) {
        if self.out.notes.len() < MAX_NOTES {
            self.out.notes.push(Note {
                path: path.to_path_buf(),
                text: text.into(),
            });
        }
    }

    /// A link where git expects `what`; `key` names it relative to its git
    /// directory.
    fn symlink(
        &mut self,
        dir: BorrowedFd<'_>,
        at: &Path,
        name: &OsStr,
        key: &str,
        stamp: Stamp,
        what: &str,
    ) {
        let target = fs::link_target(dir, name);
        let reason = format!(
            "a symbolic link where git expects {what}: git follows it, the inspection does not"
        );
        self.find(
            Kind::Symlink,
            &at.join(name),
            key,
            target,
            None,
            reason.into(),
            Some(stamp),
        );
    }

    /// Reports a read that gave no bytes (nothing for a missing file).
    #[allow(clippy::too_many_arguments)]
    fn unreadable(
        &mut self,
        dir: BorrowedFd<'_>,
        at: &Path,
        name: &OsStr,
        key: &str,
        r: &Read,
        what: &str,
    ) {
        let path = at.join(name);
        match r {
            Read::Bytes(..) | Read::Missing => {}
            Read::Symlink(s) => self.symlink(dir, at, name, key, *s, what),
            Read::Dir => self.note(&path, format!("a directory where git expects {what}")),
            Read::NotRegular(s) => {
                let reason = format!("not a regular file where git expects {what}");
                self.find(
                    Kind::NotRegular,
                    &path,
                    key,
                    None,
                    None,
                    reason.into(),
                    Some(*s),
                );
            }
            Read::TooLarge(s) => {
                let max = self.limits().max_file_bytes;
                let reason = format!("larger than {max} bytes: not read, so not checked");
                self.out.truncated = true;
                self.find(
                    Kind::TooLarge,
                    &path,
                    key,
                    None,
                    None,
                    reason.into(),
                    Some(*s),
                );
            }
            Read::Error(e) => {
                let reason = format!("cannot be read ({e}): not checked");
                self.find(
                    Kind::Unreadable,
                    &path,
                    key,
                    None,
                    None,
                    reason.into(),
                    None,
                );
            }
        }
    }

    fn start(&mut self, path: &Path) {
        let dotgit = osstr(".git");
        let named_dotgit = path.file_name() == Some(dotgit);
        let root = match fs::open_dir_path(path) {
            Ok(fd) => fd,
            // The `.git` file itself: the work tree is its directory.
            Err(e)
                if named_dotgit
                    && e.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error()) =>
            {
                let parent = path.parent().unwrap_or(Path::new("."));
                match fs::open_dir_path(parent) {
                    Ok(fd) => self.gitfile(fd.as_fd(), parent),
                    Err(e) => {
                        let reason = format!("cannot be opened ({e}): not checked");
                        self.find(
                            Kind::Unreadable,
                            parent,
                            "",
                            None,
                            None,
                            reason.into(),
                            None,
                        );
                    }
                }
                return;
            }
            Err(e) => {
                let reason = format!("cannot be opened ({e}): not checked");
                self.find(Kind::Unreadable, path, "", None, None, reason.into(), None);
                return;
            }
        };
        self.tick(path);
        match fs::node(root.as_fd(), dotgit) {
            Node::Missing => {
                // A directory named .git counts before it is complete (a
                // tool's half-built one); any other when git would take it.
                if named_dotgit || looks_like_git_dir_fd(root.as_fd()) {
                    self.git_dir(root, path, 0);
                } else {
                    self.note(path, "no git directory here");
                }
            }
            Node::Dir => match fs::open_dir_at(root.as_fd(), dotgit) {
                Ok(fd) => self.git_dir(fd, &path.join(dotgit), 0),
                Err(e) => {
                    let reason = format!("cannot be opened ({e}): not checked");
                    self.find(
                        Kind::Unreadable,
                        &path.join(dotgit),
                        ".git",
                        None,
                        None,
                        reason.into(),
                        None,
                    );
                }
            },
            Node::File { .. } => self.gitfile(root.as_fd(), path),
            Node::Symlink(s) => self.symlink(
                root.as_fd(),
                path,
                dotgit,
                ".git",
                s,
                "a git directory or a gitdir: file",
            ),
            Node::Other(s) => {
                let reason =
                    "not a regular file where git expects a git directory or a gitdir: file";
                self.find(
                    Kind::NotRegular,
                    &path.join(dotgit),
                    ".git",
                    None,
                    None,
                    reason.into(),
                    Some(s),
                );
            }
            Node::Error(e) => {
                let reason = format!("cannot be read ({e}): not checked");
                self.find(
                    Kind::Unreadable,
                    &path.join(dotgit),
                    ".git",
                    None,
                    None,
                    reason.into(),
                    None,
                );
            }
        }
    }

    fn outside_workspace(&self, path: &Path) -> Option<bool> {
        let ws = self.opts.workspace.as_deref()?;
        Some(!normalize(path).starts_with(normalize(ws)))
    }

    /// A work tree's `.git` file: `gitdir: <path>`.
    fn gitfile(&mut self, root: BorrowedFd<'_>, worktree: &Path) {
        let name = osstr(".git");
        let at = worktree.join(name);
        let r = fs::read_at(root, name, self.limits().max_file_bytes);
        let Read::Bytes(bytes, stamp) = r else {
            return self.unreadable(root, worktree, name, ".git", &r, "a gitdir: file");
        };
        let Some(rest) = bytes.strip_prefix(b"gitdir: ") else {
            return self.note(
                &at,
                "not a gitdir: file: git refuses this work tree (invalid gitfile format)",
            );
        };
        let rest = until_nul(rest);
        let rest = trim_newlines(rest);
        if rest.is_empty() {
            return self.note(&at, "an empty gitdir: git refuses this work tree");
        }
        let target = PathBuf::from(OsStr::from_bytes(rest));
        let target = if target.is_absolute() {
            target
        } else {
            worktree.join(target)
        };
        let shown = normalize(&target);
        if self.outside_workspace(&shown) == Some(true) {
            let reason = "a gitdir: outside the workspace: git takes this work tree's config and hooks from there";
            self.find(
                Kind::Redirect,
                &at,
                ".git",
                Some(shown.display().to_string()),
                None,
                reason.into(),
                Some(stamp),
            );
        } else {
            self.note(&at, format!("gitdir: {}", shown.display()));
        }
        match fs::open_dir_path(&target) {
            Ok(fd) => self.git_dir(fd, &shown, 0),
            Err(e) => self.note(
                &at,
                format!(
                    "gitdir: {} cannot be opened ({e}): git refuses this work tree",
                    shown.display()
                ),
            ),
        }
    }

    fn git_dir(&mut self, fd: OwnedFd, path: &Path, depth: usize) {
        if self.exhausted {
            return;
        }
        if depth > self.limits().max_depth {
            let n = self.limits().max_depth;
            return self.too_many(
                path,
                format!("git directories nested deeper than {n}: not inspected"),
            );
        }
        let Ok(id) = fs::identity(fd.as_fd()) else {
            return;
        };
        if !self.visited.insert(id) {
            return;
        }
        if self.visited.len() > self.limits().max_git_dirs {
            let n = self.limits().max_git_dirs;
            self.exhausted = true;
            return self.too_many(
                path,
                format!("more than {n} git directories: the rest was not inspected"),
            );
        }
        self.out.git_dirs.push(path.to_path_buf());
        let dir = fd.as_fd();
        self.config_file(dir, path, "config");
        self.config_file(dir, path, "config.worktree");
        self.commondir(dir, path, depth);
        self.backlink(dir, path);
        self.hooks(dir, path);
        self.worktrees(dir, path, depth);
        self.modules(dir, path, depth);
        self.todos(dir, path);
        self.info(dir, path);
    }

    fn config_file(&mut self, dir: BorrowedFd<'_>, at: &Path, file: &str) {
        if !self.tick(at) {
            return;
        }
        let name = osstr(file);
        let r = fs::read_at(dir, name, self.limits().max_file_bytes);
        let Read::Bytes(bytes, stamp) = r else {
            return self.unreadable(dir, at, name, file, &r, "a config file");
        };
        let path = at.join(name);
        self.included.insert((stamp.dev, stamp.ino));
        let config = self.config_bytes(&bytes, &path, file, at, stamp);
        if file == "config.worktree" {
            self.note(
                &path,
                "config.worktree: git reads it with extensions.worktreeConfig; checked either way",
            );
        }
        self.includes(&config, at, at, 1);
        self.hooks_path(&config, at);
    }

    /// Checks the entries of a config file at `path` (`key` its label)
    /// read for the git directory `git_dir`; returns what was parsed.
    fn config_bytes(
        &mut self,
        bytes: &[u8],
        path: &Path,
        key: &str,
        git_dir: &Path,
        stamp: Stamp,
    ) -> Config {
        let config = match Config::parse(bytes) {
            Ok(c) => c,
            Err(e) => {
                let f = Finding::unparsable(e.line);
                self.find(f.kind, path, key, None, f.line, f.reason, Some(stamp));
                e.partial
            }
        };
        let ws = self.opts.workspace.clone();
        let scope = ws.as_deref().map(|workspace| Scope { git_dir, workspace });
        for e in config.entries() {
            if let Some(reason) = dangerous_in(e, scope.as_ref()) {
                let mut f = Finding::entry(e, reason);
                f.path = Some(path.to_path_buf());
                self.out.findings.push(f);
            }
        }
        config
    }

    /// The files `include.path` and `includeIf.<cond>.path` name (each a
    /// finding already), read as git reads them (relative to the including
    /// file's directory, following links, whatever the condition) and
    /// checked in turn: an include the human wrote into the workspace gives
    /// the tool that configuration without touching the git directory.
    fn includes(&mut self, config: &Config, base: &Path, git_dir: &Path, depth: usize) {
        for e in config.entries() {
            let include = e.key == "path"
                && ((e.section == "include" && e.subsection.is_none())
                    || (e.section == "includeif" && e.subsection.is_some()));
            let Some(value) = e.raw_value().filter(|v| include && !v.is_empty()) else {
                continue;
            };
            let rel = PathBuf::from(OsStr::from_bytes(value));
            if value.starts_with(b"~") || value.starts_with(b"%(") {
                let text = format!(
                    "includes {}: a path git expands, not followed",
                    rel.display()
                );
                self.note(base, text);
                continue;
            }
            let path = if rel.is_absolute() {
                rel
            } else {
                base.join(rel)
            };
            let shown = normalize(&path);
            // git stops at 10 nested includes; a cycle ends there too.
            if depth > 10 || !self.tick(&shown) {
                continue;
            }
            let label = format!("include {}", shown.display());
            match fs::read_path(&path, self.limits().max_file_bytes) {
                Read::Bytes(_, stamp) if !self.included.insert((stamp.dev, stamp.ino)) => {}
                Read::Bytes(bytes, stamp) => {
                    self.note(
                        &shown,
                        "included configuration: checked like the including file; watch it too",
                    );
                    let inner = self.config_bytes(&bytes, &shown, &label, git_dir, stamp);
                    let dir = shown.parent().map(Path::to_path_buf).unwrap_or_default();
                    self.includes(&inner, &dir, git_dir, depth + 1);
                }
                Read::Missing => {}
                Read::TooLarge(s) => {
                    let max = self.limits().max_file_bytes;
                    let reason = format!("larger than {max} bytes: not read, so not checked");
                    self.out.truncated = true;
                    self.find(
                        Kind::TooLarge,
                        &shown,
                        &label,
                        None,
                        None,
                        reason.into(),
                        Some(s),
                    );
                }
                _ => self.note(&shown, "an included path that is no readable file"),
            }
        }
    }

    /// The hooks in the directory `core.hooksPath` names (the finding is
    /// the key; this lists what a human's own hooks path holds, such as a
    /// `.husky/_` in the workspace). Relative paths are taken from the work
    /// tree above a `.git` directory; others are not listed.
    fn hooks_path(&mut self, config: &Config, git_dir: &Path) {
        let Some(value) = config.get("core.hooksPath").and_then(|e| e.raw_value()) else {
            return;
        };
        let rel = PathBuf::from(OsStr::from_bytes(value));
        let dir = if rel.is_absolute() {
            rel
        } else if git_dir.file_name() == Some(OsStr::new(".git")) && !value.starts_with(b"~") {
            git_dir.parent().map(|p| p.join(&rel)).unwrap_or(rel)
        } else {
            return;
        };
        let shown = normalize(&dir);
        if let Ok(fd) = fs::open_dir_path(&dir) {
            let label = String::from_utf8_lossy(value)
                .trim_end_matches('/')
                .to_string();
            self.hook_files(fd.as_fd(), &shown, &label);
        }
    }

    /// `commondir`: where git takes config, hooks, refs and objects from. A
    /// linked worktree's points to the repository holding it
    /// (`worktrees/<id>` of it); any other is a redirection.
    fn commondir(&mut self, dir: BorrowedFd<'_>, at: &Path, depth: usize) {
        if !self.tick(at) {
            return;
        }
        let name = osstr("commondir");
        let r = fs::read_at(dir, name, self.limits().max_file_bytes);
        let Read::Bytes(bytes, stamp) = r else {
            return self.unreadable(dir, at, name, "commondir", &r, "a commondir file");
        };
        let path = at.join(name);
        let rest = trim_newlines(until_nul(&bytes));
        let target = PathBuf::from(OsStr::from_bytes(rest));
        let target = if target.is_absolute() {
            target
        } else {
            at.join(target)
        };
        let shown = normalize(&target);
        let Ok(common) = fs::open_dir_path(&target) else {
            return self.note(
                &path,
                format!(
                    "commondir {} cannot be opened: git refuses this git directory",
                    shown.display()
                ),
            );
        };
        let ordinary = at.file_name().is_some_and(|id| {
            fs::open_dir_at(common.as_fd(), osstr("worktrees"))
                .and_then(|w| fs::open_dir_at(w.as_fd(), id))
                .and_then(|me| fs::identity(me.as_fd()))
                .ok()
                == fs::identity(dir).ok()
        });
        if ordinary {
            self.note(&path, format!("a linked worktree of {}", shown.display()));
        } else {
            let reason =
                "git takes this repository's config, hooks and refs from the directory it names";
            self.find(
                Kind::Redirect,
                &path,
                "commondir",
                Some(shown.display().to_string()),
                None,
                reason.into(),
                Some(stamp),
            );
        }
        self.git_dir(common, &shown, depth + 1);
    }

    /// A linked worktree's `gitdir`: where its work tree is (git only
    /// reads it to list, prune and repair worktrees).
    fn backlink(&mut self, dir: BorrowedFd<'_>, at: &Path) {
        let name = osstr("gitdir");
        if let Read::Bytes(b, _) = fs::read_at(dir, name, self.limits().max_file_bytes) {
            let text = format!("linked worktree at {}", lossy(trim_newlines(until_nul(&b))));
            self.note(&at.join(name), text);
        }
    }

    fn subdir(
        &mut self,
        dir: BorrowedFd<'_>,
        at: &Path,
        name: &str,
        key: &str,
        what: &str,
    ) -> Option<(OwnedFd, PathBuf)> {
        if !self.tick(at) {
            return None;
        }
        let n = osstr(name);
        match fs::node(dir, n) {
            Node::Dir => match fs::open_dir_at(dir, n) {
                Ok(fd) => Some((fd, at.join(n))),
                Err(e) => {
                    let reason = format!("cannot be opened ({e}): not checked");
                    self.find(
                        Kind::Unreadable,
                        &at.join(n),
                        key,
                        None,
                        None,
                        reason.into(),
                        None,
                    );
                    None
                }
            },
            Node::Symlink(s) => {
                self.symlink(dir, at, n, key, s, what);
                None
            }
            _ => None,
        }
    }

    fn listing(&mut self, dir: BorrowedFd<'_>, at: &Path) -> Vec<OsString> {
        match fs::list(dir, self.limits().max_entries) {
            Ok((names, more)) => {
                if more {
                    let n = self.limits().max_entries;
                    self.too_many(
                        at,
                        format!("more than {n} entries: the rest was not examined"),
                    );
                }
                names
            }
            Err(e) => {
                let reason = format!("cannot be listed ({e}): not checked");
                self.find(Kind::Unreadable, at, "", None, None, reason.into(), None);
                Vec::new()
            }
        }
    }

    fn hooks(&mut self, dir: BorrowedFd<'_>, at: &Path) {
        let Some((hooks, hpath)) = self.subdir(dir, at, "hooks", "hooks", "the hooks directory")
        else {
            return;
        };
        self.hook_files(hooks.as_fd(), &hpath, "hooks");
    }

    /// The files of a hooks directory `hpath` (open as `hooks`), keyed
    /// `<label>/<name>`.
    fn hook_files(&mut self, hooks: BorrowedFd<'_>, hpath: &Path, label: &str) {
        for name in self.listing(hooks, hpath) {
            if name.as_bytes().ends_with(b".sample") {
                continue; // git never runs the templates
            }
            if !self.tick(hpath) {
                return;
            }
            let n = name_str(&name);
            let known = HOOKS.contains(&n.as_str());
            let key = format!("{label}/{n}");
            let path = hpath.join(&name);
            match fs::node(hooks, &name) {
                Node::File { stamp, executable } if known || executable => {
                    let reason = match (known, executable) {
                        (true, true) => "a hook: git runs it",
                        (true, false) => "a hook git skips while it is not executable; a chmod makes it run",
                        _ => "an executable in hooks/ under no hook name git knows: a hook may call it, a later git may know the name",
                    };
                    self.find(
                        Kind::Hook,
                        &path,
                        &key,
                        None,
                        None,
                        reason.into(),
                        Some(stamp),
                    );
                }
                Node::File { .. } => self.note(
                    &path,
                    "a file in hooks/ under no hook name, not executable: git never runs it",
                ),
                Node::Symlink(s) if known => self.symlink(hooks, hpath, &name, &key, s, "a hook"),
                Node::Other(s) if known => {
                    let reason = "not a regular file under a hook name";
                    self.find(
                        Kind::NotRegular,
                        &path,
                        &key,
                        None,
                        None,
                        reason.into(),
                        Some(s),
                    );
                }
                _ => self.note(
                    &path,
                    "in hooks/, under no hook name or not a file: git never runs it",
                ),
            }
        }
    }

    fn worktrees(&mut self, dir: BorrowedFd<'_>, at: &Path, depth: usize) {
        let Some((wt, wpath)) =
            self.subdir(dir, at, "worktrees", "worktrees", "the worktrees directory")
        else {
            return;
        };
        for name in self.listing(wt.as_fd(), &wpath) {
            let n = name_str(&name);
            let key = format!("worktrees/{n}");
            let what = "a linked worktree's git directory";
            if let Some((fd, path)) = self.subdir(wt.as_fd(), &wpath, &n, &key, what) {
                self.git_dir(fd, &path, depth + 1);
            }
        }
    }

    fn modules(&mut self, dir: BorrowedFd<'_>, at: &Path, depth: usize) {
        let Some((m, mpath)) =
            self.subdir(dir, at, "modules", "modules", "the submodules directory")
        else {
            return;
        };
        self.walk_modules(m.as_fd(), &mpath, "modules", depth + 1);
    }

    /// `modules/<name>/`, where a name may hold slashes: a directory that is
    /// no git directory is descended into.
    fn walk_modules(&mut self, dir: BorrowedFd<'_>, at: &Path, rel: &str, depth: usize) {
        if depth > self.limits().max_depth {
            let n = self.limits().max_depth;
            return self.too_many(
                at,
                format!("submodule names nested deeper than {n}: not inspected"),
            );
        }
        for name in self.listing(dir, at) {
            let n = name_str(&name);
            let key = format!("{rel}/{n}");
            let what = "a submodule's git directory";
            let Some((fd, path)) = self.subdir(dir, at, &n, &key, what) else {
                continue;
            };
            if looks_like_git_dir_fd(fd.as_fd()) {
                self.git_dir(fd, &path, depth);
            } else {
                self.walk_modules(fd.as_fd(), &path, &key, depth + 1);
            }
        }
    }

    /// An interrupted rebase (or cherry-pick sequence) runs the `exec` lines
    /// of its todo list at `--continue`.
    fn todos(&mut self, dir: BorrowedFd<'_>, at: &Path) {
        for (sub, file) in [("rebase-merge", "git-rebase-todo"), ("sequencer", "todo")] {
            let Some((d, dpath)) = self.subdir(dir, at, sub, sub, "a rebase state directory")
            else {
                continue;
            };
            let name = osstr(file);
            let r = fs::read_at(d.as_fd(), name, self.limits().max_file_bytes);
            let Read::Bytes(bytes, _) = r else {
                self.unreadable(
                    d.as_fd(),
                    &dpath,
                    name,
                    &format!("{sub}/{file}"),
                    &r,
                    "a todo list",
                );
                continue;
            };
            let path = dpath.join(name);
            for (i, line) in bytes.split(|&c| c == b'\n').enumerate() {
                let line = trim_newlines(line);
                let start = line
                    .iter()
                    .position(|&c| c != b' ' && c != b'\t')
                    .unwrap_or(line.len());
                let insn = &line[start..];
                let cmd = ["exec", "x"].iter().find_map(|w| {
                    let rest = insn.strip_prefix(w.as_bytes())?;
                    matches!(rest.first(), Some(b' ' | b'\t')).then(|| &rest[1..])
                });
                if let Some(cmd) = cmd {
                    let reason = "an interrupted rebase runs this command at --continue";
                    self.find(
                        Kind::PendingExec,
                        &path,
                        "exec",
                        Some(lossy(cmd)),
                        Some(i + 1),
                        reason.into(),
                        None,
                    );
                }
            }
        }
    }

    /// What runs nothing but is worth a note: attributes naming drivers and
    /// object alternates.
    fn info(&mut self, dir: BorrowedFd<'_>, at: &Path) {
        let max = self.limits().max_file_bytes;
        if let Some((info, ipath)) = self.subdir(dir, at, "info", "info", "the info directory") {
            if let Read::Bytes(b, _) = fs::read_at(info.as_fd(), osstr("attributes"), max) {
                let text = lossy(&b);
                if ["filter=", "diff=", "merge="]
                    .iter()
                    .any(|d| text.contains(d))
                {
                    self.note(&ipath.join("attributes"), "attributes name filter, diff or merge drivers: they run only as configured, and their config keys are checked");
                }
            }
        }
        if let Some((objects, opath)) =
            self.subdir(dir, at, "objects", "objects", "the objects directory")
        {
            if let Some((oinfo, oipath)) = self.subdir(
                objects.as_fd(),
                &opath,
                "info",
                "objects/info",
                "objects/info",
            ) {
                for file in ["alternates", "http-alternates"] {
                    if let Read::Bytes(b, _) = fs::read_at(oinfo.as_fd(), osstr(file), max) {
                        let list = lossy(&b).lines().take(8).collect::<Vec<_>>().join(", ");
                        self.note(&oipath.join(file), format!("objects are also read from: {list} (objects only; git runs nothing from there)"));
                    }
                }
            }
        }
    }
}

fn until_nul(b: &[u8]) -> &[u8] {
    b.iter().position(|&c| c == 0).map_or(b, |i| &b[..i])
}

/// git strips trailing `\n` and `\r` from `gitdir:` and `commondir`.
fn trim_newlines(mut b: &[u8]) -> &[u8] {
    while let Some((&last, rest)) = b.split_last() {
        if last != b'\n' && last != b'\r' {
            break;
        }
        b = rest;
    }
    b
}
