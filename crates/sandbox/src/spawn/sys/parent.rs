//! The parent's system calls on the spawn path: the clone itself where
//! `clone3` is unavailable, the signal mask around it, the child's stack
//! mapping, descriptors, and waiting for and signalling a child. Unlike the
//! child's calls beside them these go through libc and report failures as
//! [`std::io::Error`] (`errno` is the calling thread's own here).

use std::io;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use libc::{c_int, c_void};

/// A signal mask saved by [`block_all_signals`].
pub(crate) struct SavedMask(libc::sigset_t);

/// Blocks every signal in this thread; the mask before, or the error number.
pub(crate) fn block_all_signals() -> Result<SavedMask, i32> {
    let mut all = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    let mut old = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // Safety: sigfillset initialises `all`; pthread_sigmask reads `all` and stores the
    // previous mask into `old`.
    let ret = unsafe {
        libc::sigfillset(all.as_mut_ptr());
        libc::pthread_sigmask(libc::SIG_SETMASK, all.as_ptr(), old.as_mut_ptr())
    };
    if ret != 0 {
        return Err(ret);
    }
    // Safety: the successful pthread_sigmask above wrote the previous mask.
    Ok(SavedMask(unsafe { old.assume_init() }))
}

/// Restores the mask [`block_all_signals`] saved.
pub(crate) fn restore_signal_mask(saved: &SavedMask) {
    // Safety: `saved` holds a mask the kernel gave; no mask is read back.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &saved.0, std::ptr::null_mut());
    }
}

/// `clone(2)`: the child's pid, or the error number.
///
/// # Safety
/// `child` must only use memory that stays valid while it runs (with
/// `CLONE_VM` it shares ours), `stack_top` must be the top of a mapping it may
/// use as its stack, and `pidfd` is written when `flags` holds `CLONE_PIDFD`.
pub(crate) unsafe fn clone(
    child: extern "C" fn(*mut c_void) -> c_int,
    stack_top: *mut c_void,
    flags: c_int,
    arg: *mut c_void,
    pidfd: &mut c_int,
) -> Result<i32, i32> {
    // Safety: forwarded to the caller's contract.
    let pid = unsafe { libc::clone(child, stack_top, flags, arg, pidfd as *mut c_int) };
    if pid < 0 {
        Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    } else {
        Ok(pid)
    }
}

/// Registers `handler` to run in the child of every `fork(3)` of this process.
pub(crate) fn on_fork_child(handler: unsafe extern "C" fn()) {
    // Safety: registers a handler; the caller's must be async-signal-safe, as
    // a fork child handler must be (pthread_atfork takes no other pointer).
    unsafe { libc::pthread_atfork(None, None, Some(handler)) };
}

/// `prctl(PR_GET_DUMPABLE) == 1`: whether this process may be dumped and
/// traced by its owner.
pub(crate) fn dumpable() -> bool {
    // Safety: PR_GET_DUMPABLE takes no pointers.
    unsafe { libc::prctl(libc::PR_GET_DUMPABLE) == 1 }
}

/// This process's pid.
pub(crate) fn getpid() -> libc::pid_t {
    // Safety: getpid has no preconditions.
    unsafe { libc::getpid() }
}

/// Duplicates `fd` to a close-on-exec descriptor numbered 3 or above.
pub(crate) fn dup_cloexec_above_stdio(fd: RawFd) -> io::Result<OwnedFd> {
    dup_cloexec_from(fd, 3)
}

/// Duplicates `fd` to a close-on-exec descriptor numbered `min` or above.
pub(crate) fn dup_cloexec_from(fd: RawFd, min: RawFd) -> io::Result<OwnedFd> {
    // Safety: F_DUPFD_CLOEXEC on a descriptor the caller keeps open has no memory effects.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, min) };
    if new < 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: `new` is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

pub(crate) use toolsrv_base::process::kill;

/// The process group of `pid`, or -1 where it has none (it is gone).
pub(crate) fn getpgid(pid: i32) -> i32 {
    // Safety: getpgid has no memory arguments.
    unsafe { libc::getpgid(pid) }
}

/// `waitid(P_PIDFD, fd, WEXITED | extra)` once: `None` when no child has
/// exited (only with `WNOHANG`), else its `(si_code, si_status)`.
pub(crate) fn waitid_pidfd(fd: BorrowedFd<'_>, extra: i32) -> io::Result<Option<(i32, i32)>> {
    use std::os::fd::AsRawFd;
    let mut info = std::mem::MaybeUninit::<libc::siginfo_t>::zeroed();
    // Safety: `info` is writable memory of the size of siginfo_t, zeroed so that
    // si_pid reads 0 when WNOHANG finds no exited child.
    let ret = unsafe {
        libc::waitid(
            libc::P_PIDFD,
            fd.as_raw_fd() as libc::id_t,
            info.as_mut_ptr(),
            libc::WEXITED | extra,
        )
    };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    // Safety: waitid succeeded and the buffer was zero-initialised before.
    let info = unsafe { info.assume_init() };
    // Safety: for SIGCHLD siginfo (what waitid fills in), si_pid and si_status are
    // the valid union members.
    let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
    if pid == 0 {
        return Ok(None);
    }
    Ok(Some((info.si_code, status)))
}

/// Maps `len` bytes of private anonymous read-write stack memory.
pub(crate) fn map_stack(len: usize) -> io::Result<NonNull<c_void>> {
    // Safety: an anonymous private mapping at a kernel-chosen address has no
    // preconditions; the result is checked against MAP_FAILED.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(base).ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))
}

/// Makes the first `len` bytes at `base` inaccessible (a guard page).
///
/// # Safety
/// `base..base + len` must lie inside a mapping the caller owns.
pub(crate) unsafe fn guard(base: NonNull<c_void>, len: usize) -> io::Result<()> {
    // Safety: forwarded to the caller's contract.
    if unsafe { libc::mprotect(base.as_ptr(), len, libc::PROT_NONE) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Unmaps `len` bytes at `base`.
///
/// # Safety
/// The mapping must be the caller's, and nothing may use it any more.
pub(crate) unsafe fn unmap(base: NonNull<c_void>, len: usize) {
    // Safety: forwarded to the caller's contract.
    unsafe {
        libc::munmap(base.as_ptr(), len);
    }
}

/// The page size, or `None` where the system does not say.
pub(crate) fn page_size() -> Option<usize> {
    // Safety: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).ok().filter(|&s| s > 0)
}

/// The disposition of signal `sig` as the kernel's `struct sigaction` (at
/// most 4 words; the handler comes first on x86_64, aarch64 and riscv64), as
/// the raw call sees it (it also sees the signals glibc reserves for itself,
/// 32 and 33, which its wrapper hides). `None` where the kernel refuses.
pub(crate) fn signal_disposition(sig: u64) -> Option<[u64; 4]> {
    let mut old = [0u64; 4];
    // Safety: queries (does not change) the disposition of `sig` into `old`,
    // which is large enough for the kernel's structure.
    let r = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig as libc::c_long,
            std::ptr::null::<c_void>(),
            old.as_mut_ptr(),
            8 as libc::c_long,
        )
    };
    (r == 0).then_some(old)
}
