//! The child side of the spawn: runs between `clone(CLONE_VM | CLONE_VFORK)` and `execve`.
//!
//! The child shares the parent's memory while the calling thread is suspended, and other
//! parent threads keep running. It therefore only reads [`ChildArgs`] (frozen in the
//! suspended thread's frame), makes raw system calls, and reports a failure through two
//! atomics. No allocation, no locks, no formatting, no panics.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

use libc::{c_char, c_int, c_void};

use super::sys;

/// `_NSIG - 1` on every supported architecture.
const MAX_SIGNAL: c_int = 64;

/// Setup step that failed in the child (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Stage {
    /// Resetting signal dispositions or the signal mask.
    Signals = 1,
    /// `setpgid(0, 0)`, or `setsid()` for the first process of a PID namespace.
    ProcessGroup = 2,
    /// `prctl(PR_SET_PDEATHSIG)`.
    DeathSignal = 3,
    /// `dup2` of stdin, stdout or stderr.
    Stdio = 4,
    /// `close_range(CLOSE_RANGE_CLOEXEC)`.
    CloseRange = 5,
    /// `chdir` or `fchdir`.
    Chdir = 6,
    /// `prctl(PR_SET_NO_NEW_PRIVS)`.
    NoNewPrivs = 7,
    /// `landlock_restrict_self`.
    Landlock = 8,
    /// `prctl(PR_SET_SECCOMP)`.
    Seccomp = 9,
    /// `execve`.
    Exec = 10,
    /// `capset`.
    Capabilities = 11,
    /// Writing itself into a cgroup's `cgroup.procs`.
    Contain = 12,
    /// `prlimit64`.
    Limits = 13,
    /// Writing its own `setgroups`, `uid_map` and `gid_map`.
    Identity = 14,
    /// `setns` into the filesystem view.
    View = 15,
    /// `keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)`.
    Keyring = 16,
    /// `setns` into the tools' user namespace, `setgroups`, `setresgid`,
    /// `setresuid`.
    ToolIdentity = 17,
    /// `dup3` of the argument files onto 3, 4, ….
    Files = 18,
    /// `setns` into the run's network namespace.
    Network = 19,
}

impl Stage {
    /// Decodes the value stored by the child.
    pub(crate) fn from_u32(v: u32) -> Option<Stage> {
        Some(match v {
            1 => Stage::Signals,
            2 => Stage::ProcessGroup,
            3 => Stage::DeathSignal,
            4 => Stage::Stdio,
            5 => Stage::CloseRange,
            6 => Stage::Chdir,
            7 => Stage::NoNewPrivs,
            8 => Stage::Landlock,
            9 => Stage::Seccomp,
            10 => Stage::Exec,
            11 => Stage::Capabilities,
            12 => Stage::Contain,
            13 => Stage::Limits,
            14 => Stage::Identity,
            15 => Stage::View,
            16 => Stage::Keyring,
            17 => Stage::ToolIdentity,
            18 => Stage::Files,
            19 => Stage::Network,
            _ => return None,
        })
    }
}

