//! The filesystem views of the sandboxed runs (`toolsrv_sandbox::View`): one
//! per policy (the main one and each profile in use), built on first use,
//! and kept up to date in place. A background thread brings each view up
//! to date about once a second, and within milliseconds when a covered path
//! is replaced (`trigger`): what appeared or was replaced on the host (a
//! secret file, a repository, a glob's new match, a socket under a
//! read-only rule, a rule path made later) is mounted into the view the
//! runs share, for the runs under way too; nothing is rebuilt, so a tool
//! that plants repositories cannot make every call build a view. A view
//! that cannot be brought up to date is marked stale: no run enters it
//! again, and the next run builds a new one. The thread builds the main
//! policy's view at startup; a run that finds its view missing or stale
//! waits for the build, on a blocking thread, not the runtime's. Runs hold
//! their view (an `Arc`) until they have started; an old view is dropped
//! with its last run.

mod layers;
mod trigger;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use toolsrv_base::LockUnpoisoned;
use toolsrv_sandbox::{PathContext, Policy};
use toolsrv_sandbox::{RulePaths, ServerFiles, Sources, View, ViewError};

/// How often the protected sets are gathered again.
const RESCAN: Duration = Duration::from_secs(1);
/// At most this many views are kept.
const KEPT: usize = 8;

/// One view and the policy it was built for.
struct Slot {
    policy: Arc<Policy>,
    view: Arc<View>,
    /// It could not be refreshed in place: no run enters it again.
    stale: AtomicBool,
}

/// The views, by policy.
pub(crate) struct Views {
    slots: Mutex<Vec<Arc<Slot>>>,
    workspace: PathBuf,
    server: ServerFiles,
    env: std::collections::HashMap<String, String>,
    /// The last root-only scan and the rules it was made for: a view rebuilt
    /// because its protected set changed reuses it.
    root_only: Mutex<Option<(Arc<RulePaths>, Vec<toolsrv_sandbox::Entry>)>>,
    /// Held while a view is built: a view many runs wait for is built once.
    building: Mutex<()>,
    /// The copy-on-write cache layers of this server.
    layers: Option<layers::Layers>,
    /// What acts on what tools make in the views' writable binds.
    guard: Option<Arc<crate::guard::Guard>>,
}

/// How many times a failed view build is planned and tried again.
const BUILD_TRIES: u32 = 2;

impl Views {
    /// The views of a server serving `workspace` (`--cwd`, canonical) whose
    /// own files are `server`; starts the rescan thread, which first builds
    /// the view of `main` (the policy in effect).
    pub(crate) fn start(
        workspace: &Path,
        server: ServerFiles,
        env: std::collections::HashMap<String, String>,
        main: Arc<Policy>,
        guard: Option<Arc<crate::guard::Guard>>,
    ) -> Arc<Views> {
        let mut server = server;
        let ctx = PathContext {
            cwd: workspace.to_path_buf(),
            workdir: None,
            workspace: None,
            env: env.clone(),
        };
        let layers = layers::Layers::make(&ctx);
        if let Some(l) = &layers {
            server.hidden.push(l.root.clone());
        }
        let views = Arc::new(Views {
            slots: Mutex::new(Vec::new()),
            workspace: workspace.to_path_buf(),
            server,
            env,
            root_only: Mutex::new(None),
            building: Mutex::new(()),
            layers,
            guard,
        });
        let weak = Arc::downgrade(&views);
        let started = std::thread::Builder::new()
            .name("toolsrv-view-rescan".into())
            .spawn(move || {
                if let Some(v) = weak.upgrade() {
                    // A failure is the first run's to report (it builds again).
                    if let Err(e) = v.get_blocking(&main) {
                        tracing::warn!(error = %e, "filesystem view: the build at startup failed; the first sandboxed run tries again");
                    }
                }
                rescan(weak)
            });
        if let Err(e) = started {
            tracing::error!(error = %e, "cannot start the filesystem view rescan; protected paths created later are not protected");
        }
        views
    }

