//! The filesystem views of the sandboxed runs (`toolsrv_sandbox::view`): one
//! per policy (the main one and each profile in use), built on first use,
//! and rebuilt when what they protect changes. A background thread gathers
//! each view's protected set again about once a second (the fixed lists,
//! the repositories, the globs' matches) and the policy's rule paths, and
//! marks a view whose set or rule paths differ stale; no run enters a stale
//! view. The thread builds the main policy's view at startup and a stale
//! view that runs used since the last rescan again at once; a run that finds
//! its view missing or stale waits for the build, on a blocking thread, not
//! the runtime's (a root server's first build scans for root-only files for
//! about a tenth of a second, which would stall every connection). Runs hold their
//! view (an `Arc`) until they have started; an old view is dropped with its
//! last run.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use toolsrv_base::LockUnpoisoned;
use toolsrv_sandbox::policy::{PathContext, Policy};
use toolsrv_sandbox::view::{ProtectedSet, RulePaths, ServerFiles, Sources, View, ViewError};

/// How often the protected sets are gathered again.
const RESCAN: Duration = Duration::from_secs(1);
/// At most this many views are kept.
const KEPT: usize = 8;

/// One view and what it was built from.
struct Slot {
    policy: Arc<Policy>,
    view: Arc<View>,
    sources: Sources,
    rules: Arc<RulePaths>,
    stale: AtomicBool,
    /// Handed to a run since the last rescan: rebuilt at once when stale.
    used: AtomicBool,
}

