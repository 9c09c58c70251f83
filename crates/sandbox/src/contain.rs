//! Containment: every process of a run belongs to a group the kernel tracks, the
//! group is limited (TOOLS.md `limits:`), and everything in it dies with the run
//! or with the server (CONTRACT §12).
//!
//! The mechanism is chosen once at startup, strongest first:
//!
//! | host | grouping and kill | `processes` / `memory` | `cpu` |
//! |---|---|---|---|
//! | cgroup v2, server may write beneath its cgroup | v2 group per run, `CLONE_INTO_CGROUP`, `cgroup.kill` | v2 `pids.max` / `memory.max` when the controllers can be enabled there, else the v1 controllers below | v2 `cpu.stat` of the group |
//! | v1 controllers writable (hybrid, root) | the v2 group above when there is one, else the v1 `pids` group (listed and killed) | v1 `pids.max` / `memory.limit_in_bytes` (the child joins them before `execve`) | v1 `cpuacct.usage` |
//! | no writable cgroup | a PID namespace per run (a user namespace too when the server holds no CAP_SYS_ADMIN: not root and not in its own user namespace, `crate::identity`): the kernel kills the namespace when its first process dies | `RLIMIT_NPROC` (per user, not per run; binds nobody as root), no memory limit | `RLIMIT_CPU` per process |
//! | none of these | the process group only (logged as a warning at startup) | as above | as above |
//!
//! `file_size` and `open_files` are `RLIMIT_FSIZE` and `RLIMIT_NOFILE` everywhere,
//! and `cpu` is also `RLIMIT_CPU` of each process.
//!
//! Groups are made only beneath the server's own cgroup, as
//! `toolsrv.<server pid>/run.<n>`, recycled through a pool (a `mkdir` and
//! `rmdir` per run in two or three hierarchies cost more than the spawn), and
//! removed when the server exits. A server killed with SIGKILL leaves them to its
//! watchdog ([`teardown`]), and the next server started in the same cgroup
//! removes whatever a dead server left ([`Containment::start`]).

mod group;
mod mounts;
mod probe;
pub(crate) mod sys;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use probe::{probe, Enforcement};
pub use toolsrv_protocol::{LimitName, Limits};

use crate::identity::IdMaps;
use crate::spawn::Join;
use group::Group;
use mounts::Hierarchy;

/// Groups kept for reuse at most (more are removed when their run ends).
const POOL_MAX: usize = 64;
/// Environment variable that forces a mechanism (`cgroup`, `pidns`, `userns`,
/// `none`); for tests and for hosts where detection guesses wrong.
pub const FORCE_ENV: &str = "TOOLSRV_CONTAINMENT";

/// How runs are contained on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// cgroups (v2 for grouping where mounted, v1 controllers for limits where
    /// that is what the host has).
    Cgroup,
    /// A PID namespace per run; `user` when a user namespace comes with it (an
    /// unprivileged server).
    PidNamespace {
        /// Whether a user namespace is created too.
        user: bool,
    },
    /// Nothing but the process group: a tool that calls `setsid` escapes it.
    None,
}

impl Mechanism {
    /// Whether runs are contained by something a tool cannot leave.
    pub fn contains(self) -> bool {
        self != Mechanism::None
    }
}

/// The server's containment: the mechanism, the groups it made, and the pool.
pub struct Containment {
    mechanism: Mechanism,
    cgroups: Option<Cgroups>,
    summary: String,
    notes: Vec<String>,
    /// The server's ids, mapped in each run's user namespace (when runs get one).
    own_ids: Option<IdMaps>,
}

/// The hierarchies in use and the server's instance directory in each.
struct Cgroups {
    /// Unified hierarchy: grouping and kill.
    v2: Option<PathBuf>,
    /// Controllers enabled in the v2 instance (`pids`, `memory`).
    v2_pids: bool,
    v2_memory: bool,
    /// v1 instance directories, where the v2 one does not do the job.
    pids: Option<PathBuf>,
    memory: Option<PathBuf>,
    cpuacct: Option<PathBuf>,
    pool: Mutex<Pool>,
    next: AtomicU64,
}

#[derive(Default)]
struct Pool {
    idle: Vec<RunGroup>,
    /// Groups whose processes were killed but had not all exited yet.
    draining: Vec<RunGroup>,
    /// Groups that will not be used again, removed once empty.
    retiring: Vec<RunGroup>,
}

