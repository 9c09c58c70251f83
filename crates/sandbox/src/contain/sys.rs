//! The few raw system calls of containment, each behind a typed wrapper.

/// Sends `sig` to process `pid` (a negative `pid`: its group); a process
/// that is already gone is no error.
pub(crate) fn kill(pid: i32, sig: i32) {
    let _ = toolsrv_base::process::kill(pid, sig);
}

pub(crate) use toolsrv_base::process::alive;

/// This process's pid.
pub(crate) fn getpid() -> i32 {
    // Safety: getpid has no preconditions.
    unsafe { libc::getpid() }
}

/// Whether this process may create a PID namespace without a user namespace
/// (it holds CAP_SYS_ADMIN): effective uid 0 is the usual case.
pub(crate) fn is_root() -> bool {
    toolsrv_base::effective_uid() == 0
}

/// Whether this process may make entries in `dir` (write and search
/// permission, checked with the effective ids).
pub(crate) fn may_write(dir: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // Safety: `c` is a NUL-terminated path alive across the call.
    unsafe {
        libc::faccessat(
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::W_OK | libc::X_OK,
            libc::AT_EACCESS,
        ) == 0
    }
}
