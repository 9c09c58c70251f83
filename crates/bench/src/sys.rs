//! The bench's raw system calls, each behind a small safe wrapper.

use std::ffi::CString;
use std::io;

/// `posix_spawn` of `argv[0]` with `argv` and an empty environment, default
/// file actions and attributes: the child's pid.
pub(crate) fn posix_spawn(argv: &[CString]) -> io::Result<libc::pid_t> {
    let Some(path) = argv.first() else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    let mut ptrs: Vec<*mut libc::c_char> = argv.iter().map(|a| a.as_ptr().cast_mut()).collect();
    ptrs.push(std::ptr::null_mut());
    let envp: [*mut libc::c_char; 1] = [std::ptr::null_mut()];
    let mut pid: libc::pid_t = 0;
    // Safety: the path and every argv string are NUL-terminated CStrings
    // borrowed for the call; `ptrs` and `envp` are NULL-terminated arrays
    // that outlive it; null file actions and attributes mean the defaults;
    // posix_spawn writes only `pid`.
    let rc = unsafe {
        libc::posix_spawn(
            &mut pid,
            path.as_ptr(),
            std::ptr::null(),
            std::ptr::null(),
            ptrs.as_ptr(),
            envp.as_ptr(),
        )
    };
    if rc == 0 {
        Ok(pid)
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// `waitpid(pid, &status, 0)`: the wait status once `pid` has ended
/// (`EINTR` is returned as an error for the caller to retry).
pub(crate) fn waitpid(pid: libc::pid_t) -> io::Result<libc::c_int> {
    let mut status: libc::c_int = 0;
    // Safety: writes only `status`, a local alive for the call.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    if r == pid {
        Ok(status)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether a wait status says the process exited with status 0.
pub(crate) fn exited_zero(status: libc::c_int) -> bool {
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

/// `sysconf(_SC_CLK_TCK)`: clock ticks per second (0 or less if unknown).
pub(crate) fn clock_ticks() -> libc::c_long {
    // Safety: sysconf with a valid name has no side effects.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }
}
