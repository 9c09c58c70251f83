//! The guard: nothing a sandboxed tool leaves behind runs later for the
//! human, and protecting a path leaves nothing in the user's directories.
//!
//! The view makes what exists read-only or hidden; what does not exist yet
//! cannot be made uncreatable without putting something in its place (a
//! placeholder, which litters the user's directories). So the guard watches
//! the writable binds of the views with the server's fanotify group
//! (`crate::watch`) and acts on what a tool makes there:
//!
//! - a missing protected path (`.mcp.json`, `.claude/`, `~/.aws/`...), a
//!   directory on the way to one, or a new dot entry at the top of a
//!   writable `$HOME`: moved to the quarantine in the server's state;
//! - Git: a repository's `config` stays writable (git replaces it by lock
//!   and rename), and a version a tool gave a key through which git runs
//!   something (`core.fsmonitor`, `core.hooksPath`, `alias.x = !…`, ...) is
//!   replaced by the same file without those keys (or the version before),
//!   the tool's kept in quarantine; a tool's new `commondir`,
//!   `config.worktree`, `worktrees/`, `modules/` or hook, and a new `.git`
//!   (a file or a directory, a repository a tool made or planted) whose
//!   inspection finds something that would run, are moved to quarantine.
//!
//! Each action is logged and named in the result of the run that ended
//! after it (`[toolsrv: …]`). Before a confined run is reported ended, the
//! guard brings its events up to date ([`Guard::settle`]), so that what the
//! run made is gone by then. Where the fanotify group is privileged and read
//! in the tools PID namespace, a change is exactly a tool's or someone
//! else's; elsewhere (a server that is not root) a change is taken for a
//! tool's while a confined run is under way, and for the human's otherwise.
//! See docs/sandbox-policy.md, "What a tool leaves behind".

mod git;
mod targets;

use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use toolsrv_base::LockUnpoisoned;
use toolsrv_gitguard::{inspect_with, looks_like_git_dir, InspectOptions, HOOKS};
use toolsrv_watch::{Attribution, Event, EventKind, Events, Kinds, Origin, Watcher};

pub(crate) use targets::Targets;

use crate::watch::Watch;

/// How long a run's end waits for the guard's events at most.
const SETTLE_LIMIT: Duration = Duration::from_secs(2);
/// Denials are kept this long for the runs that end after them.
const DENIALS_KEPT: Duration = Duration::from_secs(600);
/// At most this many denials are kept.
const DENIALS_MAX: usize = 256;

/// What the marks on a place ask for.
const ENTRIES: Kinds = Kinds::CREATED.with(Kinds::MOVED_TO);
const ENTRIES_AND_WRITES: Kinds = ENTRIES.with(Kinds::CLOSED_WRITE);

/// The guard of a server (see the module's note).
pub(crate) struct Guard {
    watch: Arc<Watch>,
    exact: bool,
    /// Confined runs under way.
    active: AtomicUsize,
    state: Mutex<State>,
    events: Events,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard").field("exact", &self.exact).finish()
    }
}

#[derive(Default)]
struct State {
    targets: Targets,
    /// Places marked, and whether as a filesystem.
    marked: HashSet<(PathBuf, bool)>,
    repos: HashMap<PathBuf, git::Repo>,
    denials: VecDeque<(Instant, String)>,
}

/// A confined run under way, for [`Guard::settle`].
pub(crate) struct Entered {
    since: Instant,
}

impl Guard {
    /// The guard of `watch`, or `None` where it has no fanotify group or no
    /// quarantine (logged at startup by `Watch::start`). Starts the thread
    /// that acts on events.
    pub(crate) fn start(watch: Arc<Watch>) -> Option<Arc<Guard>> {
        let watcher = watch.watcher()?;
        watch.quarantine()?;
        let exact = watcher.attribution() == Attribution::Exact;
        let guard = Arc::new(Guard {
            events: watcher.subscribe(),
            exact,
            active: AtomicUsize::new(0),
            state: Mutex::new(State::default()),
            watch: watch.clone(),
        });
        let weak = Arc::downgrade(&guard);
        let started = std::thread::Builder::new()
            .name("toolsrv-guard".into())
            .spawn(move || serve(weak));
        if let Err(e) = started {
            tracing::error!(error = %e, "cannot start the guard; what tools leave behind is not checked");
            return None;
        }
        Some(guard)
    }

