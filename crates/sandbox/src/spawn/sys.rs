//! Raw system calls for the child: the result, or `-errno`, without touching
//! `errno`.
//!
//! The child shares the parent's memory and, until `execve`, its thread-local
//! storage too: libc's `syscall` would store a failure's errno in the `errno`
//! of the parent thread that cloned it. A vfork parent is suspended meanwhile,
//! but a parent that goes on (see `spawn_detached`) could read that stray
//! value as the result of its own failed call.

use libc::c_long;

/// `syscall(nr, a...)`: the result, or `-errno`.
///
/// # Safety
/// As for the system call `nr` with these arguments.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn call(nr: c_long, a: [c_long; 6]) -> c_long {
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
pub(crate) unsafe fn call(nr: c_long, a: [c_long; 6]) -> c_long {
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
