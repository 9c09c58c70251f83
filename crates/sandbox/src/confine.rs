//! Turns [`ResolvedRules`] into a prepared Landlock ruleset and seccomp filter.
//!
//! Everything that allocates, opens paths or can fail in an interesting way happens here,
//! in the parent ([`Confinement::prepare`]). The child spawned by [`crate::spawn`] then only
//! makes raw system calls: `prctl(PR_SET_NO_NEW_PRIVS)`, `capset` (when toolsrv holds
//! capabilities beyond [`caps::KEEP`]), `landlock_restrict_self(ruleset_fd, 0)` and
//! `prctl(PR_SET_SECCOMP, ...)`.

mod abi;
mod access;
pub(crate) mod caps;
mod seccomp;
mod sys;
mod thread;

use std::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use landlock::{
    AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd, PathFdError, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetError, Scope, ABI,
};

pub use abi::landlock_abi;
use abi::Feature;
pub(crate) use seccomp::SeccompError;
pub(crate) use seccomp::KEYCTL_JOIN_SESSION_KEYRING;
pub use thread::{confine_this_thread, thread_is_confined};

use crate::open::{identify, open_no_symlinks};
use crate::rules::ResolvedRules;

/// Why a confinement could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// `best_effort: false` and the kernel lacks a Landlock feature the rules need.
    #[error("landlock ABI {required} required for {feature}, kernel has ABI {kernel}")]
    AbiTooOld {
        /// The missing feature.
        feature: &'static str,
        /// The first ABI providing it.
        required: i32,
        /// The ABI the kernel (or the test limit) provides.
        kernel: i32,
    },
    /// `best_effort: false` and a rule path cannot be opened.
    #[error("cannot open sandbox path {}: {source}", path.display())]
    Path {
        /// The rule path.
        path: PathBuf,
        /// The underlying error.
        source: RuleOpenError,
    },
    /// `fstat` on an opened rule path failed.
    #[error("cannot inspect sandbox path {}: {source}", path.display())]
    Stat {
        /// The rule path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The `landlock` crate refused to build the ruleset.
    #[error("cannot build the landlock ruleset: {0}")]
    Ruleset(#[from] RulesetError),
    /// The kernel supports Landlock but no ruleset descriptor was created.
    #[error("landlock ruleset was not created although the kernel has ABI {0}")]
    NoRuleset(i32),
    /// The seccomp filter could not be assembled.
    #[error("cannot build the seccomp filter: {0}")]
    Seccomp(#[from] SeccompError),
    /// toolsrv's own capabilities could not be read (`capget`).
    #[error("cannot read toolsrv's capabilities: {0}")]
    Capabilities(std::io::Error),
}

/// A prepared confinement: a Landlock ruleset descriptor and an optional seccomp
/// program, ready to be applied by a freshly spawned child right before `execve`.
///
/// Built once per request in the parent; it can be shared between threads.
pub struct Confinement {
    ruleset: Option<OwnedFd>,
    seccomp: Option<Vec<libc::sock_filter>>,
    /// Whether `seccomp` is the program every confined run shares.
    shared_filter: bool,
    /// Whether the policy lets tools use the kernel keyrings.
    keyrings: bool,
    caps: Option<caps::Caps>,
    /// `caps` without `CAP_SETUID`/`CAP_SETGID`, for the first process of a
    /// PID namespace that comes without a user namespace.
    caps_without_setid: Option<caps::Caps>,
    unenforced: Vec<String>,
    /// A rule path could not be opened (and was skipped, best effort).
    skipped: bool,
    abi: i32,
}

impl fmt::Debug for Confinement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Confinement")
            .field("ruleset", &self.ruleset)
            .field("seccomp_instructions", &self.seccomp.as_ref().map(Vec::len))
            .field("caps", &self.caps)
            .field("unenforced", &self.unenforced)
            .field("abi", &self.abi)
            .finish()
    }
}

impl Confinement {
    /// Prepares the confinement for `rules` using everything the kernel supports.
    pub fn prepare(rules: &ResolvedRules) -> Result<Confinement, ConfineError> {
        Self::prepare_with_abi_limit(rules, None)
    }

