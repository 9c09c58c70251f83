//! The child spawn path: a vfork-style child that joins its own process group, applies
//! the confinement and `exec`s the tool.
//!
//! The child is created with `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD)` (or
//! `clone3` with `CLONE_CLEAR_SIGHAND`, see the `clone3` module), like
//! glibc's `posix_spawn`: no page tables are copied, so the cost does not grow with the
//! server's memory. The child runs `child::child_main` on a small private stack and only
//! makes raw system calls until `execve`. [`spawn`] waits (`CLONE_VFORK`) until the child
//! has exec'd; [`spawn_detached`] does not, and keeps what the child reads alive in a
//! `launch::Launch` owned by the [`Child`].
//!
//! The parent-death signal is tied to the *thread* that called [`spawn`]: call it from a
//! thread that lives as long as the children (a runtime worker thread, not a short-lived
//! blocking-pool thread), or the child is killed when that thread exits.

mod args;
mod child;
mod clone3;
mod clone_child;
mod error;
mod idmap;
mod launch;
mod process;
mod spec;
mod stack;
mod stdio;
mod sys;

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::Ordering;

pub use error::SpawnError;
pub use process::{Child, ExitStatus};
pub use spec::{Join, SpawnSpec, MAX_FILES};
pub use stdio::preopen;

use crate::confine::Confinement;
use args::{child_args, null_terminated, seccomp_fprog, ChildStrings};
use child::ChildArgs;
use clone_child::{clone_into_run, clone_vfork};
use error::child_error;
use stdio::{file_fds, output_fd, stdin_fd};

/// Starts the tool described by `spec` and returns once it has exec'd (or failed).
///
/// On success the child runs `spec.program` as the leader of its own process group, with
/// stdin from `spec.stdin` (else `/dev/null`), stdout and stderr on `spec.output`, no other descriptor, default
/// signal handling, and the confinement applied.
pub fn spawn(spec: &SpawnSpec) -> Result<Child, SpawnError> {
    let (stdin, _stdin_dup) = stdin_fd(spec)?;
    let (output, _output_dup) = output_fd(spec)?;
    let (files, _file_dups) = file_fds(spec)?;
    let argv = null_terminated(spec.argv);
    let envp = null_terminated(spec.envp);
    let fprog = spec
        .confinement
        .and_then(Confinement::seccomp_program)
        .map(seccomp_fprog)
        .transpose()?;
    let args = child_args(
        ChildStrings {
            program: spec.program,
            argv: &argv,
            envp: &envp,
            cwd: spec.cwd,
            cwd_fd: spec.cwd_fd.map_or(-1, |fd| fd.as_raw_fd()),
            mount_ns: spec.mount_ns.map_or(-1, |fd| fd.as_raw_fd()),
            net_ns: spec.net_ns.map_or(-1, |fd| fd.as_raw_fd()),
            user_ns: spec.user_ns.map_or(-1, |fd| fd.as_raw_fd()),
        },
        stdin,
        output,
        files,
        spec.confinement,
        fprog.as_ref(),
        &spec.join,
    );
    // One stack per thread, reused: CLONE_VFORK keeps this thread suspended until
    // the child has exec'd or exited, so the stack is free again when clone
    // returns (and no other spawn can run on this thread meanwhile).
    let (pid, pidfd) = stack::with_thread_stack(|stack| clone_vfork(&args, stack, &spec.join))
        .map_err(|source| SpawnError::Prepare {
        step: "stack",
        source,
    })??;
    let stage = args.failed_stage.load(Ordering::Acquire);
    if stage == 0 {
        return Ok(Child::new(pid, pidfd));
    }
    let errno = args.failed_errno.load(Ordering::Relaxed);
    // The child has exited (or is about to): reap it so no zombie is left.
    let _ = process::wait_pidfd(std::os::fd::AsFd::as_fd(&pidfd), 0);
    Err(child_error(spec.program, spec.cwd, stage, errno))
}