/// One run's groups, one per hierarchy in use.
struct RunGroup {
    v2: Option<Group>,
    pids: Option<Group>,
    memory: Option<Group>,
    cpuacct: Option<Group>,
    /// The `pids.max` and memory limit written last (a pooled group keeps them).
    pids_max: Option<u64>,
    memory_max: Option<u64>,
    /// Event counters as last read: how often `pids.max` refused a fork, and
    /// how many processes the memory limit's OOM killer killed.
    pids_refused: u64,
    oom_kills: u64,
    /// `cgroup.kill` was written: the group is not used again. (On Linux 6.x
    /// a child started in a v2 group with `CLONE_INTO_CGROUP` after a
    /// `cgroup.kill` of that group is killed at birth: the kernel compares
    /// the kill sequence of the parent's group with the new one's.)
    killed: bool,
    /// `cgroup.events` said `populated 0` after the run's first process
    /// ended: nothing is left to kill, and nothing can join the group again
    /// until it is handed to the next run (only the server starts processes
    /// in it). The end of a run reads `cgroup.events` once, not once for
    /// the kill, once for the final kill and once more to pool the group.
    known_empty: bool,
    /// When its last run ended.
    returned: Instant,
}

impl Containment {
    /// Detects the mechanism, makes this server's instance groups and removes
    /// those of dead servers. Never fails: the weakest outcome is
    /// [`Mechanism::None`], which [`Containment::summary`] says.
    ///
    /// `force` is the value of [`FORCE_ENV`], if set (the caller reads it: the
    /// server scrubs `TOOLSRV_*` from its environment at startup).
    pub fn start(force: Option<&str>) -> Containment {
        let force = force.unwrap_or_default();
        let mut notes = Vec::new();
        match force {
            "" | "auto" | "cgroup" => {
                if let Some(cg) = Cgroups::start(&mut notes) {
                    let summary = cg.describe();
                    return Containment {
                        mechanism: Mechanism::Cgroup,
                        cgroups: Some(cg),
                        summary,
                        notes,
                        own_ids: None,
                    };
                }
                if force == "cgroup" {
                    notes.push(format!("{FORCE_ENV}=cgroup, but no cgroup is writable"));
                }
                Containment::namespaces(!crate::identity::may_create_namespaces(), notes)
            }
            "pidns" => Containment::namespaces(false, notes),
            "userns" => Containment::namespaces(true, notes),
            "none" => Containment {
                mechanism: Mechanism::None,
                cgroups: None,
                summary: format!("none ({FORCE_ENV}=none)"),
                notes,
                own_ids: None,
            },
            other => {
                notes.push(format!(
                    "{FORCE_ENV}={other:?} is not one of auto, cgroup, pidns, userns, none: detecting"
                ));
                Containment::namespaces(!crate::identity::may_create_namespaces(), notes)
            }
        }
    }

    fn namespaces(user: bool, notes: Vec<String>) -> Containment {
        let summary = if user {
            "a PID namespace and a user namespace per run (mapping the server's uid and gid to themselves); processes limit as RLIMIT_NPROC (per user), no memory limit, cpu as RLIMIT_CPU per process"
        } else {
            "a PID namespace per run; no cgroup limits (processes as RLIMIT_NPROC, which binds no root process; no memory limit; cpu as RLIMIT_CPU per process)"
        };
        Containment {
            mechanism: Mechanism::PidNamespace { user },
            cgroups: None,
            summary: summary.to_string(),
            notes,
            own_ids: user.then(IdMaps::current),
        }
    }

    /// The mechanism in use.
    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// One line for the startup log: what contains a run and how each limit is
    /// enforced.
    pub fn summary(&self) -> &str {
        &self.summary
    }

    /// How runs are contained and how each limit is enforced, as facts
    /// (`toolsrv doctor`).
    pub fn enforcement(&self) -> Enforcement {
        let Some(cg) = &self.cgroups else {
            let mut e = probe::without_cgroups(self.mechanism, sys::is_root());
            if self.mechanism == Mechanism::None {
                e.grouping = self.summary.clone();
            }
            return e;
        };
        cg.enforcement()
    }

    /// What detection noticed on the way (a controller it could not use, stale
    /// groups removed), for the startup log.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The instance directories this server made: what its watchdog tears
    /// down if the server dies.
    pub fn instance_dirs(&self) -> Vec<PathBuf> {
        let Some(cg) = &self.cgroups else {
            return Vec::new();
        };
        [&cg.v2, &cg.pids, &cg.memory, &cg.cpuacct]
            .into_iter()
            .flatten()
            .cloned()
            .collect()
    }

