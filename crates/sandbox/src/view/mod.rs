//! The prepared filesystem view: a mount namespace, built once per (policy,
//! workspace, protected set), that every sandboxed child enters with `setns`
//! before Landlock.
//!
//! It is built from the rules, not from the host: its root is an empty
//! tmpfs holding only what leads to the rule paths, and each rule path is
//! bound into it read-only or writable as its rule says, so that what no
//! rule names (`/run`, `/tmp`, other users' homes, every socket there) does
//! not exist for a tool. Inside the binds, hidden paths are masked (an empty
//! read-only tmpfs over a directory, an empty read-only file over a file or
//! socket), read-only paths are bound read-only over themselves, the
//! sockets under read-only rules are masked, and the directories between a
//! writable bind and a protected path are pinned (bound onto themselves) so
//! that none can be renamed away. Landlock then grants each rule whole: no
//! carving. Nothing is created on the host. Where a root server's tools run
//! in a user namespace of their own (`crate::identity::tools`), the binds
//! that need it get that namespace's id maps (`plan::Bind::id_map`), and the
//! view's runs join it ([`View::user_ns`]).
//!
//! - [`protected`]: the protected set and where it comes from;
//! - `crate::policy::glob`: `deny_read` / `deny_write` globs (the
//!   policy's, expanded here and by the Landlock-only fallback);
//! - [`sockets`]: the host's bound pathname sockets;
//! - [`plan`]: from the rules and the set to the skeleton and the mounts;
//! - `build`: the mounts, on a dedicated thread; `sys`: their system calls.
//!
//! Where no mount namespace can be had, [`Mechanism::LandlockOnly`] says why,
//! and the server falls back to carving (`policy::carved_paths`).

mod build;
pub(crate) mod caches;
pub(crate) mod home;
pub(crate) mod live;
pub(crate) mod plan;
pub(crate) mod protected;
pub(crate) mod rootonly;
pub(crate) mod sockets;
mod sys;

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use toolsrv_base::LockUnpoisoned;

use crate::open::FileId;

pub use plan::{links_along, RulePaths};
pub(crate) use plan::{Cover, Plan};
pub(crate) use protected::ProtectedSet;
pub use protected::{Entry, Kind, ServerFiles, Sources};

use crate::identity::ToolNamespace;
use crate::workdir::WorkDir;

/// The server environment variable that forces the Landlock-only fallback
/// (`TOOLSRV_VIEW=off`), read before the environment is scrubbed.
pub const FORCE_ENV: &str = "TOOLSRV_VIEW";

/// How the filesystem is protected on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mechanism {
    /// A prepared mount namespace per policy, entered with `setns`.
    MountNamespace,
    /// Landlock alone (carving), and why.
    LandlockOnly(String),
}

impl Mechanism {
    /// Whether the view is in use.
    pub fn is_view(&self) -> bool {
        matches!(self, Mechanism::MountNamespace)
    }

    /// One line for the startup log and `toolsrv doctor`.
    pub fn describe(&self) -> String {
        match self {
            Mechanism::MountNamespace => "mount namespace: a view built from the rules (an empty root with each rule path bound into it, protected paths and sockets under read-only rules masked), entered with setns; Landlock grants each rule whole".to_string(),
            Mechanism::LandlockOnly(why) => format!(
                "Landlock only ({why}): protected paths are carved out of the rules, and the directories that hold them lose the right to create entries; metadata (mode, owner, times, xattrs) outside the writable rules is not protected"
            ),
        }
    }

    /// Why `force` (the value of [`FORCE_ENV`]) turns the view off, if it
    /// does (`off`, `0`, `false`, `none`).
    pub(crate) fn forced_off(force: Option<&str>) -> Option<String> {
        force
            .filter(|f| matches!(*f, "off" | "0" | "false" | "none"))
            .map(|f| format!("{FORCE_ENV}={f}"))
    }

    /// Why a view cannot serve runs that each enter their own user
    /// namespace (`containment`), if they do: the children of such a run
    /// cannot join a mount namespace the server owns.
    pub(crate) fn unreachable_from(containment: crate::contain::Mechanism) -> Option<String> {
        (containment == crate::contain::Mechanism::PidNamespace { user: true }).then(|| {
            "each run gets its own user namespace, from which the server's mount namespaces cannot be entered"
                .to_string()
        })
    }

