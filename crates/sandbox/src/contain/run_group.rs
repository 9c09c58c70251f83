//! One run's groups (one per hierarchy in use): its limits written, the
//! descriptors its child joins, killing it, and what it hit.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::group::Group;
use super::hierarchy::Cgroups;
use super::{LimitName, Limits};
use crate::spawn::Join;

/// One run's groups, one per hierarchy in use.
pub(super) struct RunGroup {
    pub(super) v2: Option<Group>,
    pub(super) pids: Option<Group>,
    pub(super) memory: Option<Group>,
    pub(super) cpuacct: Option<Group>,
    /// The `pids.max` and memory limit written last (a pooled group keeps them).
    pub(super) pids_max: Option<u64>,
    pub(super) memory_max: Option<u64>,
    /// Event counters as last read: how often `pids.max` refused a fork, and
    /// how many processes the memory limit's OOM killer killed.
    pub(super) pids_refused: u64,
    pub(super) oom_kills: u64,
    /// `cgroup.kill` was written: the group is not used again. (On Linux 6.x
    /// a child started in a v2 group with `CLONE_INTO_CGROUP` after a
    /// `cgroup.kill` of that group is killed at birth: the kernel compares
    /// the kill sequence of the parent's group with the new one's.)
    pub(super) killed: bool,
    /// `cgroup.events` said `populated 0` after the run's first process
    /// ended: nothing is left to kill, and nothing can join the group again
    /// until it is handed to the next run (only the server starts processes
    /// in it). The end of a run reads `cgroup.events` once, not once for
    /// the kill, once for the final kill and once more to pool the group.
    pub(super) known_empty: bool,
    /// When its last run ended.
    pub(super) returned: Instant,
}

impl RunGroup {
    /// Writes the limits that differ from what this group has.
    pub(super) fn apply(&mut self, cg: &Cgroups, limits: &Limits) -> std::io::Result<()> {
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
    pub(super) fn join(&mut self, limits: &Limits, join: &mut Join) -> std::io::Result<()> {
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
    pub(super) fn kill(&mut self) {
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
    pub(super) fn is_empty(&mut self) -> bool {
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
    pub(super) fn hits(&mut self, v2_pids: bool, v2_memory: bool) -> Vec<LimitName> {
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
    pub(super) fn cpu_used(&mut self) -> Option<Duration> {
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
    pub(super) fn remove(self) {
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
