//! The child spawn path: a vfork-style child that joins its own process group, applies
//! the confinement and `exec`s the tool.
//!
//! The child is created with `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD)` (or
//! `clone3` with `CLONE_CLEAR_SIGHAND`, see the `clone3` module), like
//! glibc's `posix_spawn`: no page tables are copied, so the cost does not grow with the
//! server's memory. The child runs `child::child_main` on a small private stack and only
//! makes raw system calls until `execve`. [`spawn`] waits (`CLONE_VFORK`) until the child
//! has exec'd; [`spawn_detached`] does not, and keeps what the child reads alive in a
//! `launch::Launch` owned by the [`Child`].
//!
//! The parent-death signal is tied to the *thread* that called [`spawn`]: call it from a
//! thread that lives as long as the children (a runtime worker thread, not a short-lived
//! blocking-pool thread), or the child is killed when that thread exits.

mod child;
mod clone3;
mod idmap;
mod launch;
mod process;
mod stack;
mod sys;

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

pub use process::{Child, ExitStatus};

use crate::confine::Confinement;
use child::{ChildArgs, Stage};

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
    /// Where stdout and stderr both go (typically a pipe's write end).
    pub output: BorrowedFd<'a>,
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
    pub cgroup: RawFd,
    /// That group's `cgroup.procs`, written by the child where the kernel
    /// refuses `CLONE_INTO_CGROUP` (or has no `clone3`), or -1.
    pub cgroup_procs: RawFd,
    /// cgroup v1 `cgroup.procs` files the child writes itself into, -1 unused.
    pub procs: [RawFd; 3],
    /// `(resource, value)` pairs set as both soft and hard limit; resource -1 unused.
    pub rlimits: [(i32, u64); 4],
    /// Start the child as the first process of a new PID namespace.
    pub new_pid_ns: bool,
    /// ... and of a new user namespace (a server without CAP_SYS_ADMIN).
    pub new_user_ns: bool,
    /// With `new_user_ns`: the server's uid and gid, which the child maps to
    /// themselves in its new user namespace (CONTRACT §13: a tool sees its
    /// server's identity).
    pub own_ids: Option<crate::identity::IdMaps>,
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
            own_ids: None,
        }
    }
}

