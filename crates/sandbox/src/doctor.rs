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
    /// Why the server is not in its own user namespace (not root, not in
    /// one), or why a root server's tools run as root.
    pub identity_reason: Option<String>,
    /// A root server's tools in their own user namespace
    /// ([`Mode::RootToolNamespace`]): their host ids.
    pub tool_ids: Option<ToolIds>,
    /// Whether the filesystem view (a mount namespace, docs/policy-format.md, "Protected paths") is in
    /// use, or why the Landlock-only fallback is.
    pub filesystem_view: Result<(), String>,
    /// Whether runs under `network.domains` get a network namespace each,
    /// or why they get the fallback.
    pub network: Result<(), String>,
    /// Whether tools run without Landlock and seccomp (`serve --yolo`).
    pub unconfined: bool,
    /// How a tool's creations are told from anyone else's (crate
    /// `toolsrv-watch`, docs/watch.md): `tools-pid-namespace`, `unknown` or
    /// `none`, and how.
    pub attribution: Mechanism,
}

impl From<toolsrv_watch::Mechanism> for Mechanism {
    fn from(m: toolsrv_watch::Mechanism) -> Mechanism {
        Mechanism {
            mechanism: m.name.to_string(),
            detail: m.detail,
        }
    }
}

/// The host ids of a root server's tools (in their own user namespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolIds {
    /// The host uid and gid of tool uid and gid 0.
    pub base: u32,
    /// How many ids are mapped from `base`.
    pub count: u32,
    /// Whether the workspace's file system takes the id-mapped mounts its
    /// writable rules are bound through (`view::id_maps_available`).
    pub workspace_id_maps: Result<(), String>,
}

impl ToolIds {
    /// The facts of `tools` with `workspace` (the server's `--cwd`) probed.
    pub fn of(tools: &identity::ToolNamespace, workspace: &std::path::Path) -> ToolIds {
        ToolIds {
            base: tools.base(),
            count: tools.count(),
            workspace_id_maps: crate::view::id_maps_available(workspace, tools),
        }
    }
}

