//! What the guard does with one event: the decisions of the module's note,
//! and the actions (quarantine, a config put back, a denial recorded).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use toolsrv_gitguard::{inspect_with, looks_like_git_dir, InspectOptions, HOOKS};
use toolsrv_watch::{Event, EventKind, Origin};

use super::git::{self, Verdict};
use super::{Guard, State, DENIALS_MAX, ENTRIES_AND_WRITES};

impl Guard {
    /// Whether an event's change is taken for a tool's.
    fn by_tool(&self, origin: Origin) -> bool {
        match origin {
            Origin::Tool { .. } => true,
            Origin::Other => false,
            Origin::Unknown => self.active.load(Ordering::Acquire) > 0,
        }
    }

    pub(super) fn handle(&self, st: &mut State, ev: Event) {
        if ev.kind == EventKind::Overflow {
            tracing::warn!("guard: the watcher lost events; what tools made meanwhile is checked at the next rescan");
            return;
        }
        let path = ev.path();
        if !st.targets.in_scope(&path) {
            return;
        }
        if !self.by_tool(ev.origin) {
            // The human's (or the client's) change: a config's new baseline.
            st.repos.adopt(&path);
            return;
        }
        match ev.kind {
            EventKind::Created | EventKind::MovedTo => self.made(st, &ev, &path),
            EventKind::ClosedWrite => self.written(st, &ev, &path),
            _ => {}
        }
    }

    /// A tool made `path` (or renamed something there).
    fn made(&self, st: &mut State, ev: &Event, path: &Path) {
        if let Some(why) = st.targets.forbidden(path) {
            self.quarantine(st, path, why);
            return;
        }
        if ev.name == ".git" {
            if ev.is_dir {
                self.watch_git_dir(st, path);
            } else {
                // Its `gitdir:` is written after it is made.
                self.mark(st, &ev.dir, ENTRIES_AND_WRITES);
            }
            self.check_new_git(st, path);
            return;
        }
        self.in_git_dir(st, ev, path);
    }

    /// A tool wrote `path` and closed it.
    fn written(&self, st: &mut State, ev: &Event, path: &Path) {
        if ev.name == ".git" && !ev.is_dir {
            self.check_new_git(st, path);
            return;
        }
        self.in_git_dir(st, ev, path);
    }

    /// What a tool did to what git reads: a config, a redirection, a hook.
    fn in_git_dir(&self, st: &mut State, ev: &Event, path: &Path) {
        if st.repos.files.contains_key(path) {
            self.config_changed(st, path);
            return;
        }
        let dir = ev.dir.as_path();
        if st.repos.hook_dirs.contains_key(dir) && !ev.is_dir {
            self.quarantine(st, path, "in the hooks directory the repository's core.hooksPath names: the human's git would run it outside the sandbox");
            return;
        }
        let name = ev.name.as_os_str();
        let s = name.to_string_lossy();
        let in_hooks = dir.file_name() == Some(OsStr::new("hooks"));
        let interesting = in_hooks
            || matches!(s.as_ref(), "config" | "hooks")
            || git::REDIRECTS.contains(&s.as_ref())
            || git::NESTED.contains(&s.as_ref());
        if !interesting {
            // Most events (a build's files): no look at the directory.
            return;
        }
        let is_git = |st: &State, d: &Path| st.repos.knows(d) || looks_like_git_dir(d);
        if in_hooks
            && HOOKS.iter().any(|h| OsStr::new(h) == name)
            && dir.parent().is_some_and(|g| is_git(st, g))
        {
            self.quarantine(
                st,
                path,
                "a Git hook: the human's git would run it outside the sandbox",
            );
            return;
        }
        if !is_git(st, dir) {
            return;
        }
        if name == "config" {
            // A Git directory not known yet (a bare one, say).
            self.watch_git_dir(st, dir);
            self.config_changed(st, path);
        } else if git::REDIRECTS.contains(&s.as_ref()) && !ev.is_dir {
            self.quarantine(
                st,
                path,
                "it makes git take its configuration or hooks from elsewhere",
            );
        } else if git::NESTED.contains(&s.as_ref()) && ev.is_dir {
            self.quarantine(
                st,
                path,
                "it holds Git directories of their own (linked worktrees, submodules) with their own config and hooks",
            );
        } else if name == "hooks" && ev.is_dir {
            self.mark(st, path, ENTRIES_AND_WRITES);
            self.check_new_git(st, dir);
        } else if name == "hooks" {
            // A link (or a file) where git looks for its hooks directory:
            // git follows it.
            self.quarantine(
                st,
                path,
                "a link where git looks for its hooks: the human's git would run what it points at",
            );
        }
    }