    fn watcher(&self) -> &Watcher {
        self.watch
            .watcher()
            .expect("a guard is made only with a watcher")
    }

    /// A confined run starts.
    pub(crate) fn enter(&self) -> Entered {
        self.active.fetch_add(1, Ordering::AcqRel);
        Entered {
            since: Instant::now(),
        }
    }

    /// A confined run ended: every event of what it did is acted on, and
    /// the denials since it started are returned (`[toolsrv: …]` lines).
    pub(crate) fn settle(&self, run: Entered) -> Vec<String> {
        self.catch_up();
        self.active.fetch_sub(1, Ordering::AcqRel);
        let st = self.state.lock_unpoisoned();
        st.denials
            .iter()
            .filter(|(t, _)| *t >= run.since)
            .map(|(_, d)| d.clone())
            .collect()
    }

    /// Brings the events up to date and acts on each.
    pub(crate) fn catch_up(&self) {
        if let Err(e) = self.watcher().sync(SETTLE_LIMIT) {
            tracing::warn!(error = %e, "guard: cannot bring the watcher's events up to date; acting on those delivered");
        }
        let mut st = self.state.lock_unpoisoned();
        while let Some(ev) = self.events.try_recv() {
            self.handle(&mut st, ev);
        }
    }

    /// The views' places, gathered again (at each view build and rescan):
    /// marks what is new, learns new Git directories, and brings each
    /// repository's baseline up to date with what the human changed.
    pub(crate) fn update(&self, targets: Targets) {
        self.catch_up();
        let mut st = self.state.lock_unpoisoned();
        let places = self.places(&targets);
        for (p, fs) in places {
            if st.marked.contains(&(p.clone(), fs)) {
                continue;
            }
            let kinds = if fs { ENTRIES } else { ENTRIES_AND_WRITES };
            let r = if fs {
                self.watcher().watch_filesystem(&p, kinds)
            } else {
                self.watcher().watch_dir(&p, kinds)
            };
            match r {
                Ok(()) => {
                    st.marked.insert((p, fs));
                }
                Err(e) => tracing::debug!(error = %e, "guard: cannot watch a place"),
            }
        }
        let run_since = self.active.load(Ordering::Acquire) > 0;
        for g in &targets.git_dirs {
            if !st.repos.contains_key(g) {
                self.learn_repo(&mut st, g, run_since && !self.exact);
            }
        }
        st.targets = targets;
        self.rebaseline(&mut st);
        let old = Instant::now().checked_sub(DENIALS_KEPT);
        while st
            .denials
            .front()
            .is_some_and(|(t, _)| old.is_some_and(|o| *t < o))
        {
            st.denials.pop_front();
        }
    }