/// Everything the child needs, prepared by the parent. Raw pointers point into memory
/// owned by the parent's suspended frame.
#[repr(C)]
pub(crate) struct ChildArgs {
    pub(crate) program: *const c_char,
    pub(crate) argv: *const *const c_char,
    pub(crate) envp: *const *const c_char,
    pub(crate) cwd: *const c_char,
    /// A descriptor of the working directory (`fchdir`), or -1 (`chdir(cwd)`).
    pub(crate) cwd_fd: c_int,
    /// A mount namespace to enter before `fchdir`, or -1.
    pub(crate) mount_ns: c_int,
    /// A network namespace to enter after `mount_ns`, or -1.
    pub(crate) net_ns: c_int,
    /// A user namespace to enter after `mount_ns` as its uid and gid 0, or -1.
    pub(crate) user_ns: c_int,
    /// With `user_ns`: whether the parent is dumpable, which the change of
    /// credentials undoes for the memory the child shares with it.
    pub(crate) parent_dumpable: bool,
    pub(crate) stdin: c_int,
    pub(crate) output: c_int,
    /// Descriptors the tool gets as 3, 4, … (-1 from the first unused on),
    /// each numbered [`super::spec::MAX_FILES`] + 3 or above, so that no
    /// `dup3` onto 3.. closes one not yet moved.
    pub(crate) files: [c_int; super::spec::MAX_FILES],
    /// Landlock ruleset descriptor, or -1.
    pub(crate) ruleset: c_int,
    /// Seccomp program, or null.
    pub(crate) seccomp: *const libc::sock_fprog,
    /// Whether to set `no_new_privs` (always when confined).
    pub(crate) no_new_privs: bool,
    /// Whether to join a new, empty session keyring (always when confined).
    pub(crate) new_session_keyring: bool,
    /// Whether the run fails when it cannot have one (the policy lets tools
    /// use keyrings); otherwise a host where keyrings are missing or refused
    /// to this process (`ENOSYS`, `EPERM`, `EACCES`) runs the tool with the
    /// inherited one, which its seccomp filter then keeps it from using.
    pub(crate) session_keyring_required: bool,
    /// The capabilities to set after `no_new_privs`, when confined and toolsrv
    /// holds more than a tool may keep.
    pub(crate) caps: Option<crate::confine::caps::Caps>,
    /// `getpid()` of the parent, captured before `clone`.
    pub(crate) parent_pid: libc::pid_t,
    /// The run's group and limits.
    pub(crate) join: super::spec::Join,
    /// Whether the child must write itself into `join.cgroup_procs` (the
    /// clone did not start it in the group). Set by the parent before each attempt.
    pub(crate) join_by_procs: AtomicBool,
    /// The failed [`Stage`] (0: none), written by the child.
    pub(crate) failed_stage: AtomicU32,
    /// The errno of the failed stage, written by the child.
    pub(crate) failed_errno: AtomicI32,
    /// Signals whose disposition the child resets to SIG_DFL (bit `n - 1` for
    /// signal `n`): all of them after `clone`, only the ignored ones after
    /// `clone3(CLONE_CLEAR_SIGHAND)`. Set by the parent before each attempt.
    pub(crate) reset_signals: AtomicU64,
}

/// Entry point of the cloned child. Never returns.
pub(crate) extern "C" fn child_main(arg: *mut c_void) -> c_int {
    // Safety: the parent passes a pointer to a live `ChildArgs`; its thread stays
    // suspended (CLONE_VFORK) until this child execs or exits, so the value outlives
    // every access here. Only shared references are taken (the atomics allow writes).
    let args = unsafe { &*(arg as *const ChildArgs) };
    if let Err((stage, errno)) = setup_and_exec(args) {
        args.failed_errno.store(errno, Ordering::Relaxed);
        args.failed_stage.store(stage as u32, Ordering::Release);
    }
    sys::exit_group(127)
}

/// A failed step: where, and the errno.
type Failure = (Stage, sys::Errno);

/// Tags a system call's errno with the step it failed in.
trait At<T> {
    fn at(self, stage: Stage) -> Result<T, Failure>;
}

impl<T> At<T> for Result<T, sys::Errno> {
    #[inline(always)]
    fn at(self, stage: Stage) -> Result<T, Failure> {
        self.map_err(|errno| (stage, errno))
    }
}

