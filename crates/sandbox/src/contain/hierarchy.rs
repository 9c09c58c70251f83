//! Setting up the hierarchy: this server's instance directory in each cgroup
//! hierarchy it may use, the v2 controllers enabled for it, and what it
//! enforces.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use super::cleanup::remove_stale;
use super::mounts::{self, Hierarchy};
use super::pool::Pool;
use super::{sys, Enforcement};

/// The hierarchies in use and the server's instance directory in each.
pub(super) struct Cgroups {
    /// Unified hierarchy: grouping and kill.
    pub(super) v2: Option<PathBuf>,
    /// Controllers enabled in the v2 instance (`pids`, `memory`).
    pub(super) v2_pids: bool,
    pub(super) v2_memory: bool,
    /// v1 instance directories, where the v2 one does not do the job.
    pub(super) pids: Option<PathBuf>,
    pub(super) memory: Option<PathBuf>,
    pub(super) cpuacct: Option<PathBuf>,
    pub(super) pool: Mutex<Pool>,
    pub(super) next: AtomicU64,
}

impl Cgroups {
    pub(super) fn start(notes: &mut Vec<String>) -> Option<Cgroups> {
        let me = sys::getpid();
        let hierarchies = mounts::hierarchies();
        let name = format!("toolsrv.{me}");
        let removed = remove_stale(&hierarchies);
        if removed > 0 {
            notes.push(format!(
                "removed {removed} group(s) left by servers that are gone, and killed what was in them"
            ));
        }
        let make = |h: &Hierarchy, notes: &mut Vec<String>| -> Option<PathBuf> {
            let dir = h.own_dir.join(&name);
            match std::fs::create_dir(&dir) {
                Ok(()) => Some(dir),
                Err(e) => {
                    notes.push(format!("cannot make {}: {e}", dir.display()));
                    None
                }
            }
        };
        let v2h = hierarchies.iter().find(|h| h.controllers.is_none());
        let v2 = v2h.and_then(|h| make(h, notes));
        let (mut v2_pids, mut v2_memory) = (false, false);
        if let (Some(h), Some(dir)) = (v2h, &v2) {
            (v2_pids, v2_memory) = enable_v2_controllers(&h.own_dir, dir, notes);
        }
        let v1 = |c: &str, notes: &mut Vec<String>| {
            hierarchies
                .iter()
                .find(|h| h.has(c))
                .and_then(|h| make(h, notes))
        };
        let pids = if v2_pids { None } else { v1("pids", notes) };
        let memory = if v2_memory { None } else { v1("memory", notes) };
        let cpuacct = if v2.is_some() {
            None
        } else {
            v1("cpuacct", notes)
        };
        if v2.is_none() && pids.is_none() {
            // Without a group to list or kill, the other controllers do not
            // contain a run; leave the host as it was.
            for d in [&memory, &cpuacct].into_iter().flatten() {
                let _ = std::fs::remove_dir(d);
            }
            return None;
        }
        Some(Cgroups {
            v2,
            v2_pids,
            v2_memory,
            pids,
            memory,
            cpuacct,
            pool: Mutex::new(Pool::default()),
            next: AtomicU64::new(1),
        })
    }

    pub(super) fn enforcement(&self) -> Enforcement {
        let grouping = match (&self.v2, &self.pids) {
            (Some(d), _) => format!("cgroup v2 group per run under {}", d.display()),
            (None, Some(d)) => format!("cgroup v1 pids group per run under {}", d.display()),
            (None, None) => "no group".to_string(),
        };
        let processes = if self.v2_pids {
            Some("v2 pids.max".to_string())
        } else if let Some(d) = &self.pids {
            Some(format!("v1 pids.max ({})", d.display()))
        } else {
            (!sys::is_root()).then(|| "RLIMIT_NPROC (per user, not per run)".to_string())
        };
        let memory = if self.v2_memory {
            Some("v2 memory.max".to_string())
        } else {
            self.memory
                .as_ref()
                .map(|d| format!("v1 memory.limit_in_bytes ({})", d.display()))
        };
        Enforcement::cgroup(
            grouping,
            processes,
            memory,
            self.v2.is_some(),
            self.cpuacct.is_some(),
        )
    }