    /// Starts keeping `git_dir` (found by a rescan): its config as it is
    /// is the baseline, unless `suspect` (it appeared while a run was under
    /// way and who made it is not known), when it is inspected first.
    pub(super) fn learn_repo(&self, st: &mut State, git_dir: &Path, suspect: bool) {
        if suspect {
            self.check_new_git(st, git_dir);
            if !git_dir.exists() {
                return;
            }
        }
        st.repos.add(git_dir, false);
    }

    /// A `.git` (file or directory) or a Git directory a tool made or
    /// planted: inspected; what would run goes to quarantine (keys of its
    /// config are taken out, the repository stays); a clean one is kept
    /// from now on.
    fn check_new_git(&self, st: &mut State, path: &Path) {
        let opts = InspectOptions {
            workspace: Some(st.targets.workspace.clone()),
            ..InspectOptions::default()
        };
        let found = inspect_with(path, &opts);
        if found.findings.is_empty() && !found.truncated {
            for g in &found.git_dirs {
                if g.is_dir() {
                    self.watch_git_dir(st, g);
                }
            }
            return;
        }
        let only_config = !found.truncated
            && found
                .findings
                .iter()
                .all(|f| f.kind == toolsrv_gitguard::Kind::ConfigKey);
        if only_config && path.is_dir() {
            self.watch_git_dir(st, path);
            self.config_changed(st, &path.join("config"));
            return;
        }
        let why = found
            .findings
            .first()
            .map(|f| format!("{f}"))
            .unwrap_or_else(|| "too large to inspect".into());
        self.quarantine(
            st,
            path,
            &format!("a Git directory or link that would run what a tool wrote ({why})"),
        );
    }

    /// Keeps `git_dir` (a tool's: no baseline, every key counts) and marks
    /// it and its hooks.
    fn watch_git_dir(&self, st: &mut State, git_dir: &Path) {
        self.mark(st, git_dir, ENTRIES_AND_WRITES);
        let hooks = git_dir.join("hooks");
        if hooks.is_dir() {
            self.mark(st, &hooks, ENTRIES_AND_WRITES);
        }
        st.repos.add(git_dir, true);
    }

