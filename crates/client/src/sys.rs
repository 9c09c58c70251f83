//! The client's raw system calls, each behind a small safe wrapper.

use std::os::fd::{AsRawFd, BorrowedFd};

/// `shutdown(fd, SHUT_RDWR)`: both directions of the socket end, so a reader
/// blocked on it wakes with end-of-file. Errors are ignored: the socket is
/// being abandoned either way.
pub(crate) fn shutdown_both(fd: BorrowedFd<'_>) {
    // Safety: `fd` is borrowed, so it stays open for this call; shutdown(2)
    // neither closes nor invalidates it and touches no memory of ours.
    unsafe {
        libc::shutdown(fd.as_raw_fd(), libc::SHUT_RDWR);
    }
}
