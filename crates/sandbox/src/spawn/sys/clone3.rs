//! The `clone3` system call itself: the kernel's `struct clone_args` and the
//! few lines of assembly that make the call and, in the child, call the child
//! function on its new stack (see `spawn::clone3` for when it is used).

use libc::{c_int, c_long, c_void};

/// `struct clone_args` up to `cgroup` (version 2, 88 bytes); the first 64
/// bytes are version 0, which is what is passed when no cgroup is asked for
/// (so kernels before 5.7 take it too).
#[repr(C)]
pub(crate) struct CloneArgs {
    pub(crate) flags: u64,
    pub(crate) pidfd: u64,
    pub(crate) child_tid: u64,
    pub(crate) parent_tid: u64,
    pub(crate) exit_signal: u64,
    pub(crate) stack: u64,
    pub(crate) stack_size: u64,
    pub(crate) tls: u64,
    pub(crate) set_tid: u64,
    pub(crate) set_tid_size: u64,
    pub(crate) cgroup: u64,
}

/// The system call; returns the child's pid or `-errno`. In the child, calls
/// `child(arg)` on the new stack (it never returns; `ud2` traps if it does).
///
/// # Safety
/// See `spawn::clone3::clone3`.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn raw_clone3(
    args: &CloneArgs,
    size: usize,
    child: extern "C" fn(*mut c_void) -> c_int,
    arg: *mut c_void,
) -> c_long {
    let ret: c_long;
    // Safety: the kernel reads `args` (valid for the call). In the parent only rax,
    // rcx and r11 change (declared). The child starts with the parent's registers
    // and rsp at the top of its own stack, clears the frame pointer, and calls
    // `child(arg)` with the System V convention (arg in rdi, rsp 16-byte aligned
    // before the call); it never comes back into this function.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r12",
            "call r13",
            "ud2",
            "2:",
            inlateout("rax") libc::SYS_clone3 => ret,
            in("rdi") args as *const CloneArgs,
            in("rsi") size,
            in("r12") arg,
            in("r13") child,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// No `clone3` path on this architecture: always `-ENOSYS` (use `clone`).
///
/// # Safety
/// Trivially safe; `unsafe` only to match the x86_64 version.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) unsafe fn raw_clone3(
    _args: &CloneArgs,
    _size: usize,
    _child: extern "C" fn(*mut c_void) -> c_int,
    _arg: *mut c_void,
) -> c_long {
    -(libc::ENOSYS as c_long)
}
