//! What containment enforces, said as facts a program can check
//! (`toolsrv doctor`, docs/cli.md): of the running server
//! ([`super::Containment::enforcement`]) or, without changing anything on
//! the host, of a server started now ([`probe`]).

use super::mounts::{self, Hierarchy};
use super::{Force, Mechanism, FORCE_ENV};

/// How a run is contained and how each limit of docs/tools.md `limits:` is
/// enforced; `None` for a limit nothing enforces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enforcement {
    /// The mechanism: `cgroup`, `pid-namespace`, `pid-namespace+user-namespace`
    /// or `none`.
    pub mechanism: &'static str,
    /// How a run's processes are grouped and killed together.
    pub grouping: String,
    /// `processes`.
    pub processes: Option<String>,
    /// `memory`.
    pub memory: Option<String>,
    /// `cpu` (always at least `RLIMIT_CPU` per process).
    pub cpu: String,
    /// `file_size` and `open_files` (rlimits, everywhere).
    pub file_size_and_open_files: String,
}

impl Enforcement {
    /// What cgroups enforce, given how `processes` and `memory` are limited
    /// and which hierarchy accounts CPU time (the v2 group's `cpu.stat`, else
    /// v1 `cpuacct`): one wording for the probe and the running server.
    pub(crate) fn cgroup(
        grouping: String,
        processes: Option<String>,
        memory: Option<String>,
        v2: bool,
        cpuacct: bool,
    ) -> Enforcement {
        let cpu = if v2 {
            "v2 cpu.stat and RLIMIT_CPU"
        } else if cpuacct {
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
}

impl Mechanism {
    /// The stable name of the mechanism (`toolsrv doctor --json`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mechanism::Cgroup => "cgroup",
            Mechanism::PidNamespace { user: false } => "pid-namespace",
            Mechanism::PidNamespace { user: true } => "pid-namespace+user-namespace",
            Mechanism::None => "none",
        }
    }
}

/// What the rlimits give where no cgroup controller does.
pub(crate) fn without_cgroups(mechanism: Mechanism, root: bool) -> Enforcement {
    let grouping = match mechanism {
        Mechanism::PidNamespace { .. } => {
            "a PID namespace per run (the kernel kills it when its first process dies)"
        }
        _ => "the process group only (a tool that calls setsid escapes it)",
    };
    Enforcement {
        mechanism: mechanism.name(),
        grouping: grouping.to_string(),
        processes: (!root).then(|| "RLIMIT_NPROC (per user, not per run)".to_string()),
        memory: None,
        cpu: "RLIMIT_CPU per process".to_string(),
        file_size_and_open_files: "RLIMIT_FSIZE, RLIMIT_NOFILE".to_string(),
    }
}

/// What a server started now would enforce here, and with which
/// mechanism, with `force` (the value of [`FORCE_ENV`], parsed as
/// [`Containment::start`](super::Containment::start) parses it) and
/// `may_create_namespaces` (root, or a server that can enter its own user
/// namespace). Reads the cgroup files and checks write access only: makes,
/// moves and removes nothing.
pub(crate) fn probe(force: Option<&str>, may_create_namespaces: bool) -> (Enforcement, Mechanism) {
    let root = crate::contain::sys::is_root();
    let ns = Mechanism::PidNamespace {
        user: !may_create_namespaces,
    };
    let namespaces = || (without_cgroups(ns, root), ns);
    match Force::parse(force) {
        Force::PidNs => {
            let m = Mechanism::PidNamespace { user: false };
            return (without_cgroups(m, root), m);
        }
        Force::UserNs => {
            let m = Mechanism::PidNamespace { user: true };
            return (without_cgroups(m, root), m);
        }
        Force::None => {
            let mut e = without_cgroups(Mechanism::None, root);
            e.grouping = format!("nothing ({FORCE_ENV}=none)");
            return (e, Mechanism::None);
        }
        Force::Auto | Force::Cgroup | Force::Unknown(_) => {}
    }
    let hierarchies = mounts::hierarchies();
    let writable = |h: &&Hierarchy| super::sys::may_write(&h.own_dir);
    let v2 = hierarchies
        .iter()
        .filter(|h| h.controllers.is_none())
        .find(writable);
    let v1 = |c: &str| hierarchies.iter().filter(|h| h.has(c)).find(writable);
    let v2_offers = |c: &str| {
        v2.is_some_and(|h| {
            std::fs::read_to_string(h.own_dir.join("cgroup.controllers"))
                .is_ok_and(|t| t.split_whitespace().any(|o| o == c))
        })
    };
    let (pids_v1, memory_v1) = (v1("pids"), v1("memory"));
    if v2.is_none() && pids_v1.is_none() {
        return namespaces();
    }
    let grouping = match (v2, pids_v1) {
        (Some(h), _) => format!("cgroup v2 group per run under {}", h.own_dir.display()),
        (None, Some(h)) => format!("cgroup v1 pids group per run under {}", h.own_dir.display()),
        (None, None) => unreachable!("checked above"),
    };
    let processes = if v2_offers("pids") {
        Some("v2 pids.max".to_string())
    } else if let Some(h) = pids_v1 {
        Some(format!("v1 pids.max ({})", h.own_dir.display()))
    } else {
        (!root).then(|| "RLIMIT_NPROC (per user, not per run)".to_string())
    };
    let memory = if v2_offers("memory") {
        Some("v2 memory.max".to_string())
    } else {
        memory_v1.map(|h| format!("v1 memory.limit_in_bytes ({})", h.own_dir.display()))
    };
    let e = Enforcement::cgroup(
        grouping,
        processes,
        memory,
        v2.is_some(),
        v1("cpuacct").is_some(),
    );
    (e, Mechanism::Cgroup)
}
