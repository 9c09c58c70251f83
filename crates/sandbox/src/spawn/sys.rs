//! The child's system calls: one small wrapper per call, returning the result
//! or the errno without touching `errno`, and without allocating.
//!
//! A wrapper that takes only integers (or references whose validity is all the
//! kernel needs) is a safe function; one that passes raw pointers on is an
//! `unsafe fn` whose Safety note says what its caller must guarantee. They are
//! made for the child between `clone` and `execve`: its descriptor table, signal
//! state and credentials are its own, whatever it changes of them.
//!
//! The child shares the parent's memory and, until `execve`, its thread-local
//! storage too: libc's `syscall` would store a failure's errno in the `errno`
//! of the parent thread that cloned it. A vfork parent is suspended meanwhile,
//! but a parent that goes on (see `spawn_detached`) could read that stray
//! value as the result of its own failed call.

pub(crate) mod clone3;
pub(crate) mod parent;

use libc::{c_char, c_int, c_long, c_void};

/// A failed call's error number (positive).
pub(crate) type Errno = i32;

/// The kernel's signal set size in bytes.
const KERNEL_SIGSET_SIZE: c_long = 8;

/// A raw result: the value, or the errno of `-errno`.
#[inline(always)]
fn result(ret: c_long) -> Result<c_long, Errno> {
    if ret < 0 {
        Err(i32::try_from(-ret).unwrap_or(libc::EIO))
    } else {
        Ok(ret)
    }
}

/// A system call with integer arguments that read or write no memory of ours.
#[inline(always)]
fn integers(nr: c_long, a: [c_long; 6]) -> Result<c_long, Errno> {
    // Safety: every argument is an integer the kernel does not dereference
    // (the callers below pass no addresses), so no memory is read or written.
    result(unsafe { call(nr, a) })
}

/// `exit_group(code)`: ends the process at once, running nothing of user space.
#[inline(always)]
pub(crate) fn exit_group(code: c_int) -> ! {
    loop {
        let _ = integers(libc::SYS_exit_group, [c_long::from(code), 0, 0, 0, 0, 0]);
    }
}

/// `setpgid(pid, pgid)`.
#[inline(always)]
pub(crate) fn setpgid(pid: libc::pid_t, pgid: libc::pid_t) -> Result<(), Errno> {
    integers(
        libc::SYS_setpgid,
        [c_long::from(pid), c_long::from(pgid), 0, 0, 0, 0],
    )
    .map(drop)
}

/// `setsid()`: a new session and process group, led by this process.
#[inline(always)]
pub(crate) fn setsid() -> Result<(), Errno> {
    integers(libc::SYS_setsid, [0; 6]).map(drop)
}

/// `prctl(PR_SET_PDEATHSIG, sig)`: `sig` arrives when the parent thread exits.
#[inline(always)]
pub(crate) fn set_parent_death_signal(sig: c_int) -> Result<(), Errno> {
    integers(
        libc::SYS_prctl,
        [
            c_long::from(libc::PR_SET_PDEATHSIG),
            c_long::from(sig),
            0,
            0,
            0,
            0,
        ],
    )
    .map(drop)
}

/// `getppid()`.
#[inline(always)]
pub(crate) fn getppid() -> libc::pid_t {
    // getppid cannot fail; the value is a pid.
    integers(libc::SYS_getppid, [0; 6]).map_or(-1, |p| p as libc::pid_t)
}

/// `dup3(old, new, 0)`: `new` becomes a copy of `old` (and is closed first
/// when open).
#[inline(always)]
pub(crate) fn dup3(old: c_int, new: c_int) -> Result<(), Errno> {
    integers(
        libc::SYS_dup3,
        [c_long::from(old), c_long::from(new), 0, 0, 0, 0],
    )
    .map(drop)
}

/// `close_range(first, ~0, CLOSE_RANGE_CLOEXEC)`: every descriptor from
/// `first` on is closed at `execve`.
#[inline(always)]
pub(crate) fn close_range_on_exec(first: u32) -> Result<(), Errno> {
    integers(
        libc::SYS_close_range,
        [
            c_long::from(first),
            c_long::from(u32::MAX),
            libc::CLOSE_RANGE_CLOEXEC as c_long,
            0,
            0,
            0,
        ],
    )
    .map(drop)
}

/// `setns(fd, nstype)`: enters the namespace `fd`.
#[inline(always)]
pub(crate) fn setns(fd: c_int, nstype: c_int) -> Result<(), Errno> {
    integers(
        libc::SYS_setns,
        [c_long::from(fd), c_long::from(nstype), 0, 0, 0, 0],
    )
    .map(drop)
}

/// `setgroups(0, NULL)`: no supplementary group.
#[inline(always)]
pub(crate) fn setgroups_none() -> Result<(), Errno> {
    integers(libc::SYS_setgroups, [0; 6]).map(drop)
}

