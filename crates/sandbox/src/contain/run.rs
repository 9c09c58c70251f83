//! One run's handle: its group (when cgroups are used), its limits, and its
//! first process; what a spawn joins and how the run ends.

use std::sync::Arc;
use std::time::Duration;

use super::run_group::RunGroup;
use super::{sys, Containment, LimitName, Limits, Mechanism};
use crate::spawn::Join;

impl Containment {
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

    /// Whether the run's group was found empty (`cgroup.events` said
    /// `populated 0` at [`Run::kill`]): no process the run started is alive,
    /// and nothing can join the group again (only the server starts
    /// processes in it), so there is nothing left to signal by process group.
    pub fn known_empty(&self) -> bool {
        self.group.as_ref().is_some_and(|g| g.known_empty)
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