/// Starts the tool described by `spec` like [`spawn`], but returns as soon as the
/// child exists, without waiting for its `execve`: the calling thread goes on
/// while the child sets itself up (on a loaded machine that wait, with the child
/// queued for a CPU behind running tools, was a few hundred µs per spawn).
///
/// The child is already the leader of its own process group when this returns
/// (the parent calls `setpgid` too), so [`Child::signal_group`] reaches it;
/// except the first process of a PID namespace, which leads a session of its
/// own as soon as it runs (kill it by pid until then). A
/// failure of the child's setup (no such program, a bad working directory, a
/// refused confinement) is not returned here: the child exits with status 127
/// and [`Child::setup_error`] tells why once it has been reaped.
///
/// Uses `clone3` without `CLONE_VFORK` (x86_64); where that is unavailable it is
/// [`spawn`], and setup failures are returned at once as there.
pub fn spawn_detached(spec: &SpawnSpec) -> Result<Child, SpawnError> {
    if !clone3::available() {
        return spawn(spec);
    }
    // A duplicate made for stdin or the output may be closed once `clone`
    // returned: the child has its own copy of the descriptor table.
    let (stdin, _stdin_dup) = stdin_fd(spec)?;
    let (output, _output_dup) = output_fd(spec)?;
    let (files, _file_dups) = file_fds(spec)?;
    let launch = launch::Launch::new(spec, stdin, output, files)?;
    launch
        .args
        .reset_signals
        .store(clone3::ignored_signals(), Ordering::Relaxed);
    let stack = launch::take_stack().map_err(|source| SpawnError::Prepare {
        step: "stack",
        source,
    })?;
    let (low, size) = stack.region();
    let mut pidfd: libc::c_int = -1;
    let arg = &launch.args as *const ChildArgs as *mut libc::c_void;
    // Safety: the child runs `child_main` on `stack` and reads only the launch,
    // which is boxed (stable address) and kept unchanged until the kernel clears
    // `in_use` (the `Child` owns it; `launch::retire` parks it while the child may
    // still read it); the stack is lent (`launch::lend`) until then too.
    // `child_main` makes raw system calls only, which leave this thread's errno
    // alone (`sys`).
    let outcome = unsafe {
        clone_into_run(
            clone3::Mode::Detached {
                in_use: &launch.in_use,
            },
            &launch.args,
            &spec.join,
            arg,
            (low, size),
            &mut pidfd,
        )
    };
    let pid = match outcome {
        clone3::Outcome::Started(pid) => {
            launch::lend(stack, launch.in_use.clone());
            pid
        }
        clone3::Outcome::Failed(errno) => {
            launch::give_back(stack);
            launch::discard(launch);
            return Err(SpawnError::Prepare {
                step: "clone",
                source: io::Error::from_raw_os_error(errno),
            });
        }
        clone3::Outcome::Unavailable => {
            launch::give_back(stack);
            launch::discard(launch);
            return spawn(spec);
        }
    };
    // The child makes itself a group leader too; whichever is first wins, and a
    // child that has exec'd already (EACCES) or exited (ESRCH) needs nothing.
    // The first process of a PID namespace makes itself a session leader
    // instead, which a group leader cannot become: that one is left alone.
    if !spec.join.new_pid_ns {
        // The raw call leaves this thread's errno alone; its result is not needed.
        let _ = sys::setpgid(pid, pid);
    }
    if pidfd < 0 {
        // Cannot happen with CLONE_PIDFD; the child is left to the reaper, and
        // its launch parked until the child is done with it.
        launch::retire(launch);
        return Err(SpawnError::Prepare {
            step: "pidfd",
            source: io::Error::from_raw_os_error(libc::EBADF),
        });
    }
    // Safety: CLONE_PIDFD returned a fresh descriptor that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    Ok(Child::detached(pid, pidfd, launch))
}

/// Use `clone(2)` and the per-signal reset from now on, as on kernels or
/// architectures without `clone3` (for the tests of that path).
#[doc(hidden)]
pub fn disable_clone3() {
    clone3::disable();
}
