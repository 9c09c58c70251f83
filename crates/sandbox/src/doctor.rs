//! What this host, or a running server, enforces of a policy, and what is
//! missing (`toolsrv doctor`, docs/cli.md): [`Facts`] are gathered (from
//! the host with [`Facts::host`], or by the server from what it set up at
//! startup), then [`Report::evaluate`] holds them against a policy.
//!
//! The report is the stable JSON of `toolsrv doctor --json` and of the
//! server's `doctor` file (docs/cli.md).

mod sys;

use serde::{Deserialize, Serialize};

use crate::contain::Enforcement;
use crate::identity::{self, Mode};
use crate::policy::Policy;

/// Where the facts come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Probed on this host for a server started now.
    Host,
    /// Reported by a running server about itself.
    Server,
}

/// What a server has (or would have) to confine its tools with.
#[derive(Debug, Clone)]
pub struct Facts {
    /// Where they come from.
    pub source: Source,
    /// The Landlock ABI in use (0: none).
    pub landlock_abi: i32,
    /// Whether seccomp filters are available, or why not.
    pub seccomp: Result<(), String>,
    /// Containment and limits.
    pub containment: Enforcement,
    /// The identity mode tools run under.
    pub identity: Mode,
    /// The server's (and its tools') uid and gid.
    pub ids: (u32, u32),
    /// Why the server is not in its own user namespace (not root, not in one).
    pub identity_reason: Option<String>,
    /// Whether the filesystem view (a mount namespace, docs/policy-format.md, "Protected paths") is in
    /// use, or why the Landlock-only fallback is.
    pub filesystem_view: Result<(), String>,
    /// Whether tools run without Landlock and seccomp (`serve --yolo`).
    pub unconfined: bool,
}

impl Facts {
    /// The facts of a server started now on this host with the same
    /// environment: `force_containment` and `force_userns` are the values of
    /// `TOOLSRV_CONTAINMENT` and `TOOLSRV_USERNS`. Changes nothing (the
    /// namespace probes run in a throwaway child process).
    pub fn host(force_containment: Option<&str>, force_userns: Option<&str>) -> Facts {
        let id = identity::probe(force_userns);
        let may_create = matches!(id.mode, Mode::Root | Mode::OwnNamespace);
        let containment = crate::contain::probe(force_containment, may_create);
        Facts {
            source: Source::Host,
            landlock_abi: crate::confine::landlock_abi(),
            seccomp: seccomp_available(),
            containment,
            identity: id.mode,
            ids: sys::effective_ids(),
            identity_reason: id.reason,
            filesystem_view: id.mount_namespace,
            unconfined: false,
        }
    }
}

/// Whether seccomp filters can be installed here, or why not.
pub fn seccomp_available() -> Result<(), String> {
    sys::seccomp_errno_action().map_err(|e| format!("seccomp(SECCOMP_GET_ACTION_AVAIL): {e}"))
}

/// The Landlock ABI a feature needs, with the first Linux release that has it.
const ABI_KERNELS: [(i32, &str); 7] = [
    (1, "5.13"),
    (2, "5.19"),
    (3, "6.2"),
    (4, "6.7"),
    (5, "6.10"),
    (6, "6.12"),
    (7, "6.15"),
];

fn kernel_for(abi: i32) -> &'static str {
    ABI_KERNELS
        .iter()
        .find(|(a, _)| *a == abi)
        .map_or("a newer kernel", |(_, k)| k)
}

/// What would let an unprivileged server enter its own user namespace,
/// given why it did not (`Identity::reason`).
fn own_namespace_fix(reason: Option<&str>) -> String {
    let reason = reason.unwrap_or_default();
    if reason.starts_with(identity::FORCE_ENV) {
        format!("unset {} (or set it to `own`)", identity::FORCE_ENV)
    } else if reason.contains("overflow uid") {
        "run the server as an ordinary user, not as the overflow user (nobody)".to_string()
    } else if reason.contains("ids differ") {
        "start the server with equal real, effective and saved ids (not through a set-user-ID wrapper)".to_string()
    } else {
        identity::user_namespace_fix()
    }
}

