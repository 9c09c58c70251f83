//! This crate's raw system calls, each behind a safe wrapper.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `geteuid()`.
pub(crate) fn geteuid() -> u32 {
    // Safety: geteuid(2) has no preconditions, cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// `pidfd_send_signal(pidfd, sig, NULL, 0)`: `sig` to the process `pidfd`
/// names (never to another one that reused its pid).
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: i32) -> io::Result<()> {
    // Safety: the pidfd is borrowed, so open; no siginfo is passed (null);
    // the rest are integers.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `kill(pid, sig)`: `sig` to process `pid` (a negative `pid` addresses a
/// process group, 0 as `sig` only checks that it exists). The one wrapper
/// of kill(2) every crate uses ([`crate::process::kill`]).
pub(crate) fn kill(pid: i32, sig: i32) -> io::Result<()> {
    // Safety: kill(2) takes integers only and touches no memory.
    if unsafe { libc::kill(pid, sig) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
