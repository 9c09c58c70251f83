//! The raw system call of the temporary directories: `flock`.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `flock(fd, LOCK_EX | LOCK_NB)`: `Ok(true)` when taken, `Ok(false)` when
/// another open file description holds it.
pub(super) fn try_lock_exclusive(fd: BorrowedFd<'_>) -> io::Result<bool> {
    // Safety: the descriptor is borrowed, so open for the call; flock(2)
    // touches no memory of ours.
    let r = unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Ok(false);
    }
    Err(e)
}