/// The report: facts, and what the policy asks for that they do not give.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// `host` or `server`.
    pub source: Source,
    /// The policy judged against.
    pub policy: PolicyFacts,
    /// Landlock.
    pub landlock: Landlock,
    /// Seccomp.
    pub seccomp: Item,
    /// Containment and limits.
    pub containment: Containment,
    /// The identity tools run under.
    pub identity: IdentityFacts,
    /// Filesystem protection (docs/policy-format.md, "Protected paths").
    pub filesystem: Mechanism,
    /// Network restriction (docs/policy-format.md, "network").
    pub network: Network,
    /// Whether filesystem denials can be observed (docs/policy-format.md).
    pub denials: Denials,
    /// What is missing, and what to change.
    pub missing: Vec<Missing>,
    /// Whether everything the policy asks for is enforced (judged as
    /// `best_effort: false` would: `toolsrv doctor` exits 0 only then).
    pub enforced: bool,
}

/// The policy judged against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyFacts {
    /// Its file (`None`: the built-in policy).
    pub path: Option<String>,
    /// Its `general.best_effort`.
    pub best_effort: bool,
}

/// Landlock's ABI and the features it enables.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Landlock {
    /// The ABI (0: Landlock is not enabled).
    pub abi: i32,
    /// Filesystem access control (ABI 1).
    pub filesystem: bool,
    /// Link and rename control (ABI 2).
    pub refer: bool,
    /// Truncate control (ABI 3).
    pub truncate: bool,
    /// TCP bind and connect port rules (ABI 4).
    pub tcp_ports: bool,
    /// Device ioctl control (ABI 5).
    pub ioctl_dev: bool,
    /// Signal and abstract Unix socket scoping (ABI 6).
    pub scoping: bool,
    /// Audit logging of denials (ABI 7).
    pub audit: bool,
}

/// A thing that is there or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    /// Whether it is available.
    pub available: bool,
    /// How, or why not.
    pub detail: String,
}

/// Containment and how each limit is enforced (`null`: not enforced).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Containment {
    /// `cgroup`, `pid-namespace`, `pid-namespace+user-namespace` or `none`.
    pub mechanism: String,
    /// How a run's processes are grouped and killed.
    pub grouping: String,
    /// `limits.processes`.
    pub processes: Option<String>,
    /// `limits.memory`.
    pub memory: Option<String>,
    /// `limits.cpu`.
    pub cpu: String,
    /// `limits.file_size`.
    pub file_size: String,
    /// `limits.open_files`.
    pub open_files: String,
}

/// The identity tools run under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityFacts {
    /// `root`, `own-user-namespace` or `per-run-user-namespace`.
    pub mode: String,
    /// The tools' uid (the server's).
    pub uid: u32,
    /// The tools' gid (the server's).
    pub gid: u32,
    /// Why the server is not in its own user namespace, if it is not root
    /// and not in one.
    pub reason: Option<String>,
}

/// A named mechanism and how it works here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mechanism {
    /// Its stable name.
    pub mechanism: String,
    /// How, or why this one.
    pub detail: String,
}

/// Network restriction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Network {
    /// What this policy lets tools reach, and whether this host enforces it
    /// (`tools reach no network (network.enabled: false), enforced by
    /// seccomp`).
    #[serde(default)]
    pub policy: String,
    /// `landlock-tcp-ports` (port rules enforced) or `seccomp-only`.
    pub mechanism: String,
    /// Whether `network.enabled: false` is enforced (seccomp).
    pub no_network: bool,
    /// Whether `bind_tcp`/`connect_tcp` are enforced (Landlock ABI 4).
    pub tcp_ports: bool,
    /// Network by domain through a proxy (docs/policy-format.md, "network"): not in this version.
    pub domains: String,
}

/// Whether filesystem denials can be observed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denials {
    /// Whether the kernel can report them.
    pub observable: bool,
    /// `landlock-audit` or `none`.
    pub mechanism: String,
    /// How, or what would enable it.
    pub detail: String,
}

/// Something missing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Missing {
    /// What is not there.
    pub what: String,
    /// Whether the policy asks for it (then `enforced` is false).
    pub required: bool,
    /// The exact change that would provide it.
    pub fix: String,
}