    /// The sources of a view for `policy`.
    fn sources(&self, policy: &Policy) -> Sources {
        let ctx = self.ctx();
        let (deny_read, deny_write) = policy.deny_lists(&ctx);
        let rules = self.rule_paths(policy);
        Sources {
            ctx,
            workspace: self.workspace.clone(),
            server: self.server.clone(),
            deny_read,
            deny_write,
            rules,
            layers: self.layers.as_ref().map(|l| l.dir.clone()),
        }
    }

    fn ctx(&self) -> PathContext {
        PathContext {
            cwd: self.workspace.clone(),
            workdir: None,
            workspace: None,
            env: self.env.clone(),
        }
    }

    /// `policy`'s rule paths with `{CWD}` as the workspace, and the
    /// symbolic links on the way to them.
    fn rule_paths(&self, policy: &Policy) -> RulePaths {
        let ctx = self.ctx();
        let resolved = policy.resolve_whole(&ctx, &[]);
        let writable: Vec<PathBuf> = resolved.rw.iter().chain(&resolved.rwx).cloned().collect();
        let caches = toolsrv_sandbox::caches::expanded(&ctx);
        RulePaths {
            cow: writable
                .iter()
                .filter(|w| caches.contains(w))
                .cloned()
                .collect(),
            writable,
            readable: resolved.ro.iter().chain(&resolved.rox).cloned().collect(),
            links: policy.rule_links(&ctx),
        }
    }

    /// On a server running as root whose tools run as root (no tools' user
    /// namespace, `identity::tools`, whose ids make ordinary permission
    /// checks hide these): the root-only files under the read rules (hidden
    /// unless a rule names them; CONTRACT §13).
    fn root_only(&self, rules: &Arc<RulePaths>) -> Vec<toolsrv_sandbox::Entry> {
        if toolsrv_base::effective_uid() != 0 || toolsrv_sandbox::tools::in_force().is_some() {
            return Vec::new();
        }
        let mut cache = self.root_only.lock_unpoisoned();
        if let Some((r, found)) = &*cache {
            if **r == **rules {
                return found.clone();
            }
        }
        let started = std::time::Instant::now();
        let (found, truncated) = toolsrv_sandbox::rootonly::root_only(rules);
        tracing::debug!(
            count = found.len(),
            took_ms = started.elapsed().as_millis() as u64,
            "filesystem view: root-only files under read rules"
        );
        if truncated {
            tracing::info!(
                budget = toolsrv_sandbox::rootonly::SCAN_BUDGET,
                "filesystem view: the scan for root-only files under read rules (ro rules first, then rox) stopped at its budget; root-only files beyond it are readable to tools"
            );
        }
        *cache = Some((rules.clone(), found.clone()));
        found
    }

    /// The current view for `policy`; when there is none or it is stale,
    /// built on a blocking thread while this waits.
    pub(crate) async fn get(
        self: &Arc<Self>,
        policy: &Arc<Policy>,
    ) -> Result<Arc<View>, ViewError> {
        if let Some(ready) = self.ready(policy) {
            return Ok(ready);
        }
        let (views, p) = (self.clone(), policy.clone());
        match tokio::task::spawn_blocking(move || views.get_blocking(&p)).await {
            Ok(built) => built,
            Err(e) => Err(ViewError::Step {
                step: "build",
                path: self.workspace.clone(),
                source: std::io::Error::other(e.to_string()),
            }),
        }
    }

    /// The current, fresh view for `policy`, if there is one.
    fn ready(&self, policy: &Arc<Policy>) -> Option<Arc<View>> {
        let slots = self.slots.lock_unpoisoned();
        slots
            .iter()
            .find(|s| Arc::ptr_eq(&s.policy, policy) && !s.stale.load(Ordering::Relaxed))
            .map(|s| s.view.clone())
    }