    /// The containment of one run with `limits`.
    pub fn run(self: &Arc<Self>, limits: Limits) -> Result<Run, std::io::Error> {
        let group = match &self.cgroups {
            Some(cg) => Some(cg.take(&limits)?),
            None => None,
        };
        Ok(Run {
            owner: self.clone(),
            group,
            limits,
            leader: 0,
        })
    }

    /// Upkeep, about once a second: removes the groups of killed runs once they
    /// are empty, makes drained groups reusable, and removes pooled groups no
    /// run needed for `idle_for` (so a burst of runs does not keep its groups
    /// and their descriptors for the server's life).
    pub fn collect(&self, idle_for: Duration) {
        let Some(cg) = &self.cgroups else {
            return;
        };
        let mut gone = Vec::new();
        {
            let mut pool = cg.lock();
            let Pool {
                idle,
                draining,
                retiring,
            } = &mut *pool;
            let mut i = 0;
            while i < retiring.len() {
                if retiring[i].is_empty() {
                    gone.push(retiring.swap_remove(i));
                } else {
                    i += 1;
                }
            }
            let mut i = 0;
            while i < draining.len() {
                if draining[i].is_empty() {
                    idle.push(draining.swap_remove(i));
                } else {
                    i += 1;
                }
            }
            let mut i = 0;
            while i < idle.len() {
                if idle[i].returned.elapsed() >= idle_for {
                    gone.push(idle.swap_remove(i));
                } else {
                    i += 1;
                }
            }
        }
        for g in gone {
            g.remove();
        }
    }

    /// Kills every process of every run and removes every group this server
    /// made, waiting at most `limit` (shutdown).
    pub fn shutdown(&self, limit: Duration) {
        if let Some(cg) = &self.cgroups {
            let mut pool = cg.lock();
            pool.idle.clear();
            pool.draining.clear();
            pool.retiring.clear();
        }
        teardown(&self.instance_dirs(), limit);
    }
}

