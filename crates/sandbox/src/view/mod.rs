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
//! - [`glob`]: `deny_read` / `deny_write` globs;
//! - [`sockets`]: the host's bound pathname sockets;
//! - [`plan`]: from the rules and the set to the skeleton and the mounts;
//! - `build`: the mounts, on a dedicated thread; `sys`: their system calls.
//!
//! Where no mount namespace can be had, [`Mechanism::LandlockOnly`] says why,
//! and the server falls back to carving (`policy::carved_paths`).

mod build;
pub mod glob;
pub mod plan;
pub mod protected;
pub mod rootonly;
pub mod sockets;
mod sys;

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

pub use plan::{links_along, Link, Plan, RulePaths};
pub use protected::{Entry, Kind, ProtectedSet, ServerFiles, Sources};

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

    /// What this host offers: the view, unless `force` is `off` or a
    /// mount namespace cannot be made here (tried once, on a thread).
    pub fn probe(force: Option<&str>) -> Mechanism {
        if let Some(f) = force {
            if matches!(f, "off" | "0" | "false" | "none") {
                return Mechanism::LandlockOnly(format!("{FORCE_ENV}={f}"));
            }
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
pub fn id_maps_available(path: &std::path::Path, tools: &ToolNamespace) -> Result<(), String> {
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

/// A built view: its namespace (alive as long as this value), the workspace
/// opened inside it, what it protects, and the tools' user namespace its
/// id-mapped binds were made with (which its runs join).
#[derive(Debug)]
pub struct View {
    ns: OwnedFd,
    workspace: Arc<WorkDir>,
    set: ProtectedSet,
    plan: Plan,
    tools: Option<Arc<ToolNamespace>>,
    not_id_mapped: Vec<(PathBuf, IdMapped)>,
}

impl View {
    /// Builds the view of `sources.rules` protecting what `sources` name.
    /// `extra` entries (root-only files, `rootonly`: only where a root
    /// server's tools run as root) are protected too but not part of
    /// [`View::protected`], which the rescan compares. Where the tools' user
    /// namespace is in force (`identity::tools::in_force`), the binds that
    /// need them get its id maps, and the view's runs join it.
    pub fn build(sources: &Sources, extra: &[Entry]) -> Result<View, ViewError> {
        let set = ProtectedSet::gather(sources);
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
        let plan = Plan::new(&planned, &sources.rules, &shown, &sources.workspace);
        let tools = crate::identity::tools::in_force().cloned();
        let built = build::build(&plan, tools.clone())?;
        if !built.not_id_mapped.is_empty() {
            let list = built
                .not_id_mapped
                .iter()
                .map(|(p, how)| match how {
                    IdMapped::TopOnly(why) => {
                        format!("{} (not the mounts beneath it: {why})", p.display())
                    }
                    IdMapped::No(why) => format!("{} ({why})", p.display()),
                    IdMapped::Whole => p.display().to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ");
            tracing::warn!(
                paths = %list,
                base = tools.as_ref().map_or(0, |t| t.base()),
                "filesystem view: binds without the tools' id maps (their file systems refuse them): tools work there as the unprivileged host ids they are, so they write only what those ids may, and what they make there is owned by them on the host"
            );
        }
        Ok(View {
            ns: built.ns,
            workspace: Arc::new(built.workspace),
            set,
            plan,
            tools,
            not_id_mapped: built.not_id_mapped,
        })
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

    /// What the view protects.
    pub fn protected(&self) -> &ProtectedSet {
        &self.set
    }

    /// The mounts it was built with.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }
}