    /// How this server protects the filesystem, decided once: the view,
    /// unless `force` turns it off, runs enter their own user namespace
    /// (`containment`), or a mount namespace cannot be made here (tried
    /// once, on a thread). `toolsrv doctor` decides with the same rules
    /// ([`crate::Facts::host`]).
    pub fn choose(force: Option<&str>, containment: crate::contain::Mechanism) -> Mechanism {
        if let Some(why) = Mechanism::forced_off(force) {
            return Mechanism::LandlockOnly(why);
        }
        let probed = Mechanism::probe(None);
        match Mechanism::unreachable_from(containment) {
            Some(why) if probed.is_view() => Mechanism::LandlockOnly(why),
            _ => probed,
        }
    }

    /// What this host offers: the view, unless `force` is `off` or a
    /// mount namespace cannot be made here (tried once, on a thread).
    pub fn probe(force: Option<&str>) -> Mechanism {
        if let Some(why) = Mechanism::forced_off(force) {
            return Mechanism::LandlockOnly(why);
        }
        // The smallest real view: an empty root with `/` in it, pivoted into.
        let tried = std::thread::Builder::new()
            .name("toolsrv-view-probe".into())
            .spawn(|| {
                let plan = Plan {
                    workspace: PathBuf::from("/"),
                    ..Plan::default()
                };
                build::build_here(&plan, None).map(drop)
            })
            .map_err(|e| e.to_string())
            .and_then(|h| {
                h.join()
                    .map_err(|_| "the probe panicked".to_string())?
                    .map_err(|e| e.to_string())
            });
        match tried {
            Ok(()) => Mechanism::MountNamespace,
            Err(e) => Mechanism::LandlockOnly(format!("no mount namespace can be made: {e}")),
        }
    }
}

/// Whether the file system of `path` takes the id maps of `tools` (a
/// writable rule there gets them, `plan::Bind::id_map`): tried on a detached
/// clone of its mount (with the mounts beneath it, then alone), which is
/// dropped; changes nothing. `Err` says why not, or what beneath it refuses.
pub(crate) fn id_maps_available(
    path: &std::path::Path,
    tools: &ToolNamespace,
) -> Result<(), String> {
    let fd = sys::clone_tree(path, true)
        .map_err(|e| format!("cannot clone the mount of {}: {e}", path.display()))?;
    match build::id_map(fd.as_fd(), tools.fd()) {
        IdMapped::Whole => Ok(()),
        IdMapped::TopOnly(why) => Err(format!(
            "{} takes them, a mount beneath it does not ({why}): that mount stays plain",
            path.display()
        )),
        IdMapped::No(why) => Err(format!(
            "the file system of {} takes no id-mapped mounts ({why})",
            path.display()
        )),
    }
}

/// How a bind that wanted the tools' id maps (`plan::Bind::id_map`) got them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdMapped {
    /// On its mount and every mount beneath it.
    Whole,
    /// On its own mount; the mounts beneath it (other file systems) refused
    /// them (why) and are plain binds.
    TopOnly(String),
    /// None: a plain bind (why): tools work there as the unprivileged host
    /// ids they are (`identity::tools`), and what they make there is owned by
    /// those ids on the host.
    No(String),
}