    /// Like [`Confinement::prepare`], but pretends the kernel supports at most Landlock
    /// ABI `max_abi` (a test hook for the refusal and degradation paths).
    pub fn prepare_with_abi_limit(
        rules: &ResolvedRules,
        max_abi: Option<i32>,
    ) -> Result<Confinement, ConfineError> {
        let kernel = landlock_abi();
        let abi_num = max_abi.map_or(kernel, |m| m.min(kernel)).max(0);
        let mut unenforced = Vec::new();
        for feature in needed_features(rules) {
            if feature.abi() <= abi_num {
                continue;
            }
            if !rules.best_effort && feature.mandatory() {
                return Err(ConfineError::AbiTooOld {
                    feature: feature.name(),
                    required: feature.abi(),
                    kernel: abi_num,
                });
            }
            unenforced.push(format!(
                "{} (landlock ABI {} required, kernel has ABI {abi_num})",
                feature.name(),
                feature.abi()
            ));
        }
        let mut skipped = false;
        let ruleset = if abi_num >= 1 {
            let fd = build_ruleset(rules, abi_num, &mut unenforced, &mut skipped)?;
            if fd.is_none() {
                return Err(ConfineError::NoRuleset(abi_num));
            }
            fd
        } else {
            None
        };
        let seccomp = Some(seccomp::program(&rules.network, rules.keyrings)?);
        // The shared filter refuses the keyrings: a run that may use them
        // needs a thread without it (see `needs_unfiltered_thread`).
        let shared_filter = rules.network == thread::shared_network() && !rules.keyrings;
        let caps = caps::reduced().map_err(ConfineError::Capabilities)?;
        let caps_without_setid =
            caps::reduced_without_setid().map_err(ConfineError::Capabilities)?;
        Ok(Confinement {
            ruleset,
            seccomp,
            shared_filter,
            keyrings: rules.keyrings,
            caps,
            caps_without_setid,
            unenforced,
            skipped,
            abi: abi_num,
        })
    }

    /// What the kernel could not enforce, one human-readable line each (empty when
    /// everything is enforced). Only ever non-empty for `best_effort: true`, except
    /// for scoping, which is enforced "where the kernel supports it".
    pub fn unenforced(&self) -> &[String] {
        &self.unenforced
    }

    /// Whether a rule path could not be opened and its rule was skipped
    /// (best effort): a caller that caches confinements must not keep this
    /// one, which may lack a rule only for now (out of descriptors, say).
    pub fn rules_skipped(&self) -> bool {
        self.skipped
    }

    /// The Landlock ABI the ruleset was built for (0: no Landlock ruleset).
    pub fn abi(&self) -> i32 {
        self.abi
    }

    /// The ruleset descriptor for `landlock_restrict_self`, if any.
    pub(crate) fn ruleset_fd(&self) -> Option<RawFd> {
        self.ruleset.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// The capabilities the child sets before `execve`, when they differ from
    /// toolsrv's (see [`caps`]).
    pub(crate) fn caps(&self) -> Option<caps::Caps> {
        self.caps
    }

    /// The capabilities for a child that starts as the first process of a
    /// PID namespace of the server's own user namespace: [`Self::caps`]
    /// without `CAP_SETUID` and `CAP_SETGID`. Nothing but the namespace's
    /// first process itself holds the namespace together, and what kills it
    /// when the server dies (its parent-death signal) is cleared by the
    /// kernel on any credential change (docs/containment.md).
    pub(crate) fn caps_for_pid_namespace(&self) -> Option<caps::Caps> {
        self.caps_without_setid
    }

    /// Whether tools may use the kernel keyrings (`advanced.keyrings`): then
    /// the child's own session keyring is required (its spawn fails without
    /// one), and it must not be started from a thread that carries the
    /// shared filter, which refuses them ([`Self::needs_unfiltered_thread`]).
    pub(crate) fn keyrings(&self) -> bool {
        self.keyrings
    }

    /// Whether the child must be cloned from a thread without the shared
    /// seccomp filter: a filter inherited at clone cannot be taken off, and
    /// the shared one refuses what this confinement allows (the keyrings).
    pub fn needs_unfiltered_thread(&self) -> bool {
        self.keyrings
    }

    /// The seccomp program the child attaches: none when it is the shared one
    /// and the spawning thread already carries it ([`confine_this_thread`]).
    pub(crate) fn seccomp_program(&self) -> Option<&[libc::sock_filter]> {
        if self.shared_filter && thread_is_confined() {
            return None;
        }
        self.seccomp.as_deref()
    }
}

/// The Landlock features these rules rely on.
fn needed_features(rules: &ResolvedRules) -> Vec<Feature> {
    let mut needed = vec![Feature::Filesystem];
    if !rules.rw.is_empty() || !rules.rwx.is_empty() {
        needed.push(Feature::Refer);
    }
    // Without truncate control, truncate(2) works on any path the user may write.
    needed.push(Feature::Truncate);
    let net = &rules.network;
    if net.enabled && (!net.bind_tcp.is_empty() || !net.connect_tcp.is_empty()) {
        needed.push(Feature::TcpPorts);
    }
    needed.push(Feature::IoctlDev);
    needed.push(Feature::Scoping);
    needed
}

/// A rule path's descriptor. A path recorded as the working directory (its
/// identity) is its opened descriptor (borrowed, never looked up again); a path with a recorded
/// identity is opened without following symbolic links and must still be the
/// file it was when resolved; any other path (rules built by hand) is opened
/// as given.
fn open_rule<'a>(rules: &'a ResolvedRules, path: &Path) -> Result<RuleFd<'a>, RuleOpenError> {
    if let Some(fd) = rules.view_roots.get(path) {
        return Ok(RuleFd::Borrowed(fd.as_fd()));
    }
    let Some(want) = rules.ids.get(path) else {
        return Ok(RuleFd::Path(PathFd::new(path)?));
    };
    // A rule resolved to the working directory itself is that descriptor,
    // whatever name the directory had when the rule was recorded (the kernel's
    // path of a directory a tool is renaming can be a name it no longer has).
    if let Some(wd) = rules.workdir.as_deref() {
        if wd.id() == *want {
            return Ok(RuleFd::Borrowed(wd.fd()));
        }
    }
    let fd = open_no_symlinks(path)?;
    let (got, _) = identify(fd.as_fd())?;
    if got != *want {
        return Err(RuleOpenError::Changed);
    }
    Ok(RuleFd::Owned(fd))
}