    /// The startup log's line: [`Cgroups::enforcement`] in words.
    pub(super) fn describe(&self) -> String {
        let e = self.enforcement();
        format!(
            "{}; processes: {}; memory: {}; cpu: {}; file_size, open_files: rlimits",
            e.grouping,
            e.processes
                .as_deref()
                .unwrap_or("not enforced (RLIMIT_NPROC binds no root process)"),
            e.memory
                .as_deref()
                .unwrap_or("not enforced (no memory controller)"),
            e.cpu
        )
    }
}

/// Enables the `pids` and `memory` controllers for the v2 instance when the
/// server's cgroup offers them; which ones are on.
///
/// The v2 "no internal processes" rule lets a non-root cgroup hand controllers
/// to its children only while it has no process of its own. On this host the
/// server's cgroup usually holds the server; then only grouping and kill come
/// from v2 and the limits from v1 controllers or rlimits.
fn enable_v2_controllers(own: &Path, instance: &Path, notes: &mut Vec<String>) -> (bool, bool) {
    let offered = std::fs::read_to_string(own.join("cgroup.controllers")).unwrap_or_default();
    let want: Vec<&str> = ["pids", "memory"]
        .into_iter()
        .filter(|c| offered.split_whitespace().any(|o| o == *c))
        .collect();
    if want.is_empty() {
        return (false, false);
    }
    let line = want
        .iter()
        .map(|c| format!("+{c}"))
        .collect::<Vec<_>>()
        .join(" ");
    let enabled_in = |dir: &Path| std::fs::write(dir.join("cgroup.subtree_control"), &line);
    let subtree = std::fs::read_to_string(own.join("cgroup.subtree_control")).unwrap_or_default();
    let already = want
        .iter()
        .all(|c| subtree.split_whitespace().any(|o| o == *c));
    if !already {
        let mut result = enabled_in(own);
        if result.is_err() && alone_in(own) && move_into_leaf(own, notes) {
            // The "no internal processes" rule was in the way: the server was
            // its cgroup's only process, and now sits in a leaf beside its runs.
            result = enabled_in(own);
        }
        if let Err(e) = result {
            notes.push(format!(
                "cannot enable {} for {} ({e}): v2 gives grouping and kill only",
                want.join(", "),
                own.display()
            ));
            return (false, false);
        }
    }
    if let Err(e) = enabled_in(instance) {
        notes.push(format!(
            "cannot enable {} in {} ({e})",
            want.join(", "),
            instance.display()
        ));
        return (false, false);
    }
    (want.contains(&"pids"), want.contains(&"memory"))
}

/// Whether this process is the only one in the cgroup `dir`.
fn alone_in(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|t| {
        let pids: Vec<&str> = t.split_whitespace().collect();
        pids == [sys::getpid().to_string()]
    })
}

/// Moves this process (the server, still single-threaded) into a leaf
/// `toolsrv.<pid>.server` of `own`, so that `own` may hand controllers to its
/// children (cgroup v2 lets a non-root cgroup do that only while it holds no
/// process itself). The leaf stays until the next start removes it.
fn move_into_leaf(own: &Path, notes: &mut Vec<String>) -> bool {
    let leaf = own.join(format!("toolsrv.{}.server", sys::getpid()));
    let moved =
        std::fs::create_dir(&leaf).and_then(|()| std::fs::write(leaf.join("cgroup.procs"), "0"));
    match moved {
        Ok(()) => {
            notes.push(format!("moved the server into {}", leaf.display()));
            true
        }
        Err(e) => {
            let _ = std::fs::remove_dir(&leaf);
            notes.push(format!(
                "cannot move the server into {}: {e}",
                leaf.display()
            ));
            false
        }
    }
}
