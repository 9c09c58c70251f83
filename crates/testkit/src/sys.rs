//! The test kit's raw system calls, each behind a small safe wrapper.

/// `kill(pid, sig)`; the result is ignored (the process may be gone).
pub(crate) fn kill(pid: i32, sig: i32) {
    // Safety: kill(2) takes integers only and touches no memory.
    unsafe {
        libc::kill(pid, sig);
    }
}