/// The steps of docs/spawn-and-confinement.md, in its order.
fn setup_and_exec(args: &ChildArgs) -> Result<(), Failure> {
    reset_signals(args.reset_signals.load(Ordering::Relaxed))?;
    if let Some(ids) = &args.join.own_ids {
        super::idmap::map_own_ids(ids).at(Stage::Identity)?;
    }
    join_run(args)?;
    if args.mount_ns >= 0 {
        // The view: root and working directory are reset to its root, so
        // the working directory is entered after (from a descriptor opened
        // inside the view), and Landlock applies in it.
        sys::setns(args.mount_ns, libc::CLONE_NEWNS).at(Stage::View)?;
    }
    if args.net_ns >= 0 {
        // The run's own network: while the child still has the server's
        // rights over the namespace it was made in. A child in a user
        // namespace of its own has none, and fails here rather than run
        // with the host's network.
        sys::setns(args.net_ns, libc::CLONE_NEWNET).at(Stage::Network)?;
    }
    if args.user_ns >= 0 {
        // A root server's tool: the tools' user namespace, after the steps
        // that need real root (the groups, the view). Before the death
        // signal, which any change of credentials clears.
        become_tool_root(args.user_ns).at(Stage::ToolIdentity)?;
        if args.parent_dumpable {
            // The kernel marked the memory this child shares with the server
            // (until `execve`) not dumpable as its credentials changed: the
            // server's own. The tool's is set again by `execve`.
            sys::set_dumpable().at(Stage::ToolIdentity)?;
        }
    }
    lead_own_group(args).at(Stage::ProcessGroup)?;
    sys::set_parent_death_signal(libc::SIGKILL).at(Stage::DeathSignal)?;
    // The parent may have died before PDEATHSIG was armed: then nobody waits for us.
    // (In a new PID namespace the parent is outside it and reads as 0; the
    // watchdog covers that window there. In the tools PID namespace too; its
    // init dies with the server, and every process of the namespace with it.)
    let parent = if args.join.new_pid_ns || args.join.parent_outside_pid_ns {
        0
    } else {
        args.parent_pid
    };
    if sys::getppid() != parent {
        sys::exit_group(127);
    }
    sys::dup3(args.stdin, 0).at(Stage::Stdio)?;
    sys::dup3(args.output, 1).at(Stage::Stdio)?;
    sys::dup3(args.output, 2).at(Stage::Stdio)?;
    sys::close_range_on_exec(3).at(Stage::CloseRange)?;
    enter_working_directory(args).at(Stage::Chdir)?;
    if args.new_session_keyring {
        // Before the filter (which lets this one form through anyway): no
        // run shares a session keyring with the server or the human.
        join_new_session_keyring(args.session_keyring_required).at(Stage::Keyring)?;
    }
    if args.no_new_privs {
        sys::set_no_new_privs().at(Stage::NoNewPrivs)?;
    }
    if let Some(caps) = &args.caps {
        sys::capset(caps).at(Stage::Capabilities)?;
    }
    if args.ruleset >= 0 {
        sys::landlock_restrict_self(args.ruleset).at(Stage::Landlock)?;
    }
    // After every step that uses a descriptor of the parent's (the working
    // directory, the ruleset): they may be numbered 3.. too. dup3 leaves the
    // copies open across execve; the sources are closed there.
    for (target, &fd) in (3..).zip(args.files.iter().take_while(|&&fd| fd >= 0)) {
        sys::dup3(fd, target).at(Stage::Files)?;
    }
    if !args.seccomp.is_null() {
        // Safety: a non-null `seccomp` points to the launch's program, which
        // the parent keeps alive until this child has exec'd or exited.
        unsafe { sys::set_seccomp_filter(args.seccomp) }.at(Stage::Seccomp)?;
    }
    // Safety: program, argv and envp point to the launch's NUL-terminated
    // strings and null-terminated arrays, alive until this child has exec'd.
    let errno = unsafe { sys::execve(args.program, args.argv, args.envp) };
    Err((Stage::Exec, errno))
}

/// Enters the user namespace `ns` and becomes its uid and gid 0 with no
/// supplementary group (the server's, root's among them, would still count
/// for access): on the host, the unprivileged ids tool id 0 maps to. The
/// capabilities the child holds from here on are those `setns` gives in the
/// namespace (all of them, until `capset`), over nothing outside it.
fn become_tool_root(ns: c_int) -> Result<(), sys::Errno> {
    sys::setns(ns, libc::CLONE_NEWUSER)?;
    sys::setgroups_none()?;
    sys::setresgid(0)?;
    sys::setresuid(0)
}