impl Join {
    /// The namespace flags of `clone`.
    fn namespace_flags(&self) -> u64 {
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

/// Why a tool could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// `execve` failed.
    #[error("cannot start {program}: {source}")]
    Start {
        /// The program path.
        program: String,
        /// The OS error.
        source: io::Error,
    },
    /// `chdir` to the working directory failed.
    #[error("cannot chdir to {cwd}: {source}")]
    Chdir {
        /// The working directory.
        cwd: String,
        /// The OS error.
        source: io::Error,
    },
    /// `landlock_restrict_self` failed.
    #[error("cannot apply landlock ruleset: {0}")]
    Landlock(io::Error),
    /// Installing the seccomp filter failed.
    #[error("cannot apply seccomp filter: {0}")]
    Seccomp(io::Error),
    /// `PR_SET_NO_NEW_PRIVS` failed.
    #[error("cannot set no_new_privs: {0}")]
    NoNewPrivs(io::Error),
    /// Another step of the child setup failed.
    #[error("cannot set up the child process ({step}): {source}")]
    Setup {
        /// The step: signals, process group, death signal, stdio or close_range.
        step: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// The child failed and reported an unknown stage (should not happen).
    #[error("child process failed at unknown stage {0}")]
    UnknownStage(u32),
    /// Preparing the spawn in the parent failed.
    #[error("cannot prepare the child process ({step}): {source}")]
    Prepare {
        /// The step: /dev/null, descriptors, stack or clone.
        step: &'static str,
        /// The OS error.
        source: io::Error,
    },
}

/// Starts the tool described by `spec` and returns once it has exec'd (or failed).
///
/// On success the child runs `spec.program` as the leader of its own process group, with
/// stdin from `/dev/null`, stdout and stderr on `spec.output`, no other descriptor, default
/// signal handling, and the confinement applied.
pub fn spawn(spec: &SpawnSpec) -> Result<Child, SpawnError> {
    let devnull = dev_null()?;
    let (output, _output_dup) = output_fd(spec)?;
    let argv = null_terminated(spec.argv);
    let envp = null_terminated(spec.envp);
    let fprog = spec
        .confinement
        .and_then(Confinement::seccomp_program)
        .map(seccomp_fprog)
        .transpose()?;
    let args = child_args(
        ChildStrings {
            program: spec.program,
            argv: &argv,
            envp: &envp,
            cwd: spec.cwd,
            cwd_fd: spec.cwd_fd.map_or(-1, |fd| fd.as_raw_fd()),
            mount_ns: spec.mount_ns.map_or(-1, |fd| fd.as_raw_fd()),
        },
        devnull.as_raw_fd(),
        output,
        spec.confinement,
        fprog.as_ref(),
        &spec.join,
    );
    // One stack per thread, reused: CLONE_VFORK keeps this thread suspended until
    // the child has exec'd or exited, so the stack is free again when clone
    // returns (and no other spawn can run on this thread meanwhile).
    let (pid, pidfd) = stack::with_thread_stack(|stack| clone_vfork(&args, stack, &spec.join))
        .map_err(|source| SpawnError::Prepare {
        step: "stack",
        source,
    })??;
    let stage = args.failed_stage.load(Ordering::Acquire);
    if stage == 0 {
        return Ok(Child::new(pid, pidfd));
    }
    let errno = args.failed_errno.load(Ordering::Relaxed);
    // The child has exited (or is about to): reap it so no zombie is left.
    let _ = process::wait_pidfd(std::os::fd::AsFd::as_fd(&pidfd), 0);
    Err(child_error(spec.program, spec.cwd, stage, errno))
}

/// Starts the tool described by `spec` like [`spawn`], but returns as soon as the
/// child exists, without waiting for its `execve`: the calling thread goes on
/// while the child sets itself up (on a loaded machine that wait, with the child
/// queued for a CPU behind running tools, was a few hundred µs per spawn).
///
/// The child is already the leader of its own process group when this returns
/// (the parent calls `setpgid` too), so [`Child::signal_group`] reaches it;
/// except the first process of a PID namespace, which leads a session of its
/// own as soon as it runs (kill it by pid until then). A
/// failure of the child's setup (no such program, a bad working directory, a
/// refused confinement) is not returned here: the child exits with status 127
/// and [`Child::setup_error`] tells why once it has been reaped.
///
/// Uses `clone3` without `CLONE_VFORK` (x86_64); where that is unavailable it is
/// [`spawn`], and setup failures are returned at once as there.
pub fn spawn_detached(spec: &SpawnSpec) -> Result<Child, SpawnError> {
    if !clone3::available() {
        return spawn(spec);
    }
    let devnull = dev_null()?;
    // A duplicate made for the output may be closed once `clone` returned: the
    // child has its own copy of the descriptor table.
    let (output, _output_dup) = output_fd(spec)?;
    let launch = launch::Launch::new(spec, devnull.as_raw_fd(), output)?;
    launch
        .args
        .reset_signals
        .store(clone3::ignored_signals(), Ordering::Relaxed);
    let stack = launch::take_stack().map_err(|source| SpawnError::Prepare {
        step: "stack",
        source,
    })?;
    let (low, size) = stack.region();
    let mut pidfd: libc::c_int = -1;
    let arg = &launch.args as *const ChildArgs as *mut libc::c_void;
    // Safety: the child runs `child_main` on `stack` and reads only the launch,
    // which is boxed (stable address) and kept unchanged until the kernel clears
    // `in_use` (the `Child` owns it; `launch::retire` parks it while the child may
    // still read it); the stack is lent (`launch::lend`) until then too.
    // `child_main` makes raw system calls only, which leave this thread's errno
    // alone (`sys`).
    let outcome = unsafe {
        clone_into_run(
            clone3::Mode::Detached {
                in_use: &launch.in_use,
            },
            &launch.args,
            &spec.join,
            arg,
            (low, size),
            &mut pidfd,
        )
    };
    let pid = match outcome {
        clone3::Outcome::Started(pid) => {
            launch::lend(stack, launch.in_use.clone());
            pid
        }
        clone3::Outcome::Failed(errno) => {
            launch::give_back(stack);
            launch::discard(launch);
            return Err(SpawnError::Prepare {
                step: "clone",
                source: io::Error::from_raw_os_error(errno),
            });
        }
        clone3::Outcome::Unavailable => {
            launch::give_back(stack);
            launch::discard(launch);
            return spawn(spec);
        }
    };
    // The child makes itself a group leader too; whichever is first wins, and a
    // child that has exec'd already (EACCES) or exited (ESRCH) needs nothing.
    // The first process of a PID namespace makes itself a session leader
    // instead, which a group leader cannot become: that one is left alone.
    if !spec.join.new_pid_ns {
        // Safety: setpgid has no memory arguments.
        unsafe { libc::setpgid(pid, pid) };
    }
    if pidfd < 0 {
        // Cannot happen with CLONE_PIDFD; the child is left to the reaper, and
        // its launch parked until the child is done with it.
        launch::retire(launch);
        return Err(SpawnError::Prepare {
            step: "pidfd",
            source: io::Error::from_raw_os_error(libc::EBADF),
        });
    }
    // Safety: CLONE_PIDFD returned a fresh descriptor that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Ok(Child::detached(pid, pidfd, launch))
}

/// Clones the vfork child: with `clone3(CLONE_CLEAR_SIGHAND)` where the kernel
/// allows it, else with `clone(2)` and every signal blocked around the call.
///
/// The `clone3` path leaves the signal mask alone: the kernel resets every
/// handled signal in the child, so no handler of ours can run there, and a
/// signal that reaches the child before `execve` takes its default action, as
/// it would in the tool. Blocking signals here would cost two system calls per
/// spawn and, worse, make the kernel queue each SIGCHLD of a tool ending
/// meanwhile (a blocked signal is never discarded as ignored) and wake another
/// thread of the server to discard it: a cross-CPU wake-up per call.
fn clone_vfork(
    args: &ChildArgs,
    stack: &stack::ChildStack,
    join: &Join,
) -> Result<(i32, OwnedFd), SpawnError> {
    let mut pidfd: libc::c_int = -1;
    let arg = args as *const ChildArgs as *mut libc::c_void;
    let (low, size) = stack.region();
    args.reset_signals
        .store(clone3::ignored_signals(), Ordering::Relaxed);
    // Safety: as for `clone` in `clone_legacy`; `region` is the same unused stack,
    // and the top of an mmap'd region is page- (so 16-byte) aligned.
    let first = unsafe {
        clone_into_run(
            clone3::Mode::Vfork,
            args,
            join,
            arg,
            (low, size),
            &mut pidfd,
        )
    };
    let started = match first {
        clone3::Outcome::Started(pid) => Ok(pid),
        clone3::Outcome::Failed(errno) => Err(errno),
        clone3::Outcome::Unavailable => {
            args.reset_signals.store(u64::MAX, Ordering::Relaxed);
            args.join_by_procs.store(true, Ordering::Relaxed);
            with_signals_blocked(|| clone_legacy(args, stack, &mut pidfd, join))?
        }
    };
    let pid = started.map_err(|errno| SpawnError::Prepare {
        step: "clone",
        source: io::Error::from_raw_os_error(errno),
    })?;
    if pidfd < 0 {
        return Err(SpawnError::Prepare {
            step: "pidfd",
            source: io::Error::from_raw_os_error(libc::EBADF),
        });
    }
    // Safety: CLONE_PIDFD returned a fresh descriptor that nothing else owns.
    Ok((pid, unsafe { OwnedFd::from_raw_fd(pidfd) }))
}

/// `clone3` of the child into its run: started in the run's v2 group
/// (`CLONE_INTO_CGROUP`) when there is one, and if the kernel refuses that,
/// again without it (the child then writes itself into the group's
/// `cgroup.procs`), with the run's namespaces either way.
///
/// # Safety
/// As for [`clone3::clone3`] with `mode`, `child_main`, `arg` (which points at
/// `args`) and the stack `region`.
unsafe fn clone_into_run(
    mode: clone3::Mode<'_>,
    args: &ChildArgs,
    join: &Join,
    arg: *mut libc::c_void,
    region: (*mut libc::c_void, usize),
    pidfd: &mut libc::c_int,
) -> clone3::Outcome {
    let attempts: &[bool] = if join.cgroup >= 0 {
        &[true, false]
    } else {
        &[false]
    };
    let mut outcome = clone3::Outcome::Unavailable;
    for &into_cgroup in attempts {
        // The child reads this only after `clone3` succeeded, and an attempt
        // that failed started no child.
        args.join_by_procs.store(!into_cgroup, Ordering::Relaxed);
        let extra = clone3::Extra {
            flags: join.namespace_flags(),
            cgroup: into_cgroup.then_some(join.cgroup),
        };
        // Safety: forwarded to the caller's contract.
        outcome = unsafe {
            clone3::clone3(
                mode,
                extra,
                child::child_main,
                arg,
                region.0,
                region.1,
                pidfd,
            )
        };
        if matches!(outcome, clone3::Outcome::Started(_)) {
            break;
        }
    }
    outcome
}

/// Runs `f` with every signal blocked in this thread, then restores the mask:
/// the child of `clone(2)` keeps our handlers until it has reset them, so none
/// may be delivered to it before.
fn with_signals_blocked<T>(f: impl FnOnce() -> T) -> Result<T, SpawnError> {
    let mut all = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    let mut old = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // Safety: sigfillset initialises `all`; pthread_sigmask reads `all` and stores the
    // previous mask into `old`.
    let ret = unsafe {
        libc::sigfillset(all.as_mut_ptr());
        libc::pthread_sigmask(libc::SIG_SETMASK, all.as_ptr(), old.as_mut_ptr())
    };
    if ret != 0 {
        return Err(SpawnError::Prepare {
            step: "signal mask",
            source: io::Error::from_raw_os_error(ret),
        });
    }
    let out = f();
    // Safety: restores the mask saved by the successful pthread_sigmask above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, old.as_ptr(), std::ptr::null_mut());
    }
    Ok(out)
}

/// `clone(2)` of the vfork child (where `clone3` is unavailable): its pid, or
/// the errno.
fn clone_legacy(
    args: &ChildArgs,
    stack: &stack::ChildStack,
    pidfd: &mut libc::c_int,
    join: &Join,
) -> Result<i32, i32> {
    let flags = libc::CLONE_VM
        | libc::CLONE_VFORK
        | libc::CLONE_PIDFD
        | libc::SIGCHLD
        | join.namespace_flags() as libc::c_int;
    // Safety: `child_main` only reads `args` and writes its atomics; `args`, the argv/envp
    // arrays and the strings they point to live in the caller's frame, which stays
    // suspended (CLONE_VFORK) until the child has exec'd or exited. The child runs on
    // `stack`, a separate mapping that outlives the call. CLONE_PIDFD stores the pidfd
    // into `pidfd`.
    let pid = unsafe {
        libc::clone(
            child::child_main,
            stack.top(),
            flags,
            args as *const ChildArgs as *mut libc::c_void,
            pidfd as *mut libc::c_int,
        )
    };
    if pid < 0 {
        Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    } else {
        Ok(pid)
    }
}

fn child_error(program: &CStr, cwd: &CStr, stage: u32, errno: i32) -> SpawnError {
    let source = io::Error::from_raw_os_error(errno);
    let setup = |step| SpawnError::Setup {
        step,
        source: io::Error::from_raw_os_error(errno),
    };
    match Stage::from_u32(stage) {
        Some(Stage::Exec) => SpawnError::Start {
            program: program.to_string_lossy().into_owned(),
            source,
        },
        Some(Stage::Chdir) => SpawnError::Chdir {
            cwd: cwd.to_string_lossy().into_owned(),
            source,
        },
        Some(Stage::Landlock) => SpawnError::Landlock(source),
        Some(Stage::Seccomp) => SpawnError::Seccomp(source),
        Some(Stage::NoNewPrivs) => SpawnError::NoNewPrivs(source),
        Some(Stage::Signals) => setup("signals"),
        Some(Stage::ProcessGroup) => setup("process group"),
        Some(Stage::DeathSignal) => setup("death signal"),
        Some(Stage::Stdio) => setup("stdio"),
        Some(Stage::CloseRange) => setup("close_range"),
        Some(Stage::Capabilities) => setup("capabilities"),
        Some(Stage::Contain) => setup("joining the run's cgroup"),
        Some(Stage::Limits) => setup("resource limits"),
        Some(Stage::Identity) => {
            setup("mapping the server's uid and gid in the run's user namespace")
        }
        Some(Stage::View) => setup("entering the filesystem view"),
        None => SpawnError::UnknownStage(stage),
    }
}

/// What the child's strings are: the program, NULL-terminated pointer arrays of
/// argv and envp, the working directory. All must outlive the child's use.
struct ChildStrings<'a> {
    program: &'a CStr,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    cwd: &'a CStr,
    cwd_fd: RawFd,
    mount_ns: RawFd,
}