/// Why a view could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// A step failed.
    #[error("cannot build the filesystem view ({step} {}): {source}", path.display())]
    Step {
        /// The step.
        step: &'static str,
        /// The path it worked on.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// A built view: its namespace (alive as long as this value), the workspace
/// opened inside it, what it protects now, and the tools' user namespace its
/// id-mapped binds were made with (which its runs join).
#[derive(Debug)]
pub struct View {
    ns: OwnedFd,
    workspace: Arc<WorkDir>,
    tools: Option<Arc<ToolNamespace>>,
    not_id_mapped: Vec<(PathBuf, IdMapped)>,
    state: Mutex<State>,
    /// Held while the view is changed ([`View::refresh`], [`View::expose`]):
    /// one change at a time, each from the state the last one left.
    changing: Mutex<()>,
    /// Paths, as a request named them, known to be shown ([`View::unshown`]
    /// looks each up once).
    shown: Mutex<std::collections::HashSet<PathBuf>>,
}

/// What a view protects and what is mounted in it.
#[derive(Debug)]
struct State {
    /// The protected set it was last planned from (the rescan compares).
    set: Arc<ProtectedSet>,
    /// The rule paths it was last planned from.
    rules: RulePaths,
    /// The plan of what is mounted: every bind, pin and cover made so far.
    applied: Arc<Plan>,
    /// The identity of each covered path when it was covered: a protected
    /// file replaced by a new one is covered again.
    ids: HashMap<PathBuf, Option<FileId>>,
    /// Mount targets a refresh could not confirm (tried again next time).
    pending: Vec<PathBuf>,
    /// The roots of the copy-on-write caches, opened in the view.
    roots: crate::rules::ViewRoots,
}

/// What a [`View::refresh`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refreshed {
    /// Mounts added to the view (binds, pins, covers).
    pub added: usize,
    /// The paths of what was added (for the debug log).
    pub paths: Vec<PathBuf>,
    /// Mount targets still not in place (skipped: a path swapped for a link
    /// meanwhile, or gone); tried again at the next refresh.
    pub pending: Vec<PathBuf>,
}

