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

mod events;
mod git;
mod repos;
mod targets;

use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use toolsrv_base::LockUnpoisoned;
use toolsrv_watch::{Attribution, Events, Kinds, Watcher};

pub(crate) use targets::Targets;

use crate::watch::Watch;

/// How long a run's end waits for the guard's events at most.
const SETTLE_LIMIT: Duration = Duration::from_secs(2);
/// Denials are kept this long for the runs that end after them.
const DENIALS_KEPT: Duration = Duration::from_secs(600);
/// At most this many denial lines end a run's result (then a count).
const LINES_PER_RUN: usize = 8;
/// At most this many denials are kept.
const DENIALS_MAX: usize = 256;

/// What the marks on a place ask for.
const ENTRIES: Kinds = Kinds::CREATED.with(Kinds::MOVED_TO);
const ENTRIES_AND_WRITES: Kinds = ENTRIES.with(Kinds::CLOSED_WRITE);

/// The guard of a server (see the module's note).
pub(crate) struct Guard {
    watch: Arc<Watch>,
    /// The watch's fanotify group (a guard is made only where there is one).
    watcher: Arc<Watcher>,
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
    repos: repos::Repos,
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
            watcher: watcher.clone(),
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
        &self.watcher
    }

    /// A confined run starts. Without exact attribution, what happened
    /// before is acted on first, while it is still taken for the human's.
    pub(crate) fn enter(&self) -> Entered {
        if !self.exact {
            self.catch_up();
        }
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
        let mut lines: Vec<String> = Vec::new();
        let mut more = 0;
        for (_, d) in st.denials.iter().filter(|(t, _)| *t >= run.since) {
            if lines.contains(d) {
                continue;
            }
            if lines.len() < LINES_PER_RUN {
                lines.push(d.clone());
            } else {
                more += 1;
            }
        }
        if more > 0 {
            lines.push(format!(
                "[toolsrv: and {more} more of the same kind: the server's log lists each (\"guard:\")]"
            ));
        }
        lines
    }

    /// Brings the events up to date and acts on each.
    pub(crate) fn catch_up(&self) {
        // Most runs end with nothing on its way: no round trip then.
        if !self.watcher().quiet() {
            if let Err(e) = self.watcher().sync(SETTLE_LIMIT) {
                tracing::warn!(error = %e, "guard: cannot bring the watcher's events up to date; acting on those delivered");
            }
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
        let suspect = !self.exact && self.active.load(Ordering::Acquire) > 0;
        let new: Vec<PathBuf> = targets
            .git_dirs
            .iter()
            .filter(|g| !st.repos.knows(g))
            .cloned()
            .collect();
        st.targets = targets;
        for g in new {
            self.learn_repo(&mut st, &g, suspect);
        }
        let ws = st.targets.workspace.clone();
        st.repos.rebaseline(&ws);
        for dir in st.repos.outside_dirs() {
            self.mark(&mut st, &dir, ENTRIES_AND_WRITES);
        }
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
        out.retain(|(p, _)| p.is_dir());
        out.sort();
        out.dedup();
        out
    }
}

/// Acts on events as they come, until the guard is gone.
fn serve(guard: Weak<Guard>) {
    loop {
        let Some(g) = guard.upgrade() else { return };
        // Events are taken under the state's lock only, so that a run's
        // `settle` never finds the queue empty while one is being handled.
        // (The watcher lives as long as the guard: its queue never closes
        // under it.)
        if !g.events.wait(Duration::from_millis(500)) {
            continue;
        }
        let mut st = g.state.lock_unpoisoned();
        while let Some(ev) = g.events.try_recv() {
            g.handle(&mut st, ev);
        }
    }
}
