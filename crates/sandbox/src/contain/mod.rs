//! Containment: every process of a run belongs to a group the kernel tracks, the
//! group is limited (docs/tools.md `limits:`), and everything in it dies with the run
//! or with the server (docs/containment.md).
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

mod cleanup;
mod group;
mod hierarchy;
mod mechanism;
mod mounts;
mod pool;
mod probe;
mod run;
mod run_group;
pub(crate) mod sys;

use std::path::PathBuf;

pub use cleanup::teardown;
pub(crate) use probe::probe;
pub use probe::Enforcement;
pub use run::Run;
pub(crate) use toolsrv_protocol::{LimitName, Limits};

use crate::identity::IdMaps;
use hierarchy::Cgroups;

/// Environment variable that forces a mechanism (`cgroup`, `pidns`, `userns`,
/// `none`); for tests and for hosts where detection guesses wrong.
pub const FORCE_ENV: &str = "TOOLSRV_CONTAINMENT";

/// A value of [`FORCE_ENV`], parsed once for start-up and the doctor alike.
/// An unknown value is detected like `auto` (cgroups first), with a note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Force {
    /// Unset, empty or `auto`: cgroups where writable, else namespaces.
    Auto,
    /// `cgroup`: as `auto`, with a note where no cgroup is writable.
    Cgroup,
    /// `pidns`: a PID namespace per run.
    PidNs,
    /// `userns`: a PID namespace and a user namespace per run.
    UserNs,
    /// `none`: the process group only.
    None,
    /// Anything else (detected as `auto`).
    Unknown(String),
}

impl Force {
    /// The value `force` (of [`FORCE_ENV`]) names.
    pub(crate) fn parse(force: Option<&str>) -> Force {
        match force.unwrap_or_default() {
            "" | "auto" => Force::Auto,
            "cgroup" => Force::Cgroup,
            "pidns" => Force::PidNs,
            "userns" => Force::UserNs,
            "none" => Force::None,
            other => Force::Unknown(other.to_string()),
        }
    }
}

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

impl Containment {
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
}