/// Says which binds that wanted the tools' id maps did not get them whole.
fn log_not_id_mapped(list: &[(PathBuf, IdMapped)], tools: Option<&ToolNamespace>) {
    if list.is_empty() {
        return;
    }
    let paths = list
        .iter()
        .map(|(p, how)| match how {
            IdMapped::TopOnly(why) => format!("{} (not the mounts beneath it: {why})", p.display()),
            IdMapped::No(why) => format!("{} ({why})", p.display()),
            IdMapped::Whole => p.display().to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ");
    tracing::warn!(
        paths = %paths,
        base = tools.map_or(0, |t| t.base()),
        "filesystem view: binds without the tools' id maps (their file systems refuse them): tools work there as the unprivileged host ids they are, so they write only what those ids may, and what they make there is owned by them on the host"
    );
}

/// The plan of `sources` with `extra` entries protected too.
fn plan_for(set: &ProtectedSet, sources: &Sources, extra: &[Entry]) -> Plan {
    let mut planned = set.clone();
    planned.entries.extend(extra.iter().cloned());
    planned.entries.sort();
    planned
        .entries
        .dedup_by(|later, earlier| later.path == earlier.path);
    let shown: Vec<PathBuf> = sources
        .server
        .shown
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    Plan::new(
        &planned,
        &sources.rules,
        &shown,
        sources.layers.as_deref(),
        &sources.workspace,
    )
}

/// The identity each cover of `plan` had in `set` (and in `extra`).
fn cover_ids(plan: &Plan, set: &ProtectedSet, extra: &[Entry]) -> HashMap<PathBuf, Option<FileId>> {
    let ids: HashMap<&std::path::Path, Option<FileId>> = set
        .entries
        .iter()
        .chain(extra)
        .map(|e| (e.path.as_path(), e.id))
        .collect();
    plan.covers
        .iter()
        .map(|c| (c.path().to_path_buf(), ids.get(c.path()).copied().flatten()))
        .collect()
}

impl View {
    /// Builds the view of `sources.rules` protecting what `sources` name.
    /// `extra` entries (root-only files, `rootonly`) are protected too but
    /// not part of [`View::protected`], which the rescan compares.
    ///
    /// Where the tools' user namespace is in force
    /// (`identity::tools::in_force`), the binds that need them get its id
    /// maps, and the view's runs join it.
    pub fn build(sources: &Sources, extra: &[Entry]) -> Result<View, ViewError> {
        let set = ProtectedSet::gather(sources);
        let plan = plan_for(&set, sources, extra);
        let tools = crate::identity::tools::in_force().cloned();
        let built = build::build(&plan, tools.clone())?;
        log_not_id_mapped(&built.not_id_mapped, tools.as_deref());
        let ids = cover_ids(&plan, &set, extra);
        // What the build skipped is not taken for done: pending, tried
        // again by the next refresh.
        let pending = built.pending.clone();
        if !pending.is_empty() {
            tracing::warn!(
                count = pending.len(),
                paths = ?pending,
                "filesystem view: built without some of its mounts (a path went away or became a link meanwhile); the refresh tries them again"
            );
        }
        let mut applied = plan.clone();
        applied.binds.retain(|b| !pending.contains(&b.path));
        applied.pins.retain(|p| !pending.contains(p));
        applied
            .covers
            .retain(|c| !pending.iter().any(|q| q == c.path()));
        Ok(View {
            ns: built.ns,
            workspace: Arc::new(built.workspace),
            tools,
            not_id_mapped: built.not_id_mapped,
            state: Mutex::new(State {
                set: Arc::new(set),
                rules: sources.rules.clone(),
                applied: Arc::new(applied),
                ids,
                pending,
                roots: crate::rules::ViewRoots(Arc::new(built.roots)),
            }),
            changing: Mutex::new(()),
            shown: Mutex::new(std::collections::HashSet::new()),
        })
    }

    /// Brings the view up to date with `sources` (gathered again) in place,
    /// for the runs under way too: new binds, pins and covers are mounted in
    /// its namespace (see `view/live.rs`); nothing is taken away. A set that could
    /// not be gathered whole (`incomplete`) changes nothing.
    pub fn refresh(&self, sources: &Sources, extra: &[Entry]) -> Result<Refreshed, ViewError> {
        let set = ProtectedSet::gather(sources);
        if set.incomplete {
            return Ok(Refreshed::default());
        }
        let _one = self.changing.lock_unpoisoned();
        let (applied, old_ids) = {
            let st = self.state.lock_unpoisoned();
            if *st.set == set && st.rules == sources.rules && st.pending.is_empty() {
                return Ok(Refreshed::default());
            }
            (st.applied.clone(), st.ids.clone())
        };
        let plan = plan_for(&set, sources, extra);
        let new_ids = cover_ids(&plan, &set, extra);
        let covered: std::collections::HashSet<&std::path::Path> =
            applied.covers.iter().map(Cover::path).collect();
        let delta = live::Delta {
            skeleton: plan
                .skeleton
                .iter()
                .filter(|s| !applied.skeleton.iter().any(|a| a.path() == s.path()))
                .cloned()
                .collect(),
            binds: plan
                .binds
                .iter()
                .filter(|b| !applied.binds.contains(b))
                .cloned()
                .collect(),
            pins: plan
                .pins
                .iter()
                .filter(|p| !applied.pins.contains(p))
                .cloned()
                .collect(),
            covers: plan
                .covers
                .iter()
                .filter(|c| {
                    let p = c.path();
                    !covered.contains(p) || old_ids.get(p) != new_ids.get(p)
                })
                .cloned()
                .collect(),
        };
        let (pending, roots) = if delta.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            let a = live::apply(self.ns.as_fd(), &delta, self.tools.clone())?;
            (a.pending, a.roots)
        };
        let mut merged = (*applied).clone();
        merged.skeleton.extend(delta.skeleton.iter().cloned());
        merged.binds.extend(
            delta
                .binds
                .iter()
                .filter(|b| !pending.contains(&b.path))
                .cloned(),
        );
        merged
            .pins
            .extend(delta.pins.iter().filter(|p| !pending.contains(p)).cloned());
        let mut ids = old_ids;
        let renewed: std::collections::HashSet<&std::path::Path> = delta
            .covers
            .iter()
            .map(Cover::path)
            .filter(|p| !pending.iter().any(|q| q == p))
            .collect();
        merged.covers.retain(|a| !renewed.contains(a.path()));
        for c in delta.covers.iter().filter(|c| renewed.contains(c.path())) {
            merged.covers.push(c.clone());
            ids.insert(
                c.path().to_path_buf(),
                new_ids.get(c.path()).copied().flatten(),
            );
        }
        merged.creatable = plan.creatable.clone();
        let paths = delta
            .binds
            .iter()
            .map(|b| b.path.clone())
            .chain(delta.pins.iter().cloned())
            .chain(delta.covers.iter().map(|c| c.path().to_path_buf()))
            .filter(|p| !pending.contains(p))
            .collect::<Vec<PathBuf>>();
        let added = paths.len();
        let mut st = self.state.lock_unpoisoned();
        st.set = Arc::new(set);
        st.rules = sources.rules.clone();
        st.applied = Arc::new(merged);
        st.ids = ids;
        st.pending = pending.clone();
        if !roots.is_empty() {
            let mut all: Vec<(PathBuf, OwnedFd)> = Vec::new();
            for (p, fd) in st.roots.0.iter() {
                if !roots.iter().any(|(q, _)| q == p) {
                    all.push((
                        p.clone(),
                        fd.try_clone()
                            .map_err(build::step("duplicate a cache root", p))?,
                    ));
                }
            }
            all.extend(roots);
            st.roots = crate::rules::ViewRoots(Arc::new(all));
        }
        Ok(Refreshed {
            added,
            paths,
            pending,
        })
    }

    /// Which of `paths` (as a tool's metadata names them) the view does not
    /// show, canonical: each path is looked up (`canonicalize`) until it is
    /// known to be shown, then never again.
    pub fn unshown(&self, paths: &[PathBuf]) -> Vec<PathBuf> {
        let mut known = self.shown.lock_unpoisoned();
        let mut out = Vec::new();
        for p in paths {
            if known.contains(p) {
                continue;
            }
            let Ok(c) = std::fs::canonicalize(p) else {
                continue;
            };
            if self.plan().shows(&c) {
                known.insert(p.clone());
            } else {
                out.push(c);
            }
        }
        out
    }

    /// Makes `paths` (canonical: a tool's program and script) visible in the
    /// view, read-only, where no bind shows them (a tool whose program lies
    /// outside every rule, granted by `advanced.add_exec`); returns how many
    /// were added. They stay for the view's life. The paths come from tool
    /// metadata, which tools cannot write.
    pub fn expose(&self, paths: &[PathBuf]) -> Result<usize, ViewError> {
        if paths.iter().all(|p| self.plan().shows(p)) {
            return Ok(0);
        }
        let _one = self.changing.lock_unpoisoned();
        let applied = self.plan();
        let binds: Vec<plan::Bind> = paths
            .iter()
            .filter(|p| !applied.shows(p))
            .filter_map(|p| plan::read_only_bind(p))
            .collect();
        if binds.is_empty() {
            return Ok(0);
        }
        let all: Vec<plan::Bind> = applied.binds.iter().chain(&binds).cloned().collect();
        let skeleton: Vec<plan::Skel> = plan::skeleton(&all, &[])
            .into_iter()
            .filter(|s| !applied.skeleton.iter().any(|a| a.path() == s.path()))
            .collect();
        let delta = live::Delta {
            skeleton,
            binds,
            ..live::Delta::default()
        };
        let a = live::apply(self.ns.as_fd(), &delta, self.tools.clone())?;
        let mut st = self.state.lock_unpoisoned();
        let mut merged = (*st.applied).clone();
        merged.skeleton.extend(delta.skeleton);
        let added: Vec<plan::Bind> = delta
            .binds
            .into_iter()
            .filter(|b| !a.pending.contains(&b.path))
            .collect();
        let n = added.len();
        merged.binds.extend(added);
        st.applied = Arc::new(merged);
        Ok(n)
    }

    /// The tools' user namespace the view's confined runs join (`setns`
    /// after entering the view), when a root server's tools run in one.
    pub fn user_ns(&self) -> Option<BorrowedFd<'_>> {
        self.tools.as_deref().map(ToolNamespace::fd)
    }

    /// The binds that wanted the tools' id maps and did not get them whole.
    pub fn not_id_mapped(&self) -> &[(PathBuf, IdMapped)] {
        &self.not_id_mapped
    }

    /// The view's mount namespace (for `setns` in the child).
    pub fn ns(&self) -> BorrowedFd<'_> {
        self.ns.as_fd()
    }

    /// The workspace, opened inside the view: a request's working directory
    /// is opened beneath it, so the child's `fchdir` lands in the view.
    pub fn workspace(&self) -> &Arc<WorkDir> {
        &self.workspace
    }

    /// What the view protects now.
    pub fn protected(&self) -> Arc<ProtectedSet> {
        self.state.lock_unpoisoned().set.clone()
    }

    /// The roots of its copy-on-write caches, opened inside it: the
    /// rules of a run in the view are made from these
    /// ([`crate::rules::ResolvedRules::view_roots`]).
    pub fn roots(&self) -> crate::rules::ViewRoots {
        self.state.lock_unpoisoned().roots.clone()
    }

    /// What is mounted in it now.
    pub fn plan(&self) -> Arc<Plan> {
        self.state.lock_unpoisoned().applied.clone()
    }
}
