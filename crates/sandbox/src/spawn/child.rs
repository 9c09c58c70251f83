//! The child side of the spawn: runs between `clone(CLONE_VM | CLONE_VFORK)` and `execve`.
//!
//! The child shares the parent's memory while the calling thread is suspended, and other
//! parent threads keep running. It therefore only reads [`ChildArgs`] (frozen in the
//! suspended thread's frame), makes raw system calls, and reports a failure through two
//! atomics. No allocation, no locks, no formatting, no panics.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

use libc::{c_char, c_int, c_long, c_void};

use super::sys;

/// `_NSIG - 1` on every supported architecture.
const MAX_SIGNAL: c_int = 64;
/// Size of the kernel's signal set in bytes.
const KERNEL_SIGSET_SIZE: usize = 8;

/// Setup step that failed in the child (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Stage {
    /// Resetting signal dispositions or the signal mask.
    Signals = 1,
    /// `setpgid(0, 0)`.
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
    pub(crate) stdin: c_int,
    pub(crate) output: c_int,
    /// Landlock ruleset descriptor, or -1.
    pub(crate) ruleset: c_int,
    /// Seccomp program, or null.
    pub(crate) seccomp: *const libc::sock_fprog,
    /// Whether to set `no_new_privs` (always when confined).
    pub(crate) no_new_privs: bool,
    /// The capabilities to set after `no_new_privs`, when confined and toolsrv
    /// holds more than a tool may keep.
    pub(crate) caps: Option<crate::confine::caps::Caps>,
    /// `getpid()` of the parent, captured before `clone`.
    pub(crate) parent_pid: libc::pid_t,
    /// The run's group and limits.
    pub(crate) join: super::Join,
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
    exit_now(127)
}

/// Terminates the child without running any user-space cleanup.
fn exit_now(code: c_int) -> ! {
    loop {
        // Safety: exit_group terminates the calling process; it touches no memory.
        unsafe {
            sys::call(libc::SYS_exit_group, [code as c_long, 0, 0, 0, 0, 0]);
        }
    }
}

/// Maps a raw system call result (`-errno` on failure) to a failure at `stage`.
fn check(ret: c_long, stage: Stage) -> Result<c_long, (Stage, i32)> {
    if ret < 0 {
        Err((stage, i32::try_from(-ret).unwrap_or(libc::EIO)))
    } else {
        Ok(ret)
    }
}

fn setup_and_exec(args: &ChildArgs) -> Result<(), (Stage, i32)> {
    reset_signals(args.reset_signals.load(Ordering::Relaxed))?;
    join_run(args)?;
    // Safety (all calls below): raw system calls whose pointer arguments are either null
    // or point into `args` / memory the parent keeps alive while this child runs.
    unsafe {
        check(
            sys::call(libc::SYS_setpgid, [0 as c_long, 0 as c_long, 0, 0, 0, 0]),
            Stage::ProcessGroup,
        )?;
        check(
            sys::call(
                libc::SYS_prctl,
                [
                    libc::PR_SET_PDEATHSIG as c_long,
                    libc::SIGKILL as c_long,
                    0,
                    0,
                    0,
                    0,
                ],
            ),
            Stage::DeathSignal,
        )?;
        // The parent may have died before PDEATHSIG was armed: then nobody waits for us.
        // (In a new PID namespace the parent is outside it and reads as 0; the
        // watchdog covers that window there.)
        let expected = if args.join.new_pid_ns {
            0
        } else {
            args.parent_pid as c_long
        };
        if sys::call(libc::SYS_getppid, [0, 0, 0, 0, 0, 0]) != expected {
            exit_now(127);
        }
        check(
            sys::call(
                libc::SYS_dup3,
                [args.stdin as c_long, 0 as c_long, 0 as c_long, 0, 0, 0],
            ),
            Stage::Stdio,
        )?;
        check(
            sys::call(
                libc::SYS_dup3,
                [args.output as c_long, 1 as c_long, 0 as c_long, 0, 0, 0],
            ),
            Stage::Stdio,
        )?;
        check(
            sys::call(
                libc::SYS_dup3,
                [args.output as c_long, 2 as c_long, 0 as c_long, 0, 0, 0],
            ),
            Stage::Stdio,
        )?;
        check(
            sys::call(
                libc::SYS_close_range,
                [
                    3 as c_long,
                    c_long::from(u32::MAX),
                    libc::CLOSE_RANGE_CLOEXEC as c_long,
                    0,
                    0,
                    0,
                ],
            ),
            Stage::CloseRange,
        )?;
        // The descriptor outlives close_range (close-on-exec only): it is the
        // directory the server checked, whatever its path names by now.
        let chdir = if args.cwd_fd >= 0 {
            sys::call(libc::SYS_fchdir, [args.cwd_fd as c_long, 0, 0, 0, 0, 0])
        } else {
            sys::call(libc::SYS_chdir, [(args.cwd) as c_long, 0, 0, 0, 0, 0])
        };
        check(chdir, Stage::Chdir)?;
        if args.no_new_privs {
            check(
                sys::call(
                    libc::SYS_prctl,
                    [
                        libc::PR_SET_NO_NEW_PRIVS as c_long,
                        1 as c_long,
                        0 as c_long,
                        0 as c_long,
                        0 as c_long,
                        0,
                    ],
                ),
                Stage::NoNewPrivs,
            )?;
        }
        if let Some(caps) = &args.caps {
            let mut header = crate::confine::caps::HEADER;
            check(
                sys::call(
                    libc::SYS_capset,
                    [
                        (&mut header as *mut crate::confine::caps::Header) as c_long,
                        (caps.as_ptr()) as c_long,
                        0,
                        0,
                        0,
                        0,
                    ],
                ),
                Stage::Capabilities,
            )?;
        }
        if args.ruleset >= 0 {
            check(
                sys::call(
                    libc::SYS_landlock_restrict_self,
                    [args.ruleset as c_long, 0 as c_long, 0, 0, 0, 0],
                ),
                Stage::Landlock,
            )?;
        }
        if !args.seccomp.is_null() {
            check(
                sys::call(
                    libc::SYS_prctl,
                    [
                        libc::PR_SET_SECCOMP as c_long,
                        libc::SECCOMP_MODE_FILTER as c_long,
                        (args.seccomp) as c_long,
                        0,
                        0,
                        0,
                    ],
                ),
                Stage::Seccomp,
            )?;
        }
        let ret = sys::call(
            libc::SYS_execve,
            [
                (args.program) as c_long,
                (args.argv) as c_long,
                (args.envp) as c_long,
                0,
                0,
                0,
            ],
        );
        check(ret, Stage::Exec)?;
    }
    // execve returns only on failure (then `check` returned above).
    Err((Stage::Exec, libc::EIO))
}