    /// What to mark for `t`: with exact attribution, the filesystem of each
    /// writable bind (entries made anywhere in it) and each Git directory
    /// (writes to `config`); else each directory whose entries matter.
    fn places(&self, t: &Targets) -> Vec<(PathBuf, bool)> {
        let mut out = Vec::new();
        if self.exact {
            out.extend(t.writable.iter().map(|w| (w.clone(), true)));
        } else {
            out.extend(t.writable.iter().map(|w| (w.clone(), false)));
            out.extend(t.homes.iter().map(|h| (h.clone(), false)));
            for c in &t.creatable {
                if let Some(a) = c.ancestors().skip(1).find(|a| a.is_dir()) {
                    out.push((a.to_path_buf(), false));
                }
            }
        }
        for g in &t.git_dirs {
            out.push((g.clone(), false));
            let hooks = g.join("hooks");
            if hooks.is_dir() {
                out.push((hooks, false));
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// Starts keeping `git_dir` (found by a rescan, or made by a tool):
    /// its config is the baseline unless `suspect` (made while a run was
    /// under way, without exact attribution), when it is inspected first.
    fn learn_repo(&self, st: &mut State, git_dir: &Path, suspect: bool) {
        if suspect {
            self.check_new_git(st, git_dir, git_dir.parent().unwrap_or(git_dir));
            if !git_dir.exists() {
                return;
            }
        }
        let config = git_dir.join("config");
        let baseline = git::read_config(&config).ok().flatten();
        st.repos.insert(
            git_dir.to_path_buf(),
            git::Repo {
                baseline,
                stamp: git::stamp(&config),
                suspect: None,
            },
        );
    }

    /// At each rescan: a config that changed without a tool's event is the
    /// human's (or a tool's whose event is still to come): adopted at once
    /// when it adds nothing that runs, else at the next rescan if still
    /// there.
    fn rebaseline(&self, st: &mut State) {
        let ws = st.targets.workspace.clone();
        for (g, repo) in st.repos.iter_mut() {
            let config = g.join("config");
            let now = git::stamp(&config);
            if now == repo.stamp {
                repo.suspect = None;
                continue;
            }
            let Ok(bytes) = git::read_config(&config) else {
                continue;
            };
            let adopt = match (&bytes, repo.suspect) {
                (_, Some(s)) if Some(s) == now => true,
                (None, _) => true,
                (Some(b), _) => matches!(
                    git::judge(repo.baseline.as_deref(), b, g, &ws),
                    git::Verdict::Clean(_)
                ),
            };
            if adopt {
                repo.baseline = bytes;
                repo.stamp = now;
                repo.suspect = None;
            } else {
                repo.suspect = now;
            }
        }
    }

    /// Whether an event's change is taken for a tool's.
    fn by_tool(&self, origin: Origin) -> bool {
        match origin {
            Origin::Tool { .. } => true,
            Origin::Other => false,
            Origin::Unknown => self.active.load(Ordering::Acquire) > 0,
        }
    }

    fn handle(&self, st: &mut State, ev: Event) {
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
            if ev.name == "config" {
                if let Some(repo) = st.repos.get_mut(&ev.dir) {
                    repo.baseline = git::read_config(&path).ok().flatten();
                    repo.stamp = git::stamp(&path);
                    repo.suspect = None;
                }
            }
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
        let name = ev.name.as_os_str();
        if name == ".git" {
            if ev.is_dir {
                self.watch_git_dir(st, path);
            } else if let Some(d) = path.parent() {
                // Its `gitdir:` is written after it is made.
                self.mark(st, d, ENTRIES_AND_WRITES);
            }
            self.check_new_git(st, path, ev.dir.as_path());
            return;
        }
        self.in_git_dir(st, ev, path);
    }

    /// A tool wrote `path` and closed it.
    fn written(&self, st: &mut State, ev: &Event, path: &Path) {
        if ev.name == ".git" && !ev.is_dir {
            self.check_new_git(st, path, ev.dir.as_path());
            return;
        }
        self.in_git_dir(st, ev, path);
    }

    /// What a tool did inside a Git directory: its config, its redirections,
    /// its hooks.
    fn in_git_dir(&self, st: &mut State, ev: &Event, path: &Path) {
        let name = ev.name.as_os_str();
        let dir = ev.dir.as_path();
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
        let is_git = |st: &State, d: &Path| st.repos.contains_key(d) || looks_like_git_dir(d);
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
            self.config_changed(st, dir);
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
            self.check_new_git(st, dir, dir.parent().unwrap_or(dir));
        }
    }

    /// A `.git` (file or directory) or a Git directory a tool made or
    /// planted: inspected; what would run goes to quarantine; a clean one
    /// is kept from now on.
    fn check_new_git(&self, st: &mut State, path: &Path, _worktree: &Path) {
        let opts = InspectOptions {
            workspace: Some(st.targets.workspace.clone()),
            ..InspectOptions::default()
        };
        let found = inspect_with(path, &opts);
        if found.findings.is_empty() && !found.truncated {
            for g in &found.git_dirs {
                if !st.repos.contains_key(g) && g.is_dir() {
                    self.watch_git_dir(st, g);
                }
            }
            return;
        }
        let why = found
            .findings
            .first()
            .map(|f| format!("{f}"))
            .unwrap_or_else(|| "too large to inspect".into());
        // A repository whose config alone carries keys: those go, it stays.
        let only_config = found
            .findings
            .iter()
            .all(|f| f.kind == toolsrv_gitguard::Kind::ConfigKey);
        let git_dir = if path.is_dir() {
            Some(path.to_path_buf())
        } else {
            None
        };
        if let (true, Some(g)) = (only_config, git_dir) {
            if !st.repos.contains_key(&g) {
                self.watch_git_dir(st, &g);
            }
            st.repos.entry(g.clone()).or_default();
            self.config_changed(st, &g);
            return;
        }
        self.quarantine(
            st,
            path,
            &format!("a Git directory or link that would run what a tool wrote ({why})"),
        );
    }

    /// Keeps `git_dir` (a tool's new one: no baseline) and marks it.
    fn watch_git_dir(&self, st: &mut State, git_dir: &Path) {
        self.mark(st, git_dir, ENTRIES_AND_WRITES);
        let hooks = git_dir.join("hooks");
        if hooks.is_dir() {
            self.mark(st, &hooks, ENTRIES_AND_WRITES);
        }
        st.repos.entry(git_dir.to_path_buf()).or_default();
    }

    fn mark(&self, st: &mut State, dir: &Path, kinds: Kinds) {
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

    /// A tool changed `git_dir/config`: what it added that runs goes.
    fn config_changed(&self, st: &mut State, git_dir: &Path) {
        let config = git_dir.join("config");
        let ws = st.targets.workspace.clone();
        let repo = st.repos.entry(git_dir.to_path_buf()).or_default();
        let after = match git::read_config(&config) {
            Ok(Some(b)) => b,
            Ok(None) => return,
            Err(e) => {
                let why = format!("a config git would read that cannot be checked ({e})");
                self.quarantine(st, &config, &why);
                return;
            }
        };
        match git::judge(repo.baseline.as_deref(), &after, git_dir, &ws) {
            git::Verdict::Clean(b) => {
                repo.baseline = Some(b);
                repo.stamp = git::stamp(&config);
                repo.suspect = None;
            }
            git::Verdict::Restore {
                findings,
                replacement,
            } => {
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
                let shown = self.shown(st, &config);
                match replacement {
                    Some(clean) => match git::replace_config(git_dir, &clean) {
                        Ok(kept) => {
                            let repo = st.repos.entry(git_dir.to_path_buf()).or_default();
                            repo.baseline = Some(clean);
                            repo.stamp = git::stamp(&config);
                            repo.suspect = None;
                            let at = kept
                                .and_then(|k| self.keep(&k, &config))
                                .map(|q| {
                                    format!(
                                        "; the tool's version is in quarantine at {}",
                                        q.display()
                                    )
                                })
                                .unwrap_or_default();
                            tracing::warn!(path = %config.display(), keys = %keys, "guard: a tool gave a Git config keys that run programs; taken out");
                            self.deny(st, format!("[toolsrv: {shown}: {keys} is not allowed from a sandboxed tool (git would run it outside the sandbox): taken out again{at}]"));
                        }
                        Err(e) => {
                            tracing::error!(path = %config.display(), error = %e, "guard: cannot put back a Git config; moving it to quarantine");
                            self.quarantine(
                                st,
                                &config,
                                &format!("{keys} is not allowed from a sandboxed tool"),
                            );
                        }
                    },
                    None => {
                        self.quarantine(
                            st,
                            &config,
                            &format!("{keys} is not allowed from a sandboxed tool"),
                        );
                        if let Some(r) = st.repos.get_mut(git_dir) {
                            r.baseline = None;
                            r.stamp = None;
                        }
                    }
                }
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
        st.denials.push_back((Instant::now(), line));
    }
}

/// Acts on events as they come, until the guard is gone.
fn serve(guard: Weak<Guard>) {
    loop {
        let Some(g) = guard.upgrade() else { return };
        let Some(ev) = g.events.recv_timeout(Duration::from_millis(500)) else {
            continue;
        };
        let mut st = g.state.lock_unpoisoned();
        g.handle(&mut st, ev);
        while let Some(ev) = g.events.try_recv() {
            g.handle(&mut st, ev);
        }
    }
}
