//! The raw system calls of the doctor's probes.

/// `seccomp(2)` operation: is this return action available?
const SECCOMP_GET_ACTION_AVAIL: libc::c_ulong = 2;
/// `SECCOMP_RET_ERRNO`, the action the filter uses.
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;

/// Whether seccomp filters (with the `SECCOMP_RET_ERRNO` action the filter
/// uses) are available to this process; the error otherwise.
pub(crate) fn seccomp_errno_action() -> std::io::Result<()> {
    let action = SECCOMP_RET_ERRNO;
    // Safety: the kernel reads one u32 from `action`, a local alive across
    // the call; this operation changes nothing.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0 as libc::c_ulong,
            &action as *const u32,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The effective uid and gid.
pub(crate) fn effective_ids() -> (u32, u32) {
    // Safety: geteuid and getegid have no preconditions and cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}