/// Joins the run's groups and takes its resource limits, before anything of
/// the tool runs: a process started from here on is born in the groups.
fn join_run(args: &ChildArgs) -> Result<(), (Stage, i32)> {
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
fn write_zero(fd: c_int) -> Result<(), (Stage, i32)> {
    let zero = b"0";
    // Safety: writes one byte from a static buffer to a descriptor the parent
    // keeps open until this child has exec'd.
    let ret = unsafe {
        sys::call(
            libc::SYS_write,
            [fd as c_long, zero.as_ptr() as c_long, 1, 0, 0, 0],
        )
    };
    check(ret, Stage::Contain).map(|_| ())
}

/// Sets `resource`'s soft and hard limit of this process to `value` (the hard
/// limit of CPU time one second later: the soft one sends SIGXCPU, which says
/// why the tool died; the hard one kills a tool that ignores it).
fn set_rlimit(resource: c_int, value: u64) -> Result<(), (Stage, i32)> {
    let hard = if resource == libc::RLIMIT_CPU as c_int {
        value.saturating_add(1)
    } else {
        value
    };
    let limit = [value, hard];
    // Safety: prlimit64 on this process (pid 0) reads the two words of
    // `limit` and writes nothing (null old-limit pointer).
    let ret = unsafe {
        sys::call(
            libc::SYS_prlimit64,
            [
                0,
                resource as c_long,
                limit.as_ptr() as c_long,
                std::ptr::null_mut::<c_void>() as c_long,
                0,
                0,
            ],
        )
    };
    check(ret, Stage::Limits).map(|_| ())
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
fn reset_signals(mask: u64) -> Result<(), (Stage, i32)> {
    // The kernel `struct sigaction` is at most 4 words on the supported architectures;
    // all zeroes means SIG_DFL, no flags, empty mask, whatever the field order.
    let default_action = [0u64; 4];
    for sig in 1..=MAX_SIGNAL {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP || mask & (1u64 << (sig - 1)) == 0 {
            continue;
        }
        // Safety: installs the all-zero (SIG_DFL) action read from `default_action`;
        // the old action is not requested (null pointer).
        let ret = unsafe {
            sys::call(
                libc::SYS_rt_sigaction,
                [
                    sig as c_long,
                    (default_action.as_ptr()) as c_long,
                    (std::ptr::null_mut::<c_void>()) as c_long,
                    (KERNEL_SIGSET_SIZE) as c_long,
                    0,
                    0,
                ],
            )
        };
        check(ret, Stage::Signals)?;
    }
    let empty: u64 = 0;
    // Safety: sets the mask from `empty`, a kernel sigset of KERNEL_SIGSET_SIZE bytes.
    let ret = unsafe {
        sys::call(
            libc::SYS_rt_sigprocmask,
            [
                libc::SIG_SETMASK as c_long,
                (&empty as *const u64) as c_long,
                (std::ptr::null_mut::<c_void>()) as c_long,
                (KERNEL_SIGSET_SIZE) as c_long,
                0,
                0,
            ],
        )
    };
    check(ret, Stage::Signals)?;
    Ok(())
}

#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64"
)))]
compile_error!("the spawn path supports x86_64, aarch64 and riscv64 only");