    /// As [`Views::get`], on the calling thread: builds the view when there
    /// is none or it is stale (once, however many threads ask at a time).
    fn get_blocking(&self, policy: &Arc<Policy>) -> Result<Arc<View>, ViewError> {
        if let Some(ready) = self.ready(policy) {
            return Ok(ready);
        }
        let _building = self.building.lock_unpoisoned();
        if let Some(ready) = self.ready(policy) {
            return Ok(ready);
        }
        // A tool may change the workspace while the view is planned and
        // built (a directory on the way to a protected path replaced): plan
        // again from what is there, a few times, before giving up.
        let mut tries = 0;
        let view = loop {
            let sources = self.sources(policy);
            let rules = Arc::new(sources.rules.clone());
            let started = std::time::Instant::now();
            let extra = self.root_only(&rules);
            match View::build(&sources, &extra) {
                Ok(view) => {
                    log_built(&view, started.elapsed());
                    break Arc::new(view);
                }
                Err(e) if tries < BUILD_TRIES => {
                    tries += 1;
                    tracing::warn!(error = %e, tries, "filesystem view: build failed; planning it again");
                }
                Err(e) => return Err(e),
            }
        };
        let slot = Arc::new(Slot {
            policy: policy.clone(),
            view: view.clone(),
            stale: AtomicBool::new(false),
        });
        let mut slots = self.slots.lock_unpoisoned();
        slots.retain(|s| !(Arc::ptr_eq(&s.policy, policy) || s.stale.load(Ordering::Relaxed)));
        if slots.len() >= KEPT {
            slots.remove(0);
        }
        slots.push(slot);
        drop(slots);
        self.publish();
        Ok(view)
    }

    /// Tells the guard what the views' writable binds, missing protected
    /// paths, Git directories and writable homes are now.
    fn publish(&self) {
        let Some(guard) = &self.guard else { return };
        let slots: Vec<Arc<Slot>> = self.slots.lock_unpoisoned().clone();
        let mut all = crate::guard::Targets {
            workspace: self.workspace.clone(),
            ..Default::default()
        };
        for s in slots.iter().filter(|s| !s.stale.load(Ordering::Relaxed)) {
            all.merge(self.targets(s));
        }
        guard.update(all);
    }

    /// What the guard watches in the view of `slot`.
    fn targets(&self, slot: &Slot) -> crate::guard::Targets {
        let plan = slot.view.plan();
        let rules = self.rule_paths(&slot.policy);
        let home = self
            .ctx()
            .expand("~")
            .ok()
            .and_then(|h| std::fs::canonicalize(h).ok());
        crate::guard::Targets {
            workspace: self.workspace.clone(),
            writable: plan
                .binds
                .iter()
                .filter(|b| b.writable && b.dir && b.layer.is_none())
                .map(|b| b.path.clone())
                .collect(),
            // Every protected path in a writable bind, missing or not: one
            // that exists now may be gone later (the human removed it, or
            // the guard moved a tool's), and a tool's new one must not stay
            // whatever the plan of the moment says.
            creatable: plan
                .creatable
                .iter()
                .cloned()
                .chain(
                    slot.view
                        .protected()
                        .entries
                        .iter()
                        .map(|e| e.path.clone())
                        .filter(|p| plan.bind_of(p).is_some_and(|b| b.writable && b.path != *p)),
                )
                .collect(),
            homes: home
                .filter(|h| plan.bind_of(h).is_some_and(|b| b.writable))
                .into_iter()
                .collect(),
            named: rules
                .writable
                .iter()
                .chain(&rules.readable)
                .cloned()
                .collect(),
            git_dirs: slot.view.protected().git_dirs.clone(),
            ignored: self.server.hidden.clone(),
        }
    }

    /// Has the guard act on what tools made so far (before a gathering, so
    /// that a tool's new protected path is moved, not protected in place).
    fn settle_guard(&self) {
        if let Some(g) = &self.guard {
            g.catch_up();
        }
    }
}

