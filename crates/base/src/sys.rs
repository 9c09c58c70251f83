//! This crate's one raw system call, behind a safe wrapper.

/// `geteuid()`.
pub(crate) fn geteuid() -> u32 {
    // Safety: geteuid(2) has no preconditions, cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}