/// What `net` lets tools reach, as the network line says it, given whether
/// seccomp (no network at all) and Landlock's port rules are available.
fn network_allowed(net: &crate::policy::Network, seccomp: bool, ports: bool) -> String {
    if !net.enabled {
        return format!(
            "this policy lets tools reach no network (network.enabled: false: no TCP, UDP, raw or MPTCP socket, loopback included){}",
            if seccomp {
                ", enforced by seccomp"
            } else {
                "; NOT enforced here (no seccomp): tools can reach the network"
            }
        );
    }
    let list = |v: &[u16]| v.iter().map(u16::to_string).collect::<Vec<_>>().join(", ");
    let mut parts = Vec::new();
    parts.push(if net.connect_tcp.is_empty() {
        "connect to any TCP port".to_string()
    } else {
        format!("connect to TCP ports {} only", list(&net.connect_tcp))
    });
    parts.push(if net.bind_tcp.is_empty() {
        "bind any TCP port".to_string()
    } else {
        format!("bind TCP ports {} only", list(&net.bind_tcp))
    });
    let restricted = !net.connect_tcp.is_empty() || !net.bind_tcp.is_empty();
    let enforced = match (restricted, ports) {
        (false, _) => "",
        (true, true) => ", enforced by Landlock",
        (true, false) => "; the port rules are NOT enforced here (Landlock before ABI 4)",
    };
    format!(
        "this policy lets tools reach the network (network.enabled: true): {}{enforced}",
        parts.join(", ")
    )
}

impl Report {
    /// The policy file's latest version does not parse, so what is in effect
    /// is an older one: said as a required missing item (the report is then
    /// not "everything enforced").
    pub fn policy_not_reloaded(&mut self, why: &str, loaded_at: std::time::SystemTime) {
        self.missing.push(Missing {
            what: format!(
                "the policy file does not parse: {why}; the server uses the version loaded at {}",
                toolsrv_protocol::format_rfc3339_millis(loaded_at)
            ),
            required: true,
            fix: "fix the file: the server loads it again at its next request, and refuses to start with it as it is".to_string(),
        });
        self.enforced = false;
    }