    /// A tool changed the config file `file`: what it added that runs goes.
    fn config_changed(&self, st: &mut State, file: &Path) {
        let ws = st.targets.workspace.clone();
        let Some(w) = st.repos.files.get(file) else {
            return;
        };
        let git_dir = w.git_dir.clone();
        let after = match git::read_config(file) {
            Ok(Some(b)) => b,
            Ok(None) => return,
            Err(e) => {
                let why = format!("a config git would read that cannot be checked ({e})");
                self.quarantine(st, file, &why);
                st.repos.settled(file, None);
                return;
            }
        };
        let (findings, replacement) = match git::judge(w.baseline.as_deref(), &after, &git_dir, &ws)
        {
            Verdict::Clean(b) => {
                st.repos.settled(file, Some(b));
                return;
            }
            Verdict::Restore {
                findings,
                replacement,
            } => (findings, replacement),
        };
        let keys: Vec<String> = findings
            .iter()
            .map(|f| f.key.clone())
            .filter(|k| !k.is_empty())
            .collect();
        let keys = if keys.is_empty() {
            "a line git cannot parse".to_string()
        } else {
            keys.join(", ")
        };
        let refused = format!(
            "{keys} is not allowed from a sandboxed tool (git would run it outside the sandbox)"
        );
        let Some(clean) = replacement else {
            self.quarantine(st, file, &refused);
            st.repos.settled(file, None);
            return;
        };
        match git::replace_file(file, &clean) {
            Ok(kept) => {
                st.repos.settled(file, Some(clean));
                let at = kept
                    .and_then(|k| self.keep(&k, file))
                    .map(|q| format!("; the tool's version is in quarantine at {}", q.display()))
                    .unwrap_or_default();
                tracing::warn!(path = %file.display(), keys = %keys, "guard: a tool gave a Git config keys that run programs; taken out");
                let shown = self.shown(st, file);
                self.deny(
                    st,
                    format!("[toolsrv: {shown}: {refused}: taken out again{at}]"),
                );
            }
            Err(e) => {
                tracing::error!(path = %file.display(), error = %e, "guard: cannot put back a Git config; moving it to quarantine");
                self.quarantine(st, file, &refused);
                st.repos.settled(file, None);
            }
        }
    }

    /// Moves the tool's version `kept` of `original` to quarantine; where.
    fn keep(&self, kept: &Path, original: &Path) -> Option<PathBuf> {
        let q = self.watch.quarantine()?;
        let note = format!("the version of {} a tool wrote", original.display());
        match q.move_in_noted(kept, Some(&note)) {
            Ok(r) => Some(r.path),
            Err(e) => {
                tracing::warn!(error = %e, "guard: cannot quarantine a tool's version of a Git config; removed");
                let _ = std::fs::remove_file(kept);
                None
            }
        }
    }

    /// Moves `path` to quarantine, logs it and records the denial.
    fn quarantine(&self, st: &mut State, path: &Path, why: &str) {
        let Some(q) = self.watch.quarantine() else {
            return;
        };
        let shown = self.shown(st, path);
        match q.move_in_noted(path, Some(why)) {
            Ok(r) => {
                tracing::warn!(path = %path.display(), quarantined = %r.path.display(), reason = why, "guard: moved what a tool made to quarantine");
                self.deny(
                    st,
                    format!(
                        "[toolsrv: {shown}: {why}; a sandboxed tool may not leave it there: moved to quarantine at {}]",
                        r.path.display()
                    ),
                );
            }
            Err(toolsrv_watch::QuarantineError::Missing(_)) => {}
            Err(e) => {
                tracing::error!(path = %path.display(), error = %e, reason = why, "guard: cannot move what a tool made to quarantine");
                self.deny(
                    st,
                    format!("[toolsrv: {shown}: {why}; it could not be moved to quarantine ({e}): remove it before running git or the program that reads it]"),
                );
            }
        }
    }

    /// Marks `dir` (an inode mark), once.
    pub(super) fn mark(&self, st: &mut State, dir: &Path, kinds: toolsrv_watch::Kinds) {
        if st.marked.contains(&(dir.to_path_buf(), false)) {
            return;
        }
        match self.watcher().watch_dir(dir, kinds) {
            Ok(()) => {
                st.marked.insert((dir.to_path_buf(), false));
            }
            Err(e) => tracing::debug!(error = %e, "guard: cannot watch a directory"),
        }
    }

    /// `path` as a run's result shows it: relative to the workspace inside it.
    fn shown(&self, st: &State, path: &Path) -> String {
        match path.strip_prefix(&st.targets.workspace) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
            _ => path.display().to_string(),
        }
    }

    fn deny(&self, st: &mut State, line: String) {
        if st.denials.len() >= DENIALS_MAX {
            st.denials.pop_front();
        }
        st.denials.push_back((std::time::Instant::now(), line));
    }
}