/// Says what a new view protects: counts at `info`, the paths at `debug`
/// (a root server's view covers thousands of paths: a line of them per
/// build made the log unreadable).
fn log_built(view: &View, took: Duration) {
    let plan = view.plan();
    let set = view.protected();
    tracing::info!(
        binds = plan.binds.len(),
        covers = plan.covers.len(),
        pins = plan.pins.len(),
        watched = plan.creatable.len(),
        protected = set.entries.len(),
        took_ms = took.as_millis() as u64,
        "filesystem view built"
    );
    tracing::debug!(
        binds = %list(plan.binds.iter().map(|b| b.path.as_path())),
        covers = %list(plan.covers.iter().map(|c| c.path())),
        "filesystem view: what it binds and covers"
    );
    if !plan.creatable.is_empty() {
        tracing::debug!(
            paths = %list(plan.creatable.iter().map(PathBuf::as_path)),
            "filesystem view: protected paths that do not exist yet in a writable rule (watched)"
        );
    }
    if set.truncated {
        tracing::warn!("filesystem view: a glob or the repository scan stopped at its budget; some matches are not protected");
    }
}

fn list<'a>(paths: impl Iterator<Item = &'a Path>) -> String {
    paths
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Brings each view up to date once a second, and soon after a covered
/// path's directory changes, until the views are dropped: what appeared or
/// was replaced on the host is protected in place, for the runs under way
/// too (`View::refresh`); a view that cannot be refreshed is marked stale
/// and built again for the next run. Refreshes woken by the trigger are at
/// least [`WOKEN_GAP`] apart (a tool that churns a watched directory costs
/// at most ten gatherings a second).
fn rescan(views: Weak<Views>) {
    let mut trigger = trigger::Trigger::new();
    let mut last = std::time::Instant::now();
    // The first round at once: it sets the trigger's watches for the view
    // built at startup.
    let mut first = true;
    loop {
        if !std::mem::take(&mut first) && trigger.wait(RESCAN.saturating_sub(last.elapsed())) {
            std::thread::sleep(WOKEN_GAP.saturating_sub(last.elapsed()));
        }
        last = std::time::Instant::now();
        let Some(v) = views.upgrade() else {
            return;
        };
        v.settle_guard();
        let slots: Vec<Arc<Slot>> = v.slots.lock_unpoisoned().clone();
        for s in &slots {
            if s.stale.load(Ordering::Relaxed) {
                continue;
            }
            v.refresh(s);
            let plan = s.view.plan();
            trigger.watch(
                plan.covers
                    .iter()
                    .map(|c| c.path())
                    .filter(|p| plan.bind_of(p).is_some_and(|b| b.writable)),
            );
        }
        v.publish();
    }
}

/// The shortest time between two refreshes the trigger woke.
const WOKEN_GAP: Duration = Duration::from_millis(100);

impl Views {
    /// Refreshes the view of `slot` in place (see [`rescan`]).
    fn refresh(&self, slot: &Slot) {
        let sources = self.sources(&slot.policy);
        let rules = Arc::new(sources.rules.clone());
        let extra = self.root_only(&rules);
        match slot.view.refresh(&sources, &extra) {
            Ok(r) => {
                if r.added > 0 {
                    tracing::info!(
                        added = r.added,
                        pending = r.pending.len(),
                        "filesystem view: protected what appeared on the host, in place"
                    );
                    tracing::debug!(paths = %list(r.paths.iter().map(PathBuf::as_path)), "filesystem view: added in place");
                }
                if !r.pending.is_empty() {
                    tracing::debug!(paths = %list(r.pending.iter().map(PathBuf::as_path)), "filesystem view: not in place yet (a path changed meanwhile); tried again");
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "filesystem view: cannot be brought up to date in place; the next run gets a new one");
                slot.stale.store(true, Ordering::Relaxed);
            }
        }
    }
}
