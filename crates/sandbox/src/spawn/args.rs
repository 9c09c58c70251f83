//! The child's argument block ([`ChildArgs`]) and what it points at: the
//! NULL-terminated string arrays, the seccomp program, this process's pid.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

use super::child::ChildArgs;
use super::error::SpawnError;
use super::spec::Join;
use super::sys;
use crate::confine::Confinement;

/// What the child's strings are: the program, NULL-terminated pointer arrays of
/// argv and envp, the working directory. All must outlive the child's use.
pub(super) struct ChildStrings<'a> {
    pub(super) program: &'a CStr,
    pub(super) argv: &'a [*const libc::c_char],
    pub(super) envp: &'a [*const libc::c_char],
    pub(super) cwd: &'a CStr,
    pub(super) cwd_fd: RawFd,
    pub(super) mount_ns: RawFd,
    pub(super) net_ns: RawFd,
    pub(super) user_ns: RawFd,
}

/// The child's argument block, pointing at `strings`, the descriptors and the
/// seccomp program (which must outlive the child's use too); signals to reset
/// are set before each `clone` attempt.
pub(super) fn child_args(
    strings: ChildStrings<'_>,
    stdin: RawFd,
    output: RawFd,
    files: [RawFd; super::spec::MAX_FILES],
    confinement: Option<&Confinement>,
    seccomp: Option<&libc::sock_fprog>,
    join: &Join,
) -> ChildArgs {
    ChildArgs {
        program: strings.program.as_ptr(),
        argv: strings.argv.as_ptr(),
        envp: strings.envp.as_ptr(),
        cwd: strings.cwd.as_ptr(),
        cwd_fd: strings.cwd_fd,
        mount_ns: strings.mount_ns,
        net_ns: strings.net_ns,
        user_ns: if join.new_user_ns {
            -1
        } else {
            strings.user_ns
        },
        parent_dumpable: strings.user_ns >= 0 && !join.new_user_ns && parent_dumpable(),
        stdin,
        output,
        files,
        ruleset: confinement.and_then(Confinement::ruleset_fd).unwrap_or(-1),
        seccomp: seccomp.map_or(std::ptr::null(), |p| p as *const libc::sock_fprog),
        no_new_privs: confinement.is_some(),
        new_session_keyring: confinement.is_some(),
        session_keyring_required: confinement.is_some_and(Confinement::keyrings),
        caps: confinement.and_then(|c| {
            if join.new_pid_ns && !join.new_user_ns {
                c.caps_for_pid_namespace()
            } else {
                c.caps()
            }
        }),
        parent_pid: own_pid(),
        join: *join,
        join_by_procs: AtomicBool::new(false),
        failed_stage: AtomicU32::new(0),
        failed_errno: AtomicI32::new(0),
        reset_signals: AtomicU64::new(u64::MAX),
    }
}

/// Whether this process was dumpable before its first child changed its
/// credentials (which makes the memory it shares with the child, this
/// process's, not dumpable: the child sets it back), asked of the kernel
/// once, before any such child: one `prctl` less per spawn.
fn parent_dumpable() -> bool {
    static DUMPABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DUMPABLE.get_or_init(sys::parent::dumpable)
}

/// This process's pid, asked of the kernel once: one `getpid` less per
/// spawn. A child made by `fork(3)` forgets the parent's (an atfork handler);
/// one made by a raw `clone` that spawns tools would pass a stale pid, and its
/// children would fail their parent check and exit 127 (they would not run
/// unwatched).
fn own_pid() -> libc::pid_t {
    static PID: AtomicI32 = AtomicI32::new(0);
    static FORGET_ON_FORK: std::sync::Once = std::sync::Once::new();
    extern "C" fn forget() {
        PID.store(0, Ordering::Relaxed);
    }
    // The handler only stores to an atomic, which is async-signal-safe as a
    // fork child handler must be.
    FORGET_ON_FORK.call_once(|| sys::parent::on_fork_child(forget));
    match PID.load(Ordering::Relaxed) {
        0 => {
            let pid = sys::parent::getpid();
            PID.store(pid, Ordering::Relaxed);
            pid
        }
        pid => pid,
    }
}

/// The `sock_fprog` over `filter` (which must outlive it).
pub(super) fn seccomp_fprog(filter: &[libc::sock_filter]) -> Result<libc::sock_fprog, SpawnError> {
    Ok(libc::sock_fprog {
        len: u16::try_from(filter.len()).map_err(|_| SpawnError::Prepare {
            step: "seccomp program",
            source: io::Error::from_raw_os_error(libc::E2BIG),
        })?,
        filter: filter.as_ptr().cast_mut(),
    })
}

/// Builds a NULL-terminated pointer array over `strings` (which must outlive it).
pub(super) fn null_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}