impl Cgroups {
    fn start(notes: &mut Vec<String>) -> Option<Cgroups> {
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

    fn enforcement(&self) -> Enforcement {
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
        let cpu = if self.v2.is_some() {
            "v2 cpu.stat and RLIMIT_CPU"
        } else if self.cpuacct.is_some() {
            "v1 cpuacct.usage and RLIMIT_CPU"
        } else {
            "RLIMIT_CPU per process"
        };
        Enforcement {
            mechanism: Mechanism::Cgroup.name(),
            grouping,
            processes,
            memory,
            cpu: cpu.to_string(),
            file_size_and_open_files: "RLIMIT_FSIZE, RLIMIT_NOFILE".to_string(),
        }
    }

    /// The startup log's line: [`Cgroups::enforcement`] in words.
    fn describe(&self) -> String {
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

    fn lock(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A group for a run with `limits`: a pooled one when there is one.
    fn take(&self, limits: &Limits) -> std::io::Result<RunGroup> {
        let pooled = {
            // Draining and retiring groups are looked at by the upkeep
            // (`Containment::collect`), not on the way to every spawn.
            self.lock().idle.pop()
        };
        let mut g = match pooled {
            Some(g) => g,
            None => self.create()?,
        };
        if let Err(e) = g.apply(self, limits) {
            g.remove();
            return Err(e);
        }
        g.known_empty = false;
        Ok(g)
    }

    fn create(&self) -> std::io::Result<RunGroup> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let name = format!("run.{n}");
        let mk = |d: &Option<PathBuf>| d.as_ref().map(|d| Group::create(d.join(&name))).transpose();
        let mut g = RunGroup {
            v2: None,
            pids: None,
            memory: None,
            cpuacct: None,
            pids_max: None,
            memory_max: None,
            pids_refused: 0,
            oom_kills: 0,
            killed: false,
            known_empty: false,
            returned: Instant::now(),
        };
        g.v2 = mk(&self.v2)?;
        g.pids = match mk(&self.pids) {
            Ok(p) => p,
            Err(e) => {
                g.remove();
                return Err(e);
            }
        };
        Ok(g)
    }

    /// Back to the pool once its run ended (after [`RunGroup::kill`]).
    fn give_back(&self, mut g: RunGroup) {
        g.returned = Instant::now();
        let mut pool = self.lock();
        if g.killed {
            if g.is_empty() {
                drop(pool);
                g.remove();
            } else {
                pool.retiring.push(g);
            }
            return;
        }
        if pool.idle.len() + pool.draining.len() >= POOL_MAX {
            drop(pool);
            if g.is_empty() {
                g.remove();
            }
            // A full pool and a group still draining: it stays until the
            // server's teardown removes the instance.
            return;
        }
        if g.is_empty() {
            pool.idle.push(g);
        } else {
            pool.draining.push(g);
        }
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

impl RunGroup {
    /// Writes the limits that differ from what this group has.
    fn apply(&mut self, cg: &Cgroups, limits: &Limits) -> std::io::Result<()> {
        let value = |n: u64| {
            if n == 0 {
                "max".to_string()
            } else {
                n.to_string()
            }
        };
        if self.pids_max != Some(limits.processes) {
            match (cg.v2_pids, &mut self.v2, &mut self.pids) {
                (true, Some(g), _) => g.write("pids.max", &value(limits.processes))?,
                (_, _, Some(g)) => g.write("pids.max", &value(limits.processes))?,
                _ => {}
            }
            self.pids_max = Some(limits.processes);
        }
        if self.memory_max != Some(limits.memory) {
            if cg.v2_memory {
                if let Some(g) = &mut self.v2 {
                    g.write("memory.max", &value(limits.memory))?;
                    if g.offers("memory.swap.max") {
                        let swap = if limits.memory == 0 { "max" } else { "0" };
                        g.write("memory.swap.max", swap)?;
                    }
                }
            } else if let Some(dir) = &cg.memory {
                if limits.memory > 0 && self.memory.is_none() {
                    let n = cg.next.fetch_add(1, Ordering::Relaxed);
                    self.memory = Some(Group::create(dir.join(format!("run.{n}.mem")))?);
                }
                if let Some(g) = &mut self.memory {
                    set_v1_memory(g, limits.memory)?;
                    self.oom_kills = g.keyed("memory.oom_control", "oom_kill").unwrap_or(0);
                }
            }
            self.memory_max = Some(limits.memory);
        }
        if limits.cpu > Duration::ZERO && self.v2.is_none() && self.cpuacct.is_none() {
            if let Some(dir) = &cg.cpuacct {
                let n = cg.next.fetch_add(1, Ordering::Relaxed);
                self.cpuacct = Some(Group::create(dir.join(format!("run.{n}.cpu")))?);
            }
        }
        Ok(())
    }

    /// The v1 `cgroup.procs` (and v2 fallback) descriptors a child joins.
    fn join(&mut self, limits: &Limits, join: &mut Join) -> std::io::Result<()> {
        if let Some(g) = &mut self.v2 {
            join.cgroup = g.dir_fd();
            join.cgroup_procs = g.fd("cgroup.procs")?;
        }
        let mut v1 = Vec::new();
        if let Some(g) = &mut self.pids {
            v1.push(g.fd("cgroup.procs")?);
        }
        if limits.memory > 0 {
            if let Some(g) = &mut self.memory {
                v1.push(g.fd("cgroup.procs")?);
            }
        }
        if limits.cpu > Duration::ZERO {
            if let Some(g) = &mut self.cpuacct {
                v1.push(g.fd("cgroup.procs")?);
            }
        }
        for (slot, fd) in join.procs.iter_mut().zip(v1) {
            *slot = fd;
        }
        Ok(())
    }

    /// Kills every process in the group (and keeps killing what a listing finds,
    /// where there is no `cgroup.kill`).
    fn kill(&mut self) {
        if self.known_empty {
            return;
        }
        if let Some(g) = &mut self.v2 {
            // Usually the run's processes are all gone by now: then nothing
            // is written, and the group can be used again.
            if g.keyed("cgroup.events", "populated").unwrap_or(1) == 0 {
                self.known_empty = true;
                return;
            }
            self.killed = true;
            if g.write("cgroup.kill", "1").is_ok() {
                return;
            }
            let _ = g.kill_listed();
            return;
        }
        for g in [&mut self.pids, &mut self.memory, &mut self.cpuacct]
            .into_iter()
            .flatten()
        {
            let _ = g.kill_listed();
        }
    }

    /// Whether no process is left in the group.
    fn is_empty(&mut self) -> bool {
        if self.known_empty {
            return true;
        }
        if let Some(g) = &mut self.v2 {
            return g.keyed("cgroup.events", "populated").unwrap_or(0) == 0;
        }
        [&mut self.pids, &mut self.memory, &mut self.cpuacct]
            .into_iter()
            .flatten()
            .all(|g| g.pids().map_or(true, |p| p.is_empty()))
    }

    /// The limits hit since the last call.
    fn hits(&mut self, v2_pids: bool, v2_memory: bool) -> Vec<LimitName> {
        let mut out = Vec::new();
        let pids = if v2_pids {
            self.v2.as_mut()
        } else {
            self.pids.as_mut()
        };
        if let Some(g) = pids {
            let now = g.keyed("pids.events", "max").unwrap_or(0);
            if now > self.pids_refused {
                out.push(LimitName::Processes);
            }
            self.pids_refused = now;
        }
        let (mem, file) = if v2_memory {
            (self.v2.as_mut(), "memory.events")
        } else {
            (self.memory.as_mut(), "memory.oom_control")
        };
        if let Some(g) = mem {
            if self.memory_max.unwrap_or(0) > 0 {
                let now = g.keyed(file, "oom_kill").unwrap_or(0);
                if now > self.oom_kills {
                    out.push(LimitName::Memory);
                }
                self.oom_kills = now;
            }
        }
        out
    }

    /// CPU time used by the group so far.
    fn cpu_used(&mut self) -> Option<Duration> {
        if let Some(g) = &mut self.v2 {
            return g
                .keyed("cpu.stat", "usage_usec")
                .ok()
                .map(Duration::from_micros);
        }
        let g = self.cpuacct.as_mut()?;
        let ns: u64 = g.read("cpuacct.usage").ok()?.trim().parse().ok()?;
        Some(Duration::from_nanos(ns))
    }

    /// Removes the group's directories (it must be empty).
    fn remove(self) {
        for g in [self.v2, self.pids, self.memory, self.cpuacct]
            .into_iter()
            .flatten()
        {
            let _ = g.remove();
        }
    }
}

/// Sets a v1 memory group's limit; a pooled group still charged with its last
/// run's page cache above the new limit is emptied first.
fn set_v1_memory(g: &mut Group, bytes: u64) -> std::io::Result<()> {
    let value = if bytes == 0 {
        "-1".to_string()
    } else {
        bytes.to_string()
    };
    // The swap limit (where accounted) must stay at or above the memory limit:
    // raise it first, set the memory limit, then bring swap down to it.
    let memsw = g.offers("memory.memsw.limit_in_bytes");
    if memsw {
        let _ = g.write("memory.memsw.limit_in_bytes", "-1");
    }
    if g.write("memory.limit_in_bytes", &value).is_err() {
        let _ = g.write("memory.force_empty", "0");
        g.write("memory.limit_in_bytes", &value)?;
    }
    if memsw && bytes > 0 {
        g.write("memory.memsw.limit_in_bytes", &value)?;
    }
    Ok(())
}

/// One run's containment: its group (when cgroups are used), its limits, and
/// its first process.
pub struct Run {
    owner: Arc<Containment>,
    group: Option<RunGroup>,
    limits: Limits,
    leader: i32,
}

/// How a run's processes ended, as far as containment can tell.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Ended {
    /// The limits the kernel reported as reached, in contract order.
    pub hits: Vec<LimitName>,
}

impl Run {
    /// The limits of this run.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// What the spawn must do for the child to join this run (descriptors
    /// stay valid while `self` lives).
    pub fn join(&mut self) -> std::io::Result<Join> {
        let mut join = Join::default();
        if let Some(g) = &mut self.group {
            g.join(&self.limits, &mut join)?;
        }
        if let Mechanism::PidNamespace { user } = self.owner.mechanism {
            join.new_pid_ns = true;
            join.new_user_ns = user;
            join.own_ids = self.owner.own_ids;
        }
        let cgroup_processes = self
            .owner
            .cgroups
            .as_ref()
            .is_some_and(|c| c.v2_pids || c.pids.is_some());
        let mut rl = Vec::new();
        if self.limits.file_size > 0 {
            rl.push((libc::RLIMIT_FSIZE as i32, self.limits.file_size));
        }
        if self.limits.open_files > 0 {
            rl.push((libc::RLIMIT_NOFILE as i32, self.limits.open_files));
        }
        if self.limits.cpu > Duration::ZERO {
            let secs = self.limits.cpu.as_secs() + u64::from(self.limits.cpu.subsec_nanos() > 0);
            // Soft limit first (SIGXCPU, which the server reports), the hard
            // one (SIGKILL) a second later for a tool that ignores it.
            rl.push((libc::RLIMIT_CPU as i32, secs.max(1)));
        }
        if self.limits.processes > 0 && !cgroup_processes && !sys::is_root() {
            rl.push((libc::RLIMIT_NPROC as i32, self.limits.processes));
        }
        for (slot, r) in join.rlimits.iter_mut().zip(rl) {
            *slot = r;
        }
        Ok(join)
    }

    /// The run's first process was started as `pid` (its process group leader,
    /// and the first process of its PID namespace where there is one).
    pub fn started(&mut self, pid: i32) {
        self.leader = pid;
    }

    /// Kills every process of the run.
    pub fn kill(&mut self) {
        match (&mut self.group, self.owner.mechanism) {
            (Some(g), _) => g.kill(),
            // The namespace dies with its first process.
            (None, Mechanism::PidNamespace { .. }) => sys::kill(self.leader, libc::SIGKILL),
            (None, _) => sys::kill(-self.leader, libc::SIGKILL),
        }
    }

    /// CPU time the whole run used so far, where the host can tell.
    pub fn cpu_used(&mut self) -> Option<Duration> {
        self.group.as_mut()?.cpu_used()
    }

    /// Ends the run: kills whatever is left of it, reads which limits were
    /// reached, and gives its group back for reuse.
    pub fn finish(mut self) -> Ended {
        self.kill();
        let mut ended = Ended::default();
        if let (Some(mut g), Some(cg)) = (self.group.take(), self.owner.cgroups.as_ref()) {
            ended.hits = g.hits(cg.v2_pids, cg.v2_memory);
            cg.give_back(g);
        }
        ended
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(mut g) = self.group.take() {
            g.kill();
            if let Some(cg) = self.owner.cgroups.as_ref() {
                cg.give_back(g);
            }
        }
    }
}

/// Whether `name` is an instance directory (`toolsrv.<pid>`) and whose.
fn instance_owner(name: &str) -> Option<i32> {
    let rest = name.strip_prefix("toolsrv.")?;
    rest.strip_suffix(".server").unwrap_or(rest).parse().ok()
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

/// Removes the instance groups of servers that are gone (killing what they
/// left); how many directories were removed.
fn remove_stale(hierarchies: &[Hierarchy]) -> usize {
    let me = sys::getpid();
    let mut stale = Vec::new();
    for h in hierarchies {
        let Ok(entries) = std::fs::read_dir(&h.own_dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(pid) = name.to_str().and_then(instance_owner) else {
                continue;
            };
            // Ours (`pid == me`) cannot exist yet: it is a dead server's
            // whose pid this process now has.
            if pid == me || !sys::alive(pid) {
                stale.push(e.path());
            }
        }
    }
    let n = stale.len();
    if n > 0 {
        teardown(&stale, Duration::from_secs(3));
    }
    n
}

/// Kills every process in the instance directories `dirs` and removes them with
/// every group inside, waiting at most `limit` for the processes to die.
///
/// Used at shutdown, by the watchdog when the server died, and at startup for
/// what a dead server left. Runs in a plain thread or process (it sleeps).
pub fn teardown(dirs: &[PathBuf], limit: Duration) {
    let deadline = Instant::now() + limit;
    // v2: one write kills a whole subtree.
    for d in dirs {
        let _ = std::fs::write(d.join("cgroup.kill"), "1");
    }
    let runs = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .map(|it| {
                it.flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default()
    };
    loop {
        let mut left = 0;
        for d in dirs {
            for r in runs(d) {
                if let Ok(mut g) = Group::open(r) {
                    left += g.kill_listed().unwrap_or(0);
                }
            }
            if let Ok(mut g) = Group::open(d.clone()) {
                left += g.kill_listed().unwrap_or(0);
            }
        }
        if left == 0 || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    loop {
        let mut busy = false;
        for d in dirs {
            for r in runs(d) {
                busy |= remove_dir(&r);
            }
            busy |= remove_dir(d);
        }
        if !busy || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `rmdir`; whether the directory is still there (busy).
fn remove_dir(d: &Path) -> bool {
    match std::fs::remove_dir(d) {
        Ok(()) => false,
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::instance_owner;

    #[test]
    fn instance_names_carry_their_server() {
        assert_eq!(instance_owner("toolsrv.123"), Some(123));
        assert_eq!(instance_owner("toolsrv.123.server"), Some(123));
        assert_eq!(instance_owner("toolsrv.x"), None);
        assert_eq!(instance_owner("run.1"), None);
    }
}