/// Makes the child the leader of a process group of its own. The first
/// process of a PID namespace leads a session of its own too: a session
/// leader can never move to another group, so a signal to its group always
/// reaches it; and a namespace's first process that joined the group of a
/// process inside the namespace could never finish exiting (the kernel
/// waits for every pid of the namespace to be freed, the one it holds as its
/// group included), leaving the run unable to end (docs/containment.md).
fn lead_own_group(args: &ChildArgs) -> Result<(), sys::Errno> {
    if args.join.new_pid_ns {
        sys::setsid()
    } else {
        sys::setpgid(0, 0)
    }
}

/// Joins a new, empty, anonymous session keyring; see
/// [`ChildArgs::session_keyring_required`] for which failures are let by.
fn join_new_session_keyring(required: bool) -> Result<(), sys::Errno> {
    match sys::join_new_session_keyring() {
        Ok(()) => Ok(()),
        Err(libc::ENOSYS | libc::EPERM | libc::EACCES) if !required => Ok(()),
        Err(e) => Err(e),
    }
}

/// `fchdir` to the working directory's descriptor, else `chdir` to its path.
fn enter_working_directory(args: &ChildArgs) -> Result<(), sys::Errno> {
    if args.cwd_fd >= 0 {
        // The descriptor outlives close_range (close-on-exec only): it is the
        // directory the server checked, whatever its path names by now.
        sys::fchdir(args.cwd_fd)
    } else {
        // Safety: `cwd` points to the launch's NUL-terminated path, alive
        // until this child has exec'd.
        unsafe { sys::chdir(args.cwd) }
    }
}

/// Joins the run's groups and takes its resource limits, before anything of
/// the tool runs: a process started from here on is born in the groups.
fn join_run(args: &ChildArgs) -> Result<(), Failure> {
    let join = &args.join;
    if args.join_by_procs.load(Ordering::Relaxed) && join.cgroup_procs >= 0 {
        write_zero(join.cgroup_procs)?;
    }
    for &fd in &join.procs {
        if fd >= 0 {
            write_zero(fd)?;
        }
    }
    for &(resource, value) in &join.rlimits {
        if resource >= 0 {
            set_rlimit(resource, value)?;
        }
    }
    Ok(())
}

/// Writes "0" (this process) into an open `cgroup.procs`.
fn write_zero(fd: c_int) -> Result<(), Failure> {
    sys::write(fd, b"0").map(drop).at(Stage::Contain)
}

/// Sets `resource`'s soft and hard limit of this process to `value` (the hard
/// limit of CPU time one second later: the soft one sends SIGXCPU, which says
/// why the tool died; the hard one kills a tool that ignores it).
fn set_rlimit(resource: c_int, value: u64) -> Result<(), Failure> {
    let hard = if resource == libc::RLIMIT_CPU as c_int {
        value.saturating_add(1)
    } else {
        value
    };
    sys::set_rlimit(resource, value, hard).at(Stage::Limits)
}

/// Resets the dispositions of the signals in `mask` to SIG_DFL, then empties the
/// signal mask. After `clone`, `mask` holds every signal: handled *and* ignored
/// ones, so a tool starts with a clean slate whatever toolsrv inherited (SIGINT
/// ignored by a background shell, SIGPIPE ignored by the Rust runtime). After
/// `clone3(CLONE_CLEAR_SIGHAND)` the kernel has reset the handled ones and `mask`
/// holds only the ignored ones.
///
/// After `clone`, signals are all blocked on entry (the parent blocked them around the
/// call), so no parent handler can run in this child before its disposition is reset.
/// After `clone3` the mask is the parent thread's: the kernel has already removed every
/// handler, so a signal arriving now takes its default action, as it would in the tool.
fn reset_signals(mask: u64) -> Result<(), Failure> {
    for sig in 1..=MAX_SIGNAL {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP || mask & (1u64 << (sig - 1)) == 0 {
            continue;
        }
        sys::reset_signal_action(sig).at(Stage::Signals)?;
    }
    sys::unblock_all_signals().at(Stage::Signals)
}

#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64"
)))]
compile_error!("the spawn path supports x86_64, aarch64 and riscv64 only");
