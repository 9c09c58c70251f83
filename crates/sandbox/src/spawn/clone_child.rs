//! Cloning the child into its run: `clone3` (into the run's v2 group and
//! namespaces) where the kernel allows it, else `clone(2)` with every signal
//! blocked around the call.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::Ordering;

use super::child::{self, ChildArgs};
use super::error::SpawnError;
use super::spec::Join;
use super::{clone3, stack, sys};

/// Clones the vfork child: with `clone3(CLONE_CLEAR_SIGHAND)` where the kernel
/// allows it, else with `clone(2)` and every signal blocked around the call.
///
/// The `clone3` path leaves the signal mask alone: the kernel resets every
/// handled signal in the child, so no handler of ours can run there, and a
/// signal that reaches the child before `execve` takes its default action, as
/// it would in the tool. Blocking signals here would cost two system calls per
/// spawn and, worse, make the kernel queue each SIGCHLD of a tool ending
/// meanwhile (a blocked signal is never discarded as ignored) and wake another
/// thread of the server to discard it: a cross-CPU wake-up per call.
pub(super) fn clone_vfork(
    args: &ChildArgs,
    stack: &stack::ChildStack,
    join: &Join,
) -> Result<(i32, OwnedFd), SpawnError> {
    let mut pidfd: libc::c_int = -1;
    let arg = args as *const ChildArgs as *mut libc::c_void;
    let (low, size) = stack.region();
    args.reset_signals
        .store(clone3::ignored_signals(), Ordering::Relaxed);
    // Safety: as for `clone` in `clone_legacy`; `region` is the same unused stack,
    // and the top of an mmap'd region is page- (so 16-byte) aligned.
    let first = unsafe {
        clone_into_run(
            clone3::Mode::Vfork,
            args,
            join,
            arg,
            (low, size),
            &mut pidfd,
        )
    };
    let started = match first {
        clone3::Outcome::Started(pid) => Ok(pid),
        clone3::Outcome::Failed(errno) => Err(errno),
        clone3::Outcome::Unavailable => {
            args.reset_signals.store(u64::MAX, Ordering::Relaxed);
            args.join_by_procs.store(true, Ordering::Relaxed);
            with_signals_blocked(|| clone_legacy(args, stack, &mut pidfd, join))?
        }
    };
    let pid = started.map_err(|errno| SpawnError::Prepare {
        step: "clone",
        source: io::Error::from_raw_os_error(errno),
    })?;
    if pidfd < 0 {
        return Err(SpawnError::Prepare {
            step: "pidfd",
            source: io::Error::from_raw_os_error(libc::EBADF),
        });
    }
    // Safety: CLONE_PIDFD returned a fresh descriptor that nothing else owns.
    Ok((pid, unsafe { OwnedFd::from_raw_fd(pidfd) }))
}

/// `clone3` of the child into its run: started in the run's v2 group
/// (`CLONE_INTO_CGROUP`) when there is one, and if the kernel refuses that,
/// again without it (the child then writes itself into the group's
/// `cgroup.procs`), with the run's namespaces either way.
///
/// # Safety
/// As for [`clone3::clone3`] with `mode`, `child_main`, `arg` (which points at
/// `args`) and the stack `region`.
pub(super) unsafe fn clone_into_run(
    mode: clone3::Mode<'_>,
    args: &ChildArgs,
    join: &Join,
    arg: *mut libc::c_void,
    region: (*mut libc::c_void, usize),
    pidfd: &mut libc::c_int,
) -> clone3::Outcome {
    let attempts: &[bool] = if join.cgroup >= 0 {
        &[true, false]
    } else {
        &[false]
    };
    let mut outcome = clone3::Outcome::Unavailable;
    for &into_cgroup in attempts {
        // The child reads this only after `clone3` succeeded, and an attempt
        // that failed started no child.
        args.join_by_procs.store(!into_cgroup, Ordering::Relaxed);
        let extra = clone3::Extra {
            flags: join.namespace_flags(),
            cgroup: into_cgroup.then_some(join.cgroup),
        };
        // Safety: forwarded to the caller's contract.
        outcome = unsafe {
            clone3::clone3(
                mode,
                extra,
                child::child_main,
                arg,
                region.0,
                region.1,
                pidfd,
            )
        };
        if matches!(outcome, clone3::Outcome::Started(_)) {
            break;
        }
    }
    outcome
}

/// Runs `f` with every signal blocked in this thread, then restores the mask:
/// the child of `clone(2)` keeps our handlers until it has reset them, so none
/// may be delivered to it before.
fn with_signals_blocked<T>(f: impl FnOnce() -> T) -> Result<T, SpawnError> {
    let saved = sys::parent::block_all_signals().map_err(|errno| SpawnError::Prepare {
        step: "signal mask",
        source: io::Error::from_raw_os_error(errno),
    })?;
    let out = f();
    sys::parent::restore_signal_mask(&saved);
    Ok(out)
}

/// `clone(2)` of the vfork child (where `clone3` is unavailable): its pid, or
/// the errno.
fn clone_legacy(
    args: &ChildArgs,
    stack: &stack::ChildStack,
    pidfd: &mut libc::c_int,
    join: &Join,
) -> Result<i32, i32> {
    let flags = libc::CLONE_VM
        | libc::CLONE_VFORK
        | libc::CLONE_PIDFD
        | libc::SIGCHLD
        | join.namespace_flags() as libc::c_int;
    // Safety: `child_main` only reads `args` and writes its atomics; `args`, the argv/envp
    // arrays and the strings they point to live in the caller's frame, which stays
    // suspended (CLONE_VFORK) until the child has exec'd or exited. The child runs on
    // `stack`, a separate mapping that outlives the call. CLONE_PIDFD stores the pidfd
    // into `pidfd`.
    unsafe {
        sys::parent::clone(
            child::child_main,
            stack.top(),
            flags,
            args as *const ChildArgs as *mut libc::c_void,
            pidfd,
        )
    }
}