/// `setresgid(gid, gid, gid)`.
#[inline(always)]
pub(crate) fn setresgid(gid: libc::gid_t) -> Result<(), Errno> {
    let g = c_long::from(gid);
    integers(libc::SYS_setresgid, [g, g, g, 0, 0, 0]).map(drop)
}

/// `setresuid(uid, uid, uid)`.
#[inline(always)]
pub(crate) fn setresuid(uid: libc::uid_t) -> Result<(), Errno> {
    let u = c_long::from(uid);
    integers(libc::SYS_setresuid, [u, u, u, 0, 0, 0]).map(drop)
}

/// `fchdir(fd)`.
#[inline(always)]
pub(crate) fn fchdir(fd: c_int) -> Result<(), Errno> {
    integers(libc::SYS_fchdir, [c_long::from(fd), 0, 0, 0, 0, 0]).map(drop)
}

/// `chdir(path)`.
///
/// # Safety
/// `path` points to a NUL-terminated string that stays alive during the call.
#[inline(always)]
pub(crate) unsafe fn chdir(path: *const c_char) -> Result<(), Errno> {
    // Safety: the kernel reads the string the caller vouches for.
    result(unsafe { call(libc::SYS_chdir, [path as c_long, 0, 0, 0, 0, 0]) }).map(drop)
}

/// `keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)`: the calling process gets a
/// new, empty, anonymous session keyring (NULL is not dereferenced: it
/// means "no name").
#[inline(always)]
pub(crate) fn join_new_session_keyring() -> Result<(), Errno> {
    integers(
        libc::SYS_keyctl,
        [
            c_long::from(crate::confine::KEYCTL_JOIN_SESSION_KEYRING),
            0,
            0,
            0,
            0,
            0,
        ],
    )
    .map(drop)
}

/// `prctl(PR_SET_DUMPABLE, 1)`: the memory this process runs on (until
/// `execve`, the spawning server's) may be dumped and traced by its owner.
#[inline(always)]
pub(crate) fn set_dumpable() -> Result<(), Errno> {
    integers(
        libc::SYS_prctl,
        [c_long::from(libc::PR_SET_DUMPABLE), 1, 0, 0, 0, 0],
    )
    .map(drop)
}

/// `prctl(PR_SET_NO_NEW_PRIVS, 1)`.
#[inline(always)]
pub(crate) fn set_no_new_privs() -> Result<(), Errno> {
    integers(
        libc::SYS_prctl,
        [c_long::from(libc::PR_SET_NO_NEW_PRIVS), 1, 0, 0, 0, 0],
    )
    .map(drop)
}

/// `capset`: the calling thread's capabilities become `caps`.
#[inline(always)]
pub(crate) fn capset(caps: &crate::confine::caps::Caps) -> Result<(), Errno> {
    // The kernel writes its preferred version into a header it refuses.
    let mut header = crate::confine::caps::HEADER;
    let header: *mut crate::confine::caps::Header = &mut header;
    // Safety: the kernel reads (and may write) the header, a local, and reads
    // the two data words `caps` refers to; both live across the call.
    result(unsafe {
        call(
            libc::SYS_capset,
            [header as c_long, caps.as_ptr() as c_long, 0, 0, 0, 0],
        )
    })
    .map(drop)
}

/// `landlock_restrict_self(ruleset, 0)`.
#[inline(always)]
pub(crate) fn landlock_restrict_self(ruleset: c_int) -> Result<(), Errno> {
    integers(
        libc::SYS_landlock_restrict_self,
        [c_long::from(ruleset), 0, 0, 0, 0, 0],
    )
    .map(drop)
}

/// `prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, program)`.
///
/// # Safety
/// `program` points to a `sock_fprog` whose `filter` points to `len`
/// instructions, all alive during the call.
#[inline(always)]
pub(crate) unsafe fn set_seccomp_filter(program: *const libc::sock_fprog) -> Result<(), Errno> {
    // Safety: the kernel reads the program the caller vouches for (and copies it).
    result(unsafe {
        call(
            libc::SYS_prctl,
            [
                c_long::from(libc::PR_SET_SECCOMP),
                c_long::from(libc::SECCOMP_MODE_FILTER),
                program as c_long,
                0,
                0,
                0,
            ],
        )
    })
    .map(drop)
}