/// The child's argument block, pointing at `strings`, the descriptors and the
/// seccomp program (which must outlive the child's use too); signals to reset
/// are set before each `clone` attempt.
fn child_args(
    strings: ChildStrings<'_>,
    stdin: RawFd,
    output: RawFd,
    confinement: Option<&Confinement>,
    seccomp: Option<&libc::sock_fprog>,
    join: &Join,
) -> ChildArgs {
    ChildArgs {
        program: strings.program.as_ptr(),
        argv: strings.argv.as_ptr(),
        envp: strings.envp.as_ptr(),
        cwd: strings.cwd.as_ptr(),
        cwd_fd: strings.cwd_fd,
        mount_ns: strings.mount_ns,
        stdin,
        output,
        ruleset: confinement.and_then(Confinement::ruleset_fd).unwrap_or(-1),
        seccomp: seccomp.map_or(std::ptr::null(), |p| p as *const libc::sock_fprog),
        no_new_privs: confinement.is_some(),
        caps: confinement.and_then(|c| {
            if join.new_pid_ns && !join.new_user_ns {
                c.caps_for_pid_namespace()
            } else {
                c.caps()
            }
        }),
        parent_pid: own_pid(),
        join: *join,
        join_by_procs: AtomicBool::new(false),
        failed_stage: AtomicU32::new(0),
        failed_errno: AtomicI32::new(0),
        reset_signals: AtomicU64::new(u64::MAX),
    }
}

