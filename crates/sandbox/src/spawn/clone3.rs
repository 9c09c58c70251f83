//! `clone3(CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_CLEAR_SIGHAND)`: the kernel
//! resets every *handled* signal to its default disposition in the child, so the child
//! need not make one `rt_sigaction` call per signal (63 system calls per spawn) to keep
//! toolsrv's handlers from ever running in it. It only resets the signals toolsrv
//! *ignores* (those survive both `CLONE_CLEAR_SIGHAND` and `execve`), usually just
//! SIGPIPE.
//!
//! glibc has no public `clone3` wrapper, and the child of `clone3` resumes at the
//! system call itself, on the new stack: the call is made from a few lines of assembly
//! (`sys/clone3.rs`) that, in the child, call the child function on that stack. x86_64 only; elsewhere,
//! or when the kernel refuses `clone3` (before Linux 5.5, or a seccomp policy), the
//! caller falls back to `clone(2)` and the per-signal reset.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::OnceLock;

use libc::{c_int, c_void};

use super::sys::clone3::{raw_clone3, CloneArgs};

/// `CLONE_CLEAR_SIGHAND` (Linux 5.5): not in every libc release.
const CLONE_CLEAR_SIGHAND: u64 = 0x1_0000_0000;

/// `CLONE_INTO_CGROUP` (Linux 5.7).
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
/// Size of the first version of `struct clone_args`.
const CLONE_ARGS_SIZE_VER0: usize = 64;

/// What a spawn adds to the plain clone: namespaces and a cgroup.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Extra {
    /// `CLONE_NEW*` flags.
    pub(crate) flags: u64,
    /// A cgroup v2 directory descriptor to start the child in.
    pub(crate) cgroup: Option<i32>,
}

/// Set once `clone3` was refused: every later spawn goes straight to `clone`.
static REFUSED: AtomicBool = AtomicBool::new(false);

/// Never try `clone3` again in this process.
pub(crate) fn disable() {
    REFUSED.store(true, Ordering::Relaxed);
}

/// What [`clone3`] did.
pub(crate) enum Outcome {
    /// The child ran and has exec'd or exited: its pid.
    Started(i32),
    /// `clone3` is not available here: use `clone`.
    Unavailable,
    /// `clone3` failed with this errno.
    Failed(i32),
}

/// Signals toolsrv ignores (bit `n - 1` for signal `n`), read once: the child resets
/// these. Dispositions only change at startup (the Rust runtime ignores SIGPIPE, a
/// parent shell may have ignored SIGINT/SIGQUIT); a signal set to SIG_IGN later would
/// merely stay ignored in tools, it could never run a handler in the child.
pub(crate) fn ignored_signals() -> u64 {
    static IGNORED: OnceLock<u64> = OnceLock::new();
    *IGNORED.get_or_init(|| {
        let mut mask = 0u64;
        for sig in 1..=64u64 {
            let old = super::sys::parent::signal_disposition(sig);
            if old.is_some_and(|old| old[0] == libc::SIG_IGN as u64) {
                mask |= 1 << (sig - 1);
            }
        }
        mask
    })
}

/// How the parent waits for the child.
#[derive(Clone, Copy)]
pub(crate) enum Mode<'a> {
    /// `CLONE_VFORK`: this thread stays suspended until the child has exec'd or
    /// exited.
    Vfork,
    /// No waiting: `clone3` returns at once, while the child runs. The kernel
    /// clears `in_use` (`CLONE_CHILD_CLEARTID`) when the child execs or exits.
    Detached {
        /// Nonzero before the call.
        in_use: &'a AtomicU32,
    },
}

/// Start `child(arg)` on the stack `[stack, stack + stack_size)` as a `CLONE_VM`
/// child (exit signal SIGCHLD) with handled signals reset; the pidfd is stored in
/// `*pidfd`.
///
/// # Safety
/// As for `clone(2)` with `CLONE_VM`: `child` must never return and only make raw
/// system calls; the stack must be unused and 16-byte aligned at its top.
/// Everything the child reads must stay valid and unchanged until it has exec'd or
/// exited: with [`Mode::Vfork`] this thread is suspended until then; with
/// [`Mode::Detached`] the caller must keep it so until `in_use` reads 0 (that
/// includes the stack and `in_use` itself), and the child must not touch this
/// thread's thread-local storage (`errno` included).
pub(crate) unsafe fn clone3(
    mode: Mode<'_>,
    extra: Extra,
    child: extern "C" fn(*mut c_void) -> c_int,
    arg: *mut c_void,
    stack: *mut c_void,
    stack_size: usize,
    pidfd: &mut c_int,
) -> Outcome {
    let (wait, child_tid) = match mode {
        Mode::Vfork => (libc::CLONE_VFORK as u64, 0),
        Mode::Detached { in_use } => (libc::CLONE_CHILD_CLEARTID as u64, in_use.as_ptr() as u64),
    };
    if REFUSED.load(Ordering::Relaxed) {
        return Outcome::Unavailable;
    }
    let into_cgroup = if extra.cgroup.is_some() {
        CLONE_INTO_CGROUP
    } else {
        0
    };
    let args = CloneArgs {
        flags: (libc::CLONE_VM | libc::CLONE_PIDFD) as u64
            | CLONE_CLEAR_SIGHAND
            | wait
            | extra.flags
            | into_cgroup,
        pidfd: pidfd as *mut c_int as u64,
        child_tid,
        parent_tid: 0,
        // The kernel sends SIGCHLD for an exec'd child whatever is asked here
        // (measured: `exit_signal: 0` changed nothing), so ask for the usual.
        exit_signal: libc::SIGCHLD as u64,
        stack: stack as u64,
        stack_size: stack_size as u64,
        tls: 0,
        set_tid: 0,
        set_tid_size: 0,
        cgroup: extra.cgroup.map_or(0, |fd| fd as u64),
    };
    let size = if extra.cgroup.is_some() {
        std::mem::size_of::<CloneArgs>()
    } else {
        CLONE_ARGS_SIZE_VER0
    };
    // Safety: forwarded to the caller's contract; `size` never exceeds `args`.
    let ret = unsafe { raw_clone3(&args, size, child, arg) };
    if ret >= 0 {
        return Outcome::Started(ret as i32);
    }
    let errno = -ret as i32;
    // A refusal of a namespace or a cgroup says nothing about `clone3` itself.
    if extra.flags != 0 || extra.cgroup.is_some() {
        return Outcome::Failed(errno);
    }
    match errno {
        libc::ENOSYS | libc::EINVAL | libc::E2BIG | libc::EPERM => {
            REFUSED.store(true, Ordering::Relaxed);
            Outcome::Unavailable
        }
        e => Outcome::Failed(e),
    }
}

/// Whether `clone3` may be tried (it was not refused, and this architecture has it).
pub(crate) fn available() -> bool {
    cfg!(target_arch = "x86_64") && !REFUSED.load(Ordering::Relaxed)
}