/// The views, by policy.
pub(crate) struct Views {
    slots: Mutex<Vec<Arc<Slot>>>,
    workspace: PathBuf,
    server: ServerFiles,
    env: std::collections::HashMap<String, String>,
    /// The last root-only scan and the rules it was made for: a view rebuilt
    /// because its protected set changed reuses it.
    root_only: Mutex<Option<(Arc<RulePaths>, Vec<toolsrv_sandbox::view::Entry>)>>,
    /// Held while a view is built: a view many runs wait for is built once.
    building: Mutex<()>,
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
    ) -> Arc<Views> {
        let views = Arc::new(Views {
            slots: Mutex::new(Vec::new()),
            workspace: workspace.to_path_buf(),
            server,
            env,
            root_only: Mutex::new(None),
            building: Mutex::new(()),
        });
        let weak = Arc::downgrade(&views);
        let started = std::thread::Builder::new()
            .name("toolsrv-view-rescan".into())
            .spawn(move || {
                if let Some(v) = weak.upgrade() {
                    // A failure is the first run's to report (it builds again).
                    if let Err(e) = v.get_blocking(&main, false) {
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
        RulePaths {
            writable: resolved.rw.iter().chain(&resolved.rwx).cloned().collect(),
            readable: resolved.ro.iter().chain(&resolved.rox).cloned().collect(),
            links: policy.rule_links(&ctx),
        }
    }

    /// On a server running as root whose tools run as root (no tools' user
    /// namespace, `identity::tools`, whose ids make ordinary permission
    /// checks hide these): the root-only files under the read rules (hidden
    /// unless a rule names them; CONTRACT §13).
    fn root_only(&self, rules: &Arc<RulePaths>) -> Vec<toolsrv_sandbox::view::Entry> {
        if toolsrv_base::effective_uid() != 0
            || toolsrv_sandbox::identity::tools::in_force().is_some()
        {
            return Vec::new();
        }
        let mut cache = self.root_only.lock_unpoisoned();
        if let Some((r, found)) = &*cache {
            if **r == **rules {
                return found.clone();
            }
        }
        let started = std::time::Instant::now();
        let (found, truncated) = toolsrv_sandbox::view::rootonly::root_only(rules);
        tracing::debug!(
            count = found.len(),
            took_ms = started.elapsed().as_millis() as u64,
            "filesystem view: root-only files under read rules"
        );
        if truncated {
            tracing::info!(
                budget = toolsrv_sandbox::view::rootonly::SCAN_BUDGET,
                "filesystem view: the scan for root-only files under read rules (ro rules first, then rox) stopped at its budget; root-only files beyond it are readable to tools"
            );
        }
        *cache = Some((rules.clone(), found.clone()));
        found
    }

    /// The current view for `policy`, and its rule paths; when there is
    /// none or it is stale, built on a blocking thread while this waits.
    pub(crate) async fn get(
        self: &Arc<Self>,
        policy: &Arc<Policy>,
    ) -> Result<(Arc<View>, Arc<RulePaths>), ViewError> {
        if let Some(ready) = self.ready(policy, true) {
            return Ok(ready);
        }
        let (views, p) = (self.clone(), policy.clone());
        match tokio::task::spawn_blocking(move || views.get_blocking(&p, true)).await {
            Ok(built) => built,
            Err(e) => Err(ViewError::Step {
                step: "build",
                path: self.workspace.clone(),
                source: std::io::Error::other(e.to_string()),
            }),
        }
    }

    /// The current, fresh view for `policy`, if there is one; marked used
    /// when it is for a run (`for_run`), not for the views' own thread.
    fn ready(&self, policy: &Arc<Policy>, for_run: bool) -> Option<(Arc<View>, Arc<RulePaths>)> {
        let slots = self.slots.lock_unpoisoned();
        let s = slots
            .iter()
            .find(|s| Arc::ptr_eq(&s.policy, policy) && !s.stale.load(Ordering::Relaxed))?;
        if for_run {
            s.used.store(true, Ordering::Relaxed);
        }
        Some((s.view.clone(), s.rules.clone()))
    }

    /// As [`Views::get`], on the calling thread: builds the view when there
    /// is none or it is stale (once, however many threads ask at a time);
    /// `for_run` as for [`Views::ready`].
    fn get_blocking(
        &self,
        policy: &Arc<Policy>,
        for_run: bool,
    ) -> Result<(Arc<View>, Arc<RulePaths>), ViewError> {
        if let Some(ready) = self.ready(policy, for_run) {
            return Ok(ready);
        }
        let _building = self.building.lock_unpoisoned();
        if let Some(ready) = self.ready(policy, for_run) {
            return Ok(ready);
        }
        // A tool may change the workspace while the view is planned and
        // built (a directory on the way to a protected path replaced): plan
        // again from what is there, a few times, before giving up.
        let mut tries = 0;
        let (sources, rules, view) = loop {
            let sources = self.sources(policy);
            let rules = Arc::new(sources.rules.clone());
            let started = std::time::Instant::now();
            let extra = self.root_only(&rules);
            match View::build(&sources, &extra) {
                Ok(view) => {
                    log_built(&view, started.elapsed());
                    break (sources, rules, Arc::new(view));
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
            sources,
            rules: rules.clone(),
            stale: AtomicBool::new(false),
            used: AtomicBool::new(for_run),
        });
        let mut slots = self.slots.lock_unpoisoned();
        slots.retain(|s| !(Arc::ptr_eq(&s.policy, policy) || s.stale.load(Ordering::Relaxed)));
        if slots.len() >= KEPT {
            slots.remove(0);
        }
        slots.push(slot);
        Ok((view, rules))
    }
}

/// Says what a new view protects.
fn log_built(view: &View, took: Duration) {
    let plan = view.plan();
    let list = |v: &mut dyn Iterator<Item = &Path>| {
        v.map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    tracing::info!(
        covers = plan.covers.len(),
        pins = plan.pins.len(),
        protected = view.protected().entries.len(),
        took_ms = took.as_millis() as u64,
        paths = %list(&mut plan.covers.iter().map(|c| c.path())),
        "filesystem view built"
    );
    if !plan.creatable.is_empty() {
        tracing::warn!(
            paths = %list(&mut plan.creatable.iter().map(PathBuf::as_path)),
            "filesystem view: these protected paths do not exist and lie directly in a writable rule's directory: a tool can create them; they are protected from the next run once they exist"
        );
    }
    if view.protected().truncated {
        tracing::warn!("filesystem view: a glob or the repository scan stopped at its budget; some matches are not protected");
    }
}

/// Gathers each view's protected set again, once a second, until the views
/// are dropped; a view that changed is marked stale, and built again at once
/// if runs used it since the last rescan (others when a run asks for them).
fn rescan(views: Weak<Views>) {
    loop {
        std::thread::sleep(RESCAN);
        let Some(v) = views.upgrade() else {
            return;
        };
        let slots: Vec<Arc<Slot>> = v.slots.lock_unpoisoned().clone();
        drop(v);
        for s in slots {
            if s.stale.load(Ordering::Relaxed) {
                continue;
            }
            let used = s.used.swap(false, Ordering::Relaxed);
            let now = ProtectedSet::gather(&s.sources);
            if now.incomplete {
                // Out of descriptors, say: no reason to rebuild.
                continue;
            }
            if &now == s.view.protected() {
                continue;
            }
            tracing::debug!("filesystem view: the protected set changed; runs get a new view");
            s.stale.store(true, Ordering::Relaxed);
            if !used {
                continue;
            }
            let Some(v) = views.upgrade() else {
                return;
            };
            if let Err(e) = v.get_blocking(&s.policy, false) {
                tracing::debug!(error = %e, "filesystem view: the rebuild failed; the next run tries again");
            }
        }
    }
}