impl Facts {
    /// The facts of a server started now on this host with the same
    /// `forces` (the forcing variables); its workspace would be the current
    /// directory. Decided by the same rules start-up applies (the
    /// containment's `Force` parse, the view's
    /// [`ViewMechanism::choose`](crate::ViewMechanism::choose) rules).
    /// Changes nothing (the namespace probes run in a throwaway child
    /// process; the id maps are tried on a detached clone).
    pub fn host(forces: &crate::Forces) -> Facts {
        let id = identity::probe(forces.userns.as_deref());
        let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
        let tool_ids = id.tools.as_deref().map(|t| ToolIds::of(t, &cwd));
        let may_create = matches!(
            id.mode,
            Mode::Root | Mode::RootToolNamespace | Mode::OwnNamespace
        );
        let (containment, mechanism) =
            crate::contain::probe(forces.containment.as_deref(), may_create);
        let attribution = toolsrv_watch::probe(
            containment.mechanism.starts_with("pid-namespace"),
            forces.tools_pidns_off(),
        )
        .into();
        let filesystem_view = match crate::view::Mechanism::forced_off(forces.view.as_deref())
            .or_else(|| crate::view::Mechanism::unreachable_from(mechanism))
        {
            Some(why) if id.mount_namespace.is_ok() => Err(why),
            _ => id.mount_namespace,
        };
        Facts {
            source: Source::Host,
            landlock_abi: crate::confine::landlock_abi(),
            seccomp: seccomp_available(),
            containment,
            identity: id.mode,
            ids: sys::effective_ids(),
            identity_reason: id.reason,
            tool_ids,
            filesystem_view,
            network: match crate::netns::NetworkMechanism::choose(forces.network.as_deref()) {
                crate::netns::NetworkMechanism::Namespace => Ok(()),
                crate::netns::NetworkMechanism::Fallback(why) => Err(why),
            },
            unconfined: false,
            attribution,
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

/// What would let a root server run its tools in their own user namespace,
/// given why it does not (`Identity::reason`).
fn tools_namespace_fix(reason: Option<&str>) -> String {
    let reason = reason.unwrap_or_default();
    if reason.starts_with(identity::FORCE_ENV) {
        format!("unset {} (or set it to `own`)", identity::FORCE_ENV)
    } else if reason.contains("is free of") {
        "free a range of 65536 ids between 2013265920 and 2147352575 in /etc/subuid, /etc/subgid, /etc/passwd and /etc/group".to_string()
    } else if std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
        .is_ok_and(|s| s.trim() == "0")
    {
        "sysctl user.max_user_namespaces=15000".to_string()
    } else {
        "let the server make a user namespace (clone(CLONE_NEWUSER): user.max_user_namespaces above 0, a container runtime or seccomp profile that allows it)".to_string()
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
    /// How a tool's creations are told from anyone else's (docs/watch.md).
    pub attribution: Mechanism,
    /// What is missing, and what to change.
    pub missing: Vec<Missing>,
    /// What tools can still reach on this host that is not a file a rule
    /// grants (not counted against `enforced`: the policy does not ask for
    /// it to be closed, and on most hosts some of it cannot be). Empty in a
    /// report of a server older than this list.
    #[serde(default)]
    pub reachable: Vec<Reachable>,
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
    /// `root`, `root-tools-user-namespace`, `own-user-namespace` or
    /// `per-run-user-namespace`.
    pub mode: String,
    /// The tools' uid as they see it (the server's).
    pub uid: u32,
    /// The tools' gid as they see it (the server's).
    pub gid: u32,
    /// Why the server is not in its own user namespace, if it is not root
    /// and not in one; why a root server's tools run as root.
    pub reason: Option<String>,
    /// A root server's confined tools in their own user namespace: the host
    /// ids they run as (`null`: tools run with the server's ids).
    #[serde(default)]
    pub tools: Option<ToolIdsFacts>,
}

/// The host ids of a root server's tools (`identity.tools`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolIdsFacts {
    /// The host uid of tool uid 0 (what the host sees them as).
    pub host_uid: u32,
    /// The host gid of tool gid 0.
    pub host_gid: u32,
    /// How many ids are mapped (tool ids `0..count`).
    pub count: u32,
    /// Whether the workspace's file system takes id-mapped mounts, through
    /// which tools write its files as root did.
    pub workspace_id_maps: Item,
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
    pub(crate) tcp_ports: bool,
    /// Network by domain through a proxy (docs/policy-format.md, "network"): not in this version.
    pub domains: String,
}

/// Whether filesystem denials can be observed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denials {
    /// Whether the kernel can report them.
    pub observable: bool,
    /// `landlock-audit` or `none`.
    pub(crate) mechanism: String,
    /// How, or what would enable it.
    pub detail: String,
}

/// Something a tool can still reach that no rule grants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reachable {
    /// Its stable name: `pathname-unix-sockets`, `netlink`,
    /// `abstract-unix-sockets`, `keyrings`.
    pub what: String,
    /// What a tool can do with it here, and why.
    pub detail: String,
    /// What would close it, or why nothing here can.
    pub fix: String,
}

/// What stays reachable to tools under `policy` with `facts` (see
/// [`Report::reachable`]).
fn reachable(facts: &Facts, policy: &Policy) -> Vec<Reachable> {
    let abi = facts.landlock_abi;
    let mut out = Vec::new();
    let mut add = |what: &str, detail: String, fix: String| {
        out.push(Reachable {
            what: what.to_string(),
            detail,
            fix,
        })
    };
    let view = facts.filesystem_view.is_ok();
    add(
        "pathname-unix-sockets",
        if view {
            format!("Landlock (ABI {abi}) has no right for connect(2) to a pathname Unix socket: a tool connects to every socket its filesystem view shows. The view hides this server's socket and those every toolsrv server and bridge of this user registered; any other socket in a directory the rules grant (an agent's or a bus's socket in a writable directory, a socket under a read-only rule) stays reachable")
        } else {
            format!("Landlock (ABI {abi}) has no right for connect(2) to a pathname Unix socket, and without a filesystem view a tool connects to any socket it can name: an ssh-agent, the session and system bus, the systemd manager, docker.sock, other toolsrv servers; only each server's own checks stand in the way")
        },
        if view {
            "keep sockets out of the directories the rules grant, or list them in filesystem.deny_read".to_string()
        } else {
            "give the server a filesystem view (see \"missing\")".to_string()
        },
    );
    if policy.network.enabled {
        add(
            "netlink",
            "AF_NETLINK sockets open: a tool reads the host's interfaces, addresses, routes and neighbours (NETLINK_ROUTE) and listens to device events (NETLINK_KOBJECT_UEVENT); changing them needs capabilities tools do not keep".to_string(),
            "network.enabled: false refuses them (with every socket family but AF_UNIX)".to_string(),
        );
    }
    let own_network = !policy.network.domains.is_empty() && facts.network.is_ok();
    if own_network {
        // Each run in a network namespace of its own: abstract names are
        // the run's, neither squatted on the host nor reached from it.
    } else if abi >= 6 {
        add(
            "abstract-unix-sockets",
            "Landlock's scoping refuses connecting to an abstract Unix socket bound outside the run's sandbox, not binding one: a tool can take (squat) an abstract name another program expects to bind".to_string(),
            if facts.network.is_ok() {
                "network.domains: each run is then in a network namespace of its own, whose abstract names are its own".to_string()
            } else {
                "nothing on this host (a network namespace per run, which network.domains makes where the server may, would)".to_string()
            },
        );
    } else {
        add(
            "abstract-unix-sockets",
            format!("without Landlock's scoping (ABI 6; this kernel has {abi}) a tool connects to any abstract Unix socket on the host (X11, D-Bus, container runtimes) and binds any name"),
            format!("a kernel with Landlock ABI 6 (Linux {} or later)", kernel_for(6)),
        );
    }
    if policy.advanced.keyrings {
        add(
            "keyrings",
            "the policy allows keyctl, add_key and request_key (advanced.keyrings): a run's session keyring is its own, but the user keyring (@u) and the persistent keyring are the human's, which a tool can read and add to".to_string(),
            "advanced.keyrings: false (the seccomp filter then refuses them)".to_string(),
        );
    }
    out
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
    if !net.domains.is_empty() {
        return format!(
            "this policy lets tools reach only the hosts of network.domains ({}), through toolsrv's proxy",
            net.domains.join(", ")
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
        let root = matches!(facts.identity, Mode::Root | Mode::RootToolNamespace);
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
        if let Err(why) = &facts.network {
            if !policy.network.domains.is_empty() {
                need(
                    format!("a network namespace per run for network.domains ({why}): runs reach the listed hosts only through the proxy variables; a tool that ignores them (ssh, a Go program with its own dialer) fails, and one that knows an outside host listening on the proxy's port can reach it by its address (Landlock limits ports, not addresses)"),
                    false,
                    if why.contains("TOOLSRV_NETWORK") {
                        "unset TOOLSRV_NETWORK".to_string()
                    } else {
                        "run the server as root, or where it has a user namespace of its own".to_string()
                    },
                );
            }
        }
        if facts.attribution.mechanism != "tools-pid-namespace" {
            let d = &facts.attribution.detail;
            need(
                format!("exact attribution of what tools create ({d})"),
                false,
                if d.contains("not root") {
                    "run the server as root (an unprivileged fanotify group reports no pids)"
                        .to_string()
                } else if d.contains("TOOLSRV_TOOLS_PIDNS") {
                    "unset TOOLSRV_TOOLS_PIDNS".to_string()
                } else if d.contains("PID namespace each") {
                    format!("{delegate}, so that runs are cgroups, not PID namespaces")
                } else {
                    "a kernel with fanotify (CONFIG_FANOTIFY=y, Linux 5.9 or later for names in events)".to_string()
                },
            );
        }
        if facts.identity == Mode::Root && facts.filesystem_view.is_ok() {
            need(
                format!(
                    "unprivileged tools: a root server's tools run as root ({}), so root-only and other users' files under read rules are hidden only by a bounded scan when a view is built (not for files made later, nor beyond the scan's budget)",
                    facts.identity_reason.as_deref().unwrap_or("no user namespace")
                ),
                true,
                tools_namespace_fix(facts.identity_reason.as_deref()),
            );
        }
        if let Some(Err(why)) = facts.tool_ids.as_ref().map(|t| &t.workspace_id_maps) {
            need(
                format!("id-mapped mounts on the workspace: {why}; tools work there as their unprivileged host ids, so they write only what those ids may, and what they make is owned by them on the host"),
                false,
                format!("serve a workspace on a file system that takes id-mapped mounts (ext4, xfs, btrfs, tmpfs, overlayfs; not NFS), or set {}=root (tools run as root)", identity::FORCE_ENV),
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
        let reachable = if facts.unconfined {
            Vec::new()
        } else {
            reachable(facts, policy)
        };
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
                tools: facts.tool_ids.as_ref().map(|t| ToolIdsFacts {
                    host_uid: t.base,
                    host_gid: t.base,
                    count: t.count,
                    workspace_id_maps: Item {
                        available: t.workspace_id_maps.is_ok(),
                        detail: match &t.workspace_id_maps {
                            Ok(()) => "the workspace's file system takes id-mapped mounts".to_string(),
                            Err(why) => why.clone(),
                        },
                    },
                }),
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
                domains: match &facts.network {
                    Ok(()) => "network namespace per run: the proxy, a capture listener per listed port and a DNS stub that answers listed names only".to_string(),
                    Err(why) => format!("fallback ({why}): the proxy on the server's loopback, the only TCP port a tool may connect to, plain TCP only"),
                },
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
            attribution: facts.attribution.clone(),
            missing,
            reachable,
            enforced,
        }
    }
}
