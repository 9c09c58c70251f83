//! What to spawn ([`SpawnSpec`]) and how the child joins its run ([`Join`]).

use std::ffi::{CStr, CString};
use std::os::fd::{BorrowedFd, RawFd};

use crate::confine::Confinement;

/// The most [`SpawnSpec::files`] a tool gets.
pub const MAX_FILES: usize = 8;

/// What to run and how.
#[derive(Debug, Clone, Copy)]
pub struct SpawnSpec<'a> {
    /// Path of the executable (not searched in `PATH`).
    pub program: &'a CStr,
    /// Arguments, including `argv[0]`.
    pub argv: &'a [CString],
    /// The complete environment, as `NAME=value` strings.
    pub envp: &'a [CString],
    /// Working directory of the child (for messages only when `cwd_fd` is set).
    pub cwd: &'a CStr,
    /// The working directory, opened: the child `fchdir`s to it instead of
    /// looking `cwd` up again. Must stay open until the spawn returns.
    pub cwd_fd: Option<BorrowedFd<'a>>,
    /// A mount namespace to enter (`setns`) before the working directory and
    /// the confinement: the run's filesystem view (`crate::view`). `cwd_fd`
    /// must then be a directory opened inside that namespace.
    pub mount_ns: Option<BorrowedFd<'a>>,
    /// A network namespace to enter (`setns`) right after `mount_ns`: the
    /// run's own network (`crate::netns`, `network.domains`). A child made
    /// with `join.new_user_ns` has no right over it: its spawn fails.
    pub net_ns: Option<BorrowedFd<'a>>,
    /// A user namespace to enter (`setns`) right after `mount_ns`, becoming
    /// its uid and gid 0 with no supplementary group: the tools' namespace of
    /// a root server (`crate::identity::tools`, the view's
    /// `View::user_ns`). Ignored with `join.new_user_ns`.
    pub user_ns: Option<BorrowedFd<'a>>,
    /// What the child reads on stdin; `None`: `/dev/null` (opened once and
    /// shared by every spawn).
    pub stdin: Option<BorrowedFd<'a>>,
    /// Where stdout and stderr both go (typically a pipe's write end).
    pub output: BorrowedFd<'a>,
    /// Open files the tool gets as its descriptors 3, 4, … in this order (at
    /// most [`MAX_FILES`]): the values of its `file: true` arguments.
    pub files: &'a [BorrowedFd<'a>],
    /// The confinement to apply right before `execve`; `None` runs unconfined.
    pub confinement: Option<&'a Confinement>,
    /// The run's kernel group and limits (see [`crate::contain::Run::join`]).
    pub join: Join,
}

/// How a child joins its run, set up before it runs anything of the tool's:
/// the descriptors must stay open until the child has exec'd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Join {
    /// A cgroup v2 directory to start the child in (`CLONE_INTO_CGROUP`), or -1.
    pub(crate) cgroup: RawFd,
    /// That group's `cgroup.procs`, written by the child where the kernel
    /// refuses `CLONE_INTO_CGROUP` (or has no `clone3`), or -1.
    pub(crate) cgroup_procs: RawFd,
    /// cgroup v1 `cgroup.procs` files the child writes itself into, -1 unused.
    pub(crate) procs: [RawFd; 3],
    /// `(resource, value)` pairs set as both soft and hard limit; resource -1 unused.
    pub(crate) rlimits: [(i32, u64); 4],
    /// Start the child as the first process of a new PID namespace.
    pub(crate) new_pid_ns: bool,
    /// ... and of a new user namespace (a server without CAP_SYS_ADMIN).
    pub(crate) new_user_ns: bool,
    /// The spawning thread's children are born in a PID namespace its
    /// process is not in (the server's tools PID namespace, crate
    /// `toolsrv-watch`): the child reads its parent's pid as 0, and a parent
    /// that died before the parent-death signal was armed took that
    /// namespace's init, and so the child, with it.
    pub parent_outside_pid_ns: bool,
    /// With `new_user_ns`: the server's uid and gid, which the child maps to
    /// themselves in its new user namespace (docs/policy-format.md, "Protected paths": a tool sees its
    /// server's identity).
    pub(crate) own_ids: Option<crate::identity::IdMaps>,
}

impl Default for Join {
    fn default() -> Self {
        Join {
            cgroup: -1,
            cgroup_procs: -1,
            procs: [-1; 3],
            rlimits: [(-1, 0); 4],
            new_pid_ns: false,
            new_user_ns: false,
            parent_outside_pid_ns: false,
            own_ids: None,
        }
    }
}

impl Join {
    /// The namespace flags of `clone`.
    pub(crate) fn namespace_flags(&self) -> u64 {
        let mut f = 0u64;
        if self.new_pid_ns {
            f |= libc::CLONE_NEWPID as u64;
        }
        if self.new_user_ns {
            f |= libc::CLONE_NEWUSER as u64;
        }
        f
    }
}