    /// Holds `facts` against `policy` (read from `policy_path`, `None` for
    /// the built-in policy).
    pub fn evaluate(facts: &Facts, policy: &Policy, policy_path: Option<&str>) -> Report {
        let abi = facts.landlock_abi;
        let mut missing = Vec::new();
        let mut need = |what: String, required: bool, fix: String| {
            missing.push(Missing {
                what,
                required,
                fix,
            })
        };
        let landlock_fix = |want: i32| {
            if abi == 0 {
                "enable Landlock: boot with it in the LSM list (kernel parameter `lsm=landlock,` followed by the current list from /sys/kernel/security/lsm) on a kernel built with CONFIG_SECURITY_LANDLOCK=y".to_string()
            } else {
                format!(
                    "a kernel with Landlock ABI {want} (Linux {} or later)",
                    kernel_for(want)
                )
            }
        };
        // What the confinement needs of Landlock for this policy (as
        // `confine::needed_features`): everything but scoping refuses under
        // `best_effort: false`.
        let fs = &policy.filesystem;
        let net = &policy.network;
        let ports = net.enabled && (!net.bind_tcp.is_empty() || !net.connect_tcp.is_empty());
        let mut needs = vec![(1, "Landlock filesystem access control", true)];
        if !fs.rw.is_empty() || !fs.rwx.is_empty() {
            needs.push((2, "Landlock link and rename control", true));
        }
        needs.push((3, "Landlock truncate control", true));
        if ports {
            needs.push((
                4,
                "Landlock TCP port rules (network.bind_tcp/connect_tcp)",
                true,
            ));
        }
        needs.push((5, "Landlock device ioctl control", true));
        needs.push((6, "Landlock signal and abstract Unix socket scoping", false));
        for (want, what, required) in needs {
            if abi < want {
                need(what.to_string(), required, landlock_fix(want));
            }
        }
        if facts.unconfined {
            need(
                "confinement: the server runs with --yolo, so tools run without Landlock and seccomp".to_string(),
                true,
                "restart the server without --yolo".to_string(),
            );
        }
        if let Err(why) = &facts.seccomp {
            need(
                format!("seccomp ({why})"),
                true,
                "a kernel built with CONFIG_SECCOMP_FILTER=y, and a container runtime whose own seccomp profile allows seccomp(2)".to_string(),
            );
        }
        let c = &facts.containment;
        let root = facts.identity == Mode::Root;
        let delegate = "run the server under systemd with `Delegate=yes` (e.g. `systemd-run --user -p Delegate=yes toolsrv serve ...`, or `Delegate=yes` in its unit), so it has a cgroup of its own to write";
        if c.mechanism == "none" {
            need(
                "containment: nothing groups a run's processes (a tool that calls setsid outlives its run)".to_string(),
                true,
                format!("{delegate}; or let the server make PID namespaces (root, or unprivileged user namespaces allowed)"),
            );
        } else if c.mechanism == "pid-namespace+user-namespace"
            && facts.identity == Mode::PerRun
            && facts
                .identity_reason
                .as_deref()
                .is_some_and(|r| r.starts_with("unshare(CLONE_NEWUSER)"))
        {
            need(
                "containment: a PID namespace per run needs a user namespace, which this host refuses".to_string(),
                true,
                format!("{delegate}; or {}", own_namespace_fix(facts.identity_reason.as_deref())),
            );
        }
        let limits = &policy.limits;
        if limits.memory > 0 && c.memory.is_none() {
            need(
                format!(
                    "limits.memory ({} bytes): no memory cgroup controller is writable",
                    limits.memory
                ),
                true,
                format!("{delegate} with the memory controller delegated"),
            );
        }
        if limits.processes > 0 && c.processes.is_none() {
            need(
                format!("limits.processes ({}): no pids cgroup controller is writable, and RLIMIT_NPROC binds no root process", limits.processes),
                true,
                format!("{delegate} with the pids controller delegated"),
            );
        }
        if let Err(why) = &facts.filesystem_view {
            need(
                format!("filesystem view (a mount namespace): {why}; protected paths fall back to Landlock alone, which takes the right to create entries from every directory holding one"),
                true,
                if root {
                    "let the server call unshare(CLONE_NEWNS): a container runtime that grants CAP_SYS_ADMIN, or a seccomp profile that allows unshare".to_string()
                } else {
                    own_namespace_fix(facts.identity_reason.as_deref())
                },
            );
        }
        if abi < 7 {
            need(
                "observing filesystem denials (Landlock audit logging)".to_string(),
                false,
                landlock_fix(7),
            );
        }
        let (uid, gid) = facts.ids;
        let enforced = missing.iter().all(|m| !m.required);
        Report {
            source: facts.source,
            policy: PolicyFacts {
                path: policy_path.map(str::to_string),
                best_effort: policy.general.best_effort,
            },
            landlock: Landlock {
                abi,
                filesystem: abi >= 1,
                refer: abi >= 2,
                truncate: abi >= 3,
                tcp_ports: abi >= 4,
                ioctl_dev: abi >= 5,
                scoping: abi >= 6,
                audit: abi >= 7,
            },
            seccomp: Item {
                available: facts.seccomp.is_ok(),
                detail: match &facts.seccomp {
                    Ok(()) => "filters with SECCOMP_RET_ERRNO".to_string(),
                    Err(e) => e.clone(),
                },
            },
            containment: Containment {
                mechanism: c.mechanism.to_string(),
                grouping: c.grouping.clone(),
                processes: c.processes.clone(),
                memory: c.memory.clone(),
                cpu: c.cpu.clone(),
                file_size: "RLIMIT_FSIZE".to_string(),
                open_files: "RLIMIT_NOFILE".to_string(),
            },
            identity: IdentityFacts {
                mode: facts.identity.name().to_string(),
                uid,
                gid,
                reason: facts.identity_reason.clone(),
            },
            filesystem: match &facts.filesystem_view {
                Ok(()) => Mechanism {
                    mechanism: "mount-namespace-view".to_string(),
                    detail: "a mount namespace can be made (unshare(CLONE_NEWNS)): protected paths are read-only or masking mounts, and Landlock grants each rule whole".to_string(),
                },
                Err(why) => Mechanism {
                    mechanism: "landlock-only-fallback".to_string(),
                    detail: why.clone(),
                },
            },
            network: Network {
                policy: network_allowed(&policy.network, facts.seccomp.is_ok(), abi >= 4),
                mechanism: if abi >= 4 { "landlock-tcp-ports" } else { "seccomp-only" }.to_string(),
                no_network: facts.seccomp.is_ok(),
                tcp_ports: abi >= 4,
                domains: "not in this version (no domain proxy)".to_string(),
            },
            denials: Denials {
                observable: abi >= 7,
                mechanism: if abi >= 7 { "landlock-audit" } else { "none" }.to_string(),
                detail: if abi >= 7 {
                    "the kernel logs Landlock denials to the audit log (Landlock ABI 7)".to_string()
                } else {
                    "Landlock before ABI 7 denies silently".to_string()
                },
            },
            missing,
            enforced,
        }
    }
}