/// A descriptor for a Landlock rule.
enum RuleFd<'a> {
    Path(PathFd),
    Owned(OwnedFd),
    Borrowed(BorrowedFd<'a>),
}

impl AsFd for RuleFd<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            RuleFd::Path(f) => f.as_fd(),
            RuleFd::Owned(f) => f.as_fd(),
            RuleFd::Borrowed(f) => f.as_fd(),
        }
    }
}

/// Why a rule path could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum RuleOpenError {
    /// Opening the path as given failed.
    #[error(transparent)]
    Path(#[from] PathFdError),
    /// Opening without following symbolic links, or inspecting, failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The path is now another file than when the rules were resolved.
    #[error("it is not the file it was when the rules were resolved")]
    Changed,
}

/// Creates the ruleset for `abi_num` and adds every rule.
fn build_ruleset(
    rules: &ResolvedRules,
    abi_num: i32,
    unenforced: &mut Vec<String>,
    skipped: &mut bool,
) -> Result<Option<OwnedFd>, ConfineError> {
    let abi = ABI::from(abi_num);
    let level = if rules.best_effort {
        CompatLevel::BestEffort
    } else {
        CompatLevel::HardRequirement
    };
    let sets = access::AccessSets::for_abi(abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(level)
        .handle_access(sets.handled)?;
    let net = &rules.network;
    let mut net_access = landlock::BitFlags::<AccessNet>::EMPTY;
    if abi_num >= Feature::TcpPorts.abi() {
        if !net.enabled {
            net_access = AccessNet::BindTcp | AccessNet::ConnectTcp;
        } else {
            if !net.bind_tcp.is_empty() {
                net_access |= AccessNet::BindTcp;
            }
            if !net.connect_tcp.is_empty() {
                net_access |= AccessNet::ConnectTcp;
            }
        }
    }
    if !net_access.is_empty() {
        ruleset = ruleset.handle_access(net_access)?;
    }
    if abi_num >= Feature::Scoping.abi() {
        ruleset = ruleset.scope(Scope::AbstractUnixSocket | Scope::Signal)?;
    }
    let mut created = ruleset.create()?;
    let groups = [
        (&rules.ro, sets.ro),
        (&rules.rox, sets.rox),
        (&rules.rw, sets.rw),
        (&rules.rwx, sets.rwx),
        (&rules.list, sets.list),
    ];
    for (paths, access) in groups {
        for path in paths {
            let fd = match open_rule(rules, path) {
                Ok(fd) => fd,
                Err(source) if rules.best_effort => {
                    *skipped = true;
                    tracing::warn!(path = %path.display(), error = %source,
                        "sandbox path cannot be opened, rule skipped");
                    unenforced.push(format!(
                        "rule for {} (cannot open: {source})",
                        path.display()
                    ));
                    continue;
                }
                Err(source) => {
                    return Err(ConfineError::Path {
                        path: path.clone(),
                        source,
                    })
                }
            };
            let is_dir = access::is_dir(fd.as_fd()).map_err(|source| ConfineError::Stat {
                path: path.clone(),
                source,
            })?;
            let allowed = if is_dir {
                access
            } else {
                access & sets.file_only
            };
            if allowed.is_empty() {
                continue;
            }
            created = created.add_rule(PathBeneath::new(fd, allowed))?;
        }
    }
    if net.enabled {
        for &port in &net.bind_tcp {
            created = created.add_rule(NetPort::new(port, AccessNet::BindTcp))?;
        }
        for &port in &net.connect_tcp {
            created = created.add_rule(NetPort::new(port, AccessNet::ConnectTcp))?;
        }
    }
    Ok(created.into())
}
