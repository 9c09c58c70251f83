//! The remote crate's raw system calls, each behind a small safe wrapper.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `flock(fd, how)` (`LOCK_EX`, optionally `| LOCK_NB`).
pub(crate) fn flock(fd: BorrowedFd<'_>, how: libc::c_int) -> io::Result<()> {
    // Safety: `fd` is borrowed, so it is open for this call; flock(2) takes
    // integers only and touches no memory of ours.
    if unsafe { libc::flock(fd.as_raw_fd(), how) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

pub(crate) use toolsrv_base::process::kill;

/// `setsid()`: the calling process leads a new session with no terminal.
/// Async-signal-safe, so it may run between fork and exec.
pub(crate) fn setsid() -> io::Result<()> {
    // Safety: setsid(2) takes no arguments and touches no memory.
    if unsafe { libc::setsid() } == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Handle `sig` with `handler`.
///
/// # Safety
///
/// `handler` runs inside a signal handler: it must only do async-signal-safe
/// work (such as storing to an atomic).
pub(crate) unsafe fn set_signal_handler(sig: libc::c_int, handler: extern "C" fn(libc::c_int)) {
    // Safety: `handler` is an `extern "C" fn(c_int)`, the type signal(2)
    // expects; the caller promises it is async-signal-safe.
    unsafe {
        libc::signal(sig, handler as *const () as libc::sighandler_t);
    }
}

/// Ignore `sig`.
pub(crate) fn ignore_signal(sig: libc::c_int) {
    // Safety: SIG_IGN installs no code of ours.
    unsafe {
        libc::signal(sig, libc::SIG_IGN);
    }
}
