//! The raw system calls of confinement in the parent: the Landlock ABI
//! query, `capget`, and attaching a seccomp filter to the calling thread.
//! (The child's calls, `landlock_restrict_self` and the rest, are in
//! `crate::spawn`'s `sys` module.)

use std::io;

use super::caps::{Caps, Header};

/// `LANDLOCK_CREATE_RULESET_VERSION` from `<linux/landlock.h>`.
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_ulong = 1;

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`: the
/// kernel's Landlock ABI version, or the error.
pub(super) fn landlock_abi_version() -> io::Result<i64> {
    // Safety: with a NULL attribute pointer, size 0 and the VERSION flag the kernel only
    // returns the ABI version (or an error); it reads and writes no user memory.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ret)
}

/// `capget(hdr, data)`: the calling thread's capabilities into `data`.
pub(super) fn capget(hdr: &mut Header, data: &mut Caps) -> io::Result<()> {
    // Safety: capget writes one header and two data structs, both ours.
    let r = unsafe { libc::syscall(libc::SYS_capget, hdr as *mut Header, data.as_mut_ptr()) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, program)` on the calling thread.
pub(super) fn set_seccomp_filter(program: &libc::sock_fprog) -> io::Result<()> {
    // Safety: the kernel copies the program `program` describes (its caller
    // keeps the filter alive across the call); prctl reads nothing else.
    let r = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            program as *const libc::sock_fprog,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `prctl(PR_SET_NO_NEW_PRIVS, 1)` on the calling thread.
pub(super) fn set_no_new_privs() -> io::Result<()> {
    // Safety: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