/// `execve(program, argv, envp)`: returns only on failure, with its errno.
///
/// # Safety
/// `program` is a NUL-terminated string, `argv` and `envp` null-terminated
/// arrays of such strings, all alive during the call.
#[inline(always)]
pub(crate) unsafe fn execve(
    program: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> Errno {
    // Safety: the kernel reads the strings and arrays the caller vouches for.
    let ret = unsafe {
        call(
            libc::SYS_execve,
            [program as c_long, argv as c_long, envp as c_long, 0, 0, 0],
        )
    };
    match result(ret) {
        Err(errno) => errno,
        // execve returns only on failure.
        Ok(_) => libc::EIO,
    }
}

/// `write(fd, bytes)`: how many bytes were written.
#[inline(always)]
pub(crate) fn write(fd: c_int, bytes: &[u8]) -> Result<usize, Errno> {
    // Safety: the kernel reads `bytes.len()` bytes of the slice, alive across the call.
    result(unsafe {
        call(
            libc::SYS_write,
            [
                c_long::from(fd),
                bytes.as_ptr() as c_long,
                bytes.len() as c_long,
                0,
                0,
                0,
            ],
        )
    })
    .map(|n| n as usize)
}

/// `prlimit64(0, resource, [soft, hard], NULL)`: sets a limit of this process.
#[inline(always)]
pub(crate) fn set_rlimit(resource: c_int, soft: u64, hard: u64) -> Result<(), Errno> {
    let limit = [soft, hard];
    // Safety: the kernel reads the two words of `limit`, a local; the old
    // limit is not asked for (null), so nothing is written.
    result(unsafe {
        call(
            libc::SYS_prlimit64,
            [
                0,
                c_long::from(resource),
                limit.as_ptr() as c_long,
                std::ptr::null_mut::<c_void>() as c_long,
                0,
                0,
            ],
        )
    })
    .map(drop)
}

/// `rt_sigaction(sig, SIG_DFL)`: `sig` takes its default action.
#[inline(always)]
pub(crate) fn reset_signal_action(sig: c_int) -> Result<(), Errno> {
    // The kernel `struct sigaction` is at most 4 words on the supported
    // architectures; all zeroes means SIG_DFL, no flags, empty mask, whatever
    // the field order.
    let default_action = [0u64; 4];
    // Safety: the kernel reads the action from `default_action`, a local; the
    // old action is not asked for (null), so nothing is written.
    result(unsafe {
        call(
            libc::SYS_rt_sigaction,
            [
                c_long::from(sig),
                default_action.as_ptr() as c_long,
                std::ptr::null_mut::<c_void>() as c_long,
                KERNEL_SIGSET_SIZE,
                0,
                0,
            ],
        )
    })
    .map(drop)
}

/// `rt_sigprocmask(SIG_SETMASK, {})`: no signal is blocked.
#[inline(always)]
pub(crate) fn unblock_all_signals() -> Result<(), Errno> {
    let empty: u64 = 0;
    // Safety: the kernel reads the set from `empty`, a local of
    // KERNEL_SIGSET_SIZE bytes; the old set is not asked for (null).
    result(unsafe {
        call(
            libc::SYS_rt_sigprocmask,
            [
                c_long::from(libc::SIG_SETMASK),
                (&empty as *const u64) as c_long,
                std::ptr::null_mut::<c_void>() as c_long,
                KERNEL_SIGSET_SIZE,
                0,
                0,
            ],
        )
    })
    .map(drop)
}

/// `syscall(nr, a...)`: the result, or `-errno`.
///
/// # Safety
/// As for the system call `nr` with these arguments.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn call(nr: c_long, a: [c_long; 6]) -> c_long {
    let ret: c_long;
    // Safety: forwarded to the caller; the `syscall` instruction clobbers only
    // rax (the result), rcx and r11.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr => ret,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// `syscall(nr, a...)`: the result, or `-errno`. Elsewhere libc's wrapper,
/// which does set `errno`: only the vfork path (parent suspended) runs there.
///
/// # Safety
/// As for the system call `nr` with these arguments.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
unsafe fn call(nr: c_long, a: [c_long; 6]) -> c_long {
    // Safety: forwarded to the caller.
    let ret = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
    if ret == -1 {
        -c_long::from(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        )
    } else {
        ret
    }
}

/// `openat(AT_FDCWD, path, O_WRONLY | O_CLOEXEC)`: the descriptor.
///
/// # Safety
/// `path` points to a NUL-terminated string that stays alive during the call.
#[inline(always)]
pub(crate) unsafe fn open_write_only(path: *const c_char) -> Result<c_int, Errno> {
    // Safety: the kernel reads the string the caller vouches for.
    let ret = unsafe {
        call(
            libc::SYS_openat,
            [
                c_long::from(libc::AT_FDCWD),
                path as c_long,
                c_long::from(libc::O_WRONLY | libc::O_CLOEXEC),
                0,
                0,
                0,
            ],
        )
    };
    result(ret).map(|fd| fd as c_int)
}

/// `close(fd)`; an error is ignored (the descriptor is gone either way).
#[inline(always)]
pub(crate) fn close(fd: c_int) {
    let _ = integers(libc::SYS_close, [c_long::from(fd), 0, 0, 0, 0, 0]);
}
