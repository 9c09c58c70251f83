//! The test kit's raw system calls, each behind a small safe wrapper.

/// `kill(pid, sig)`; the result is ignored (the process may be gone).
pub(crate) fn kill(pid: i32, sig: i32) {
    let _ = toolsrv_base::process::kill(pid, sig);
}

/// Every signal back to its default disposition (`SIGKILL` and `SIGSTOP`
/// aside), as a service manager starts a daemon: what the test process
/// ignores (libtest's threads, a library, a test) is not passed on.
/// Async-signal-safe: only `rt_sigaction` system calls, for the child
/// between `fork` and `exec`.
pub(crate) fn default_signal_dispositions() {
    // The kernel's `struct sigaction` is at most 4 words on the supported
    // architectures; all zeroes is SIG_DFL with no flags and an empty mask.
    let dfl = [0u64; 4];
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // Safety: `dfl` outlives the call and is large enough for the
        // kernel's structure; the old action is not asked for. The raw call
        // also reaches the signals glibc reserves for itself (32, 33).
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                dfl.as_ptr(),
                std::ptr::null_mut::<u64>(),
                8usize,
            );
        }
    }
}