/// This process's pid, asked of the kernel once: one `getpid` less per
/// spawn. A child made by `fork(3)` forgets the parent's (an atfork handler);
/// one made by a raw `clone` that spawns tools would pass a stale pid, and its
/// children would fail their parent check and exit 127 (they would not run
/// unwatched).
fn own_pid() -> libc::pid_t {
    static PID: AtomicI32 = AtomicI32::new(0);
    static FORGET_ON_FORK: std::sync::Once = std::sync::Once::new();
    extern "C" fn forget() {
        PID.store(0, Ordering::Relaxed);
    }
    FORGET_ON_FORK.call_once(|| {
        // Safety: registers a handler that only stores to an atomic, which
        // is async-signal-safe as a fork child handler must be.
        unsafe { libc::pthread_atfork(None, None, Some(forget)) };
    });
    match PID.load(Ordering::Relaxed) {
        0 => {
            // Safety: getpid has no preconditions.
            let pid = unsafe { libc::getpid() };
            PID.store(pid, Ordering::Relaxed);
            pid
        }
        pid => pid,
    }
}

/// The `sock_fprog` over `filter` (which must outlive it).
fn seccomp_fprog(filter: &[libc::sock_filter]) -> Result<libc::sock_fprog, SpawnError> {
    Ok(libc::sock_fprog {
        len: u16::try_from(filter.len()).map_err(|_| SpawnError::Prepare {
            step: "seccomp program",
            source: io::Error::from_raw_os_error(libc::E2BIG),
        })?,
        filter: filter.as_ptr().cast_mut(),
    })
}

