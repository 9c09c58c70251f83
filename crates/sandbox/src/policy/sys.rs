//! The raw system calls of policy resolution: this process's user id and an
//! access check, each behind a typed wrapper.

use std::path::Path;

/// The real user id of this process.
pub(super) fn getuid() -> u32 {
    // Safety: getuid(2) has no preconditions, cannot fail and touches no memory.
    unsafe { libc::getuid() }
}

/// Whether this process may read `path` (for a directory: list it), checked
/// with the effective ids.
pub(super) fn may_read(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // Safety: `c` is a NUL-terminated path that outlives the call.
    unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::R_OK, libc::AT_EACCESS) == 0 }
}