/// The descriptor the child should `dup3` onto 1 and 2, and the duplicate to keep
/// open until `clone` returned, if one was needed: the child `dup3`s onto 0, 1 and
/// 2, so no source descriptor may be one of them.
fn output_fd(spec: &SpawnSpec) -> Result<(RawFd, Option<OwnedFd>), SpawnError> {
    let fd = spec.output.as_raw_fd();
    if fd >= 3 {
        return Ok((fd, None));
    }
    let dup = dup_high(fd)?;
    Ok((dup.as_raw_fd(), Some(dup)))
}

/// Builds a NULL-terminated pointer array over `strings` (which must outlive it).
fn null_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// `/dev/null`, opened once for the life of the process and shared by every
/// spawn (each child `dup3`s it onto its stdin; an open per spawn cost a path
/// lookup and two descriptor-table updates per call).
static DEV_NULL: OnceLock<OwnedFd> = OnceLock::new();

/// The shared `/dev/null` descriptor, opened on first use.
fn dev_null() -> Result<BorrowedFd<'static>, SpawnError> {
    if DEV_NULL.get().is_none() {
        // A concurrent first use may win the race: then ours is closed here.
        let _ = DEV_NULL.set(open_devnull()?);
    }
    DEV_NULL
        .get()
        .map(AsFd::as_fd)
        .ok_or_else(|| SpawnError::Prepare {
            step: "/dev/null",
            source: io::Error::from_raw_os_error(libc::EBADF),
        })
}

/// Use `clone(2)` and the per-signal reset from now on, as on kernels or
/// architectures without `clone3` (for the tests of that path).
#[doc(hidden)]
pub fn disable_clone3() {
    clone3::disable();
}

/// Open the `/dev/null` descriptor every spawn shares now rather than at the
/// first spawn (so a count of open descriptors taken after startup stays put).
pub fn preopen() -> Result<(), SpawnError> {
    dev_null().map(|_| ())
}

/// Opens `/dev/null` read-only, close-on-exec, at descriptor 3 or above.
fn open_devnull() -> Result<OwnedFd, SpawnError> {
    let prepare = |source| SpawnError::Prepare {
        step: "/dev/null",
        source,
    };
    let file = std::fs::File::open("/dev/null").map_err(prepare)?;
    let fd = OwnedFd::from(file);
    if fd.as_raw_fd() < 3 {
        return dup_high(fd.as_raw_fd());
    }
    Ok(fd)
}

/// Duplicates `fd` to a close-on-exec descriptor numbered 3 or above.
fn dup_high(fd: i32) -> Result<OwnedFd, SpawnError> {
    // Safety: F_DUPFD_CLOEXEC on a descriptor the caller keeps open has no memory effects.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(SpawnError::Prepare {
            step: "descriptors",
            source: io::Error::last_os_error(),
        });
    }
    // Safety: `new` is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}
